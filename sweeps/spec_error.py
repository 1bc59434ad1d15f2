"""The refusal of a sweep spec, :class:`SpecError`, and how a bad value is echoed in its message."""

from __future__ import annotations

from typing import Any

#: Characters of a bad value (or name) echoed in a message.
MAX_ECHO = 100


class SpecError(ValueError):
    """A sweep spec was refused. ``problems`` lists ``(field, reason)`` pairs."""

    #: Problems listed at most (the rest are counted), and characters of a field name or reason.
    MAX_LISTED, MAX_FIELD, MAX_REASON = 20, 200, 2000

    def __init__(self, problems: list[tuple[str, str]], name: str | None = None):
        self.problems = problems
        head = f"invalid sweep spec{f' {cut(name)!r}' if name else ''}:"
        lines = [(cut(f, self.MAX_FIELD), cut(r, self.MAX_REASON)) for f, r in problems[: self.MAX_LISTED]]
        if len(problems) == 1:  # one problem, one line
            super().__init__(f"{head} {lines[0][0]}: {lines[0][1]}")
        else:
            more = [f"  … and {len(problems) - self.MAX_LISTED} more"] if len(problems) > self.MAX_LISTED else []
            super().__init__("\n".join([head] + [f"  - {f}: {r}" for f, r in lines] + more))


def cut(text: str, limit: int = MAX_ECHO) -> str:
    """``text`` cut to about ``limit`` characters for a message."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def short(value: Any) -> str:
    """``repr(value)`` cut to about :data:`MAX_ECHO` characters: a bad value as echoed in a message."""
    return cut(repr(value))

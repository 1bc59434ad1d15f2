"""Reading a spec file: a regular ``.toml`` or ``.yaml``/``.yml`` file of UTF-8 text, at most
:data:`MAX_SPEC_BYTES`, parsed into a plain dict (no validation; :func:`geosweep.sweeps.spec.parse_spec`
validates it). Every refusal is a :class:`~geosweep.sweeps.spec_error.SpecError` of the field ``file``."""

from __future__ import annotations

import copy
import hashlib
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import yaml

from geosweep.sweeps.spec_error import SpecError, cut, short

#: Largest spec file read (bytes); a larger one is refused after this many (a device or FIFO before opening).
MAX_SPEC_BYTES = 4 * 2**20


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """Parse a ``.toml`` or ``.yaml``/``.yml`` file into a plain dict (no validation)."""
    path = Path(path)
    if path.suffix not in (".toml", ".yaml", ".yml"):  # checked before anything is read
        raise SpecError([("file", f"{path.name}: use a .toml, .yaml or .yml file")])
    raw = _read_regular_file(path)
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError([("file", f"{path} is larger than {MAX_SPEC_BYTES // 2**20} MiB: not a sweep spec")])
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark is not part of the text
    except UnicodeDecodeError as e:
        where = f"byte 0x{raw[e.start]:02x} at offset {e.start}"
        raise SpecError([("file", f"{path.name} is not UTF-8 text ({where})")]) from None
    key = (path.suffix, hashlib.sha256(raw).digest())
    if key in _PARSED:  # the same text parsed before in this process (firstrun, then make_plan)
        return copy.deepcopy(_PARSED[key])
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        reason = cut(_one_line_error(e), 300)
        raise SpecError([("file", f"{path.name} is not valid {path.suffix[1:].upper()}: {reason}")]) from None
    if not isinstance(data, dict):
        raise SpecError([("file", f"{path.name} must contain a table/mapping at top level")])
    _PARSED.clear()  # only the last text: a 10⁶-cell spec's seed list is parsed once, not per reader
    _PARSED[key] = copy.deepcopy(data)
    return data


#: process-wide state: the last spec text :func:`read_spec_file` parsed: (suffix, sha256 of its bytes) → its data
_PARSED: dict[tuple[str, bytes], dict[str, Any]] = {}


def _read_regular_file(path: Path) -> bytes:
    """At most ``MAX_SPEC_BYTES + 1`` bytes of a regular file. Opened without blocking and checked
    before reading: a FIFO (which would block), a device (``/dev/zero``) or a directory is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise SpecError([("file", f"cannot read {path}: {e.strerror or e}")]) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError([("file", f"{path} is not a regular file (a FIFO, device or directory): not a sweep spec")])
        try:
            return f.read(MAX_SPEC_BYTES + 1)
        except OSError as e:
            raise SpecError([("file", f"cannot read {path}: {e.strerror or e}")]) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader refusing a key given twice in one mapping (YAML itself keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {short(key)}", key_node.start_mark
                )  # fmt: skip
        return super().construct_mapping(node, deep=deep)


def _one_line_error(e: Exception) -> str:
    """A parser's error on one line: YAML's problem and its position (not the quoted snippet)."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem:
        mark = e.problem_mark
        return f"{e.problem}" + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return " ".join(str(e).split())

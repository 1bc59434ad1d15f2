"""The peer side of the line protocol (stdlib + NumPy only: imported inside a peer's venv).

A peer script is a long-lived process: the driver (``run.py``, main environment) writes one
JSON object per line on its stdin (``{"op": NAME, ...}``) and reads one JSON object per line
from its stdout (``{"ok": true, ...}`` or ``{"ok": false, "error": TEXT}``). States go both
ways as ``.npy`` files named in the messages, so nothing of geosweep is imported here.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def serve(handlers: dict[str, Handler]) -> None:
    """Answer requests until stdin closes or ``{"op": "quit"}``. The protocol gets a private
    copy of file descriptor 1; fd 1 itself and ``sys.stdout`` then point at stderr, so nothing a
    peer library prints (from Python or C) can corrupt the replies."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg.get("op")
        if op == "quit":
            break
        try:
            if op not in handlers:
                raise ValueError(f"unknown op {op!r}")
            c0, t0 = time.process_time(), time.perf_counter()
            reply = {"ok": True, **handlers[op](msg)}
            # CPU seconds of every thread of the process against wall seconds: ≈ 1 on one core
            reply["cpu_over_wall"] = (time.process_time() - c0) / max(time.perf_counter() - t0, 1e-9)
        except Exception as exc:  # reported to the driver, which prints one line
            traceback.print_exc(file=sys.stderr)
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def timed(fn: Callable[[], Any], repeats: int) -> dict[str, list[float]]:
    """Wall and CPU seconds (all threads of the process) of ``repeats`` calls of ``fn``; each
    call must block until its result is done."""
    wall, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"seconds": wall, "cpu_seconds": cpu}

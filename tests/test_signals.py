"""Interrupts and hangs with real processes: a signal raised where Python swallows exceptions (a GC
callback) still stops the run, a second signal still works, a terminal's Ctrl-C (SIGINT to the whole
process group) and SIGTERM stop ``geosweep run`` with one line on every path, and a paused worker of
an ``--address`` cluster is named within a bounded time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: a process that gets SIGTERM while Python code runs inside a GC callback (as distributed's GC
#: diary does), or whose library swallows the first KeyboardInterrupt
SCRIPT = textwrap.dedent(
    """
    import gc, os, signal, sys, threading, time
    from flows.output import Interrupts

    sent = []

    def signal_inside_gc(phase, info):
        if phase == "start" and not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)  # the handler runs here, inside the GC callback

    def swallowing_library():
        try:
            time.sleep(5)
        except BaseException:
            print("swallowed", flush=True)

    with Interrupts() as it:
        try:
            if sys.argv[1] == "gc":
                gc.callbacks.append(signal_inside_gc)
                gc.collect()
            else:
                threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
                threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
                swallowing_library()
            time.sleep(10)
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            it.caught()
            print("interrupted", it.exit_code, flush=True)
            sys.exit(it.exit_code)
    """
)


@pytest.mark.parametrize("case", ["gc", "second"])
def test_no_signal_is_lost(tmp_path, case):
    """A SIGTERM inside a GC callback ("Exception ignored" before) and a second signal after a
    swallowed first one both stop the process: exit 143 from the first signal, nothing printed."""
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), case], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "interrupted 143", (p.stdout, p.stderr)
    assert p.returncode == 143 and p.stderr == ""


def _store_files(store) -> dict[str, tuple[int, int]]:
    """Every file of a local store: (mtime_ns, size)."""
    return {
        os.path.relpath(os.path.join(d, f), store): (
            os.stat(os.path.join(d, f)).st_mtime_ns,
            os.path.getsize(os.path.join(d, f)),
        )
        for d, _, files in os.walk(store)
        for f in files
    }

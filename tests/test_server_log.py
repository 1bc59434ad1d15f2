"""Prefect's temporary server writes its own log to a file, not to the run's stderr: its internal
retries (the event consumer's sqlite "database is locked" tracebacks while another run uses the same
Prefect database) are not the run's errors. A server that dies is named with the end of its log."""

from __future__ import annotations

import os
import re
import subprocess
import sys

SCRIPT = """
from geosweep.flows.output import configure
from geosweep.flows.prefect_server import _TemporaryServer
configure()
server = _TemporaryServer()
server.join()
print("LOG", server.log)
"""


def _run(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180)


def test_a_server_that_dies_is_one_warning_naming_its_kept_log(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{tmp_path}/missing/dir/prefect.db"
    p = _run(env)
    head = p.stderr.splitlines()[0]
    m = re.match(r"geosweep: Prefect's temporary server exited \(\d+\); its log \((.+)\) ends:", head)
    assert m, p.stderr[-2000:]
    log = m.group(1)
    assert "unable to open database file" in p.stderr and os.path.exists(log), p.stderr[-2000:]
    os.unlink(log)


def test_a_server_that_answers_logs_nothing_into_the_run_and_leaves_no_file(tmp_path):
    """The server set to log every debug line (as its event consumer logs its retries): none reaches
    the run's stderr, and its log file is gone after the run."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    env["PREFECT_SERVER_LOGGING_LEVEL"] = "DEBUG"
    p = _run(env)
    assert p.returncode == 0 and p.stderr.strip() == "", p.stderr[-2000:]
    log = p.stdout.split("LOG ", 1)[1].strip()
    assert not os.path.exists(log)

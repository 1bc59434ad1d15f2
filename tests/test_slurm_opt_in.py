"""The test command changes nothing on a machine unless asked: without ``GEOSWEEP_TEST_SLURM=1`` the
real Slurm's tests are skipped with the reason, before any apt-get, daemon or user (issue 52, item 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
from tests.slurm_cluster import slurm  # noqa: F401


def test_uses_slurm(slurm):  # noqa: F811
    raise AssertionError("the Slurm fixture ran without the opt-in")
"""


def test_without_the_opt_in_the_slurm_tests_skip_and_say_how_to_run_them(tmp_path):
    probe = ROOT / "tests" / f"test_probe_opt_in_{os.getpid()}.py"  # inside tests/: it imports tests.slurm_cluster
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("GEOSWEEP_TEST_SLURM", "SLURM_CONF")}
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", str(probe), "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider",
             "-rs", "-q", "--basetemp", str(tmp_path / "t")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        probe.unlink()
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "1 skipped" in p.stdout
    assert "set GEOSWEEP_TEST_SLURM=1 to run them" in p.stdout

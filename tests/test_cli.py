"""The geosweep CLI: validate, systems, status, run (serial) and its exit codes."""

from __future__ import annotations

import shutil
import subprocess
from importlib.metadata import version

import pytest

from geosweep.flows.cli import main

SPEC = """
name = "cli-test"
system = "spring_pendula"
integrators = ["explicit_vi", "rk2"]
h = [0.01]
T = 1.0
dt_out = 0.1
"""


def test_validate_good_and_bad(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(SPEC)
    assert main(["validate", str(good)]) == 0
    assert "valid. 2 cells (integrator=2, h=1)" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(SPEC.replace("h = [0.01]", "h = [0.003]"))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "h[0]" in err and "not an integer" in err


def test_systems_lists_every_system_and_parameter(capsys):
    assert main(["systems"]) == 0
    out = capsys.readouterr().out
    for name in ("lj_sphere", "double_pendulum", "spring_pendula", "elastic_rod", "explicit_vi", "implicit_vi"):
        assert name in out
    assert "omega (float [rad / time], default 3.25)" in out


def test_run_status_and_mismatch(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    store = tmp_path / "s.zarr"
    assert main(["run", str(spec), "--store", str(store), "--serial"]) == 0
    out = capsys.readouterr().out
    assert "xr.open_zarr(" in out and str(store) in out
    assert main(["status", str(store)]) == 0
    assert "cells complete: 2/2" in capsys.readouterr().out
    other = tmp_path / "other.toml"
    other.write_text(SPEC.replace("T = 1.0", "T = 2.0"))
    assert main(["run", str(other), "--store", str(store), "--serial"]) == 3
    assert "different sweep spec" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "nothing.zarr")]) == 2


def test_console_script_is_installed():
    """The ``geosweep`` entry point that ``pip install`` put on PATH (not ``python -m geosweep.flows.cli``)."""
    exe = shutil.which("geosweep")
    assert exe, "geosweep is not on PATH: pip install -e ."
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "validate" in out.stdout
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"geosweep {version('geosweep')}"


def test_help_texts(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "processes for many sub-millisecond cells, else threads in this process" in text
    assert "--processes" in text and "--threads" in text


@pytest.mark.parametrize("cmd", [["run"], ["frobnicate"]])
def test_usage_errors_exit_2(cmd):
    with pytest.raises(SystemExit) as e:
        main(cmd)
    assert e.value.code == 2

"""Kills in the metadata phases of ``geosweep extend`` and ``geosweep run --grow`` (issue 49 item 4).

A real ``geosweep`` process is ended (``os._exit``, no cleanup) at each named point of a phase
(:mod:`geosweep.sweeps.crashpoint`: ``$GEOSWEEP_TEST_EXIT_AT``), or where a function of the phase
is entered or left; then: the store's attributes agree with its ``spec``, a store left half-way
is refused to the old spec and reported by ``verify`` in one line, and the same command finishes
it — bitwise the store a direct run computes, ``verify`` clean."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import zarr

from geosweep.flows.cli import main
from geosweep.sweeps.crashpoint import ENV, EXIT_STATUS
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.extension import typed
from geosweep.sweeps.store import StoreMismatchError, StoreRef, verify
from tests.proc_util import geosweep
from tests.sweep_util import assert_stores_bitwise_equal, chain_pair

SPEC = chain_pair("metadata-kills")
T2 = 1.0
GROWN = {**SPEC, "params": {"N": [2], "g": [9.81, 9.5, 9.0]}}

#: (phase, the store still half-way after a kill there: refused to the old spec, reported by verify)
EXTEND_PHASES = [
    ("extend.marked", True),
    ("extend.dropped", True),
    ("extend.checked", True),
    ("extend.resizing", True),
    ("extend.resized", True),
    ("extend.cleared", True),
    ("extend.switched", False),
    ("extend.consolidated", False),
]
GROW_PHASES = [
    ("grow.marked", True),
    ("grow.resizing", True),
    ("grow.resized", True),
    ("grow.coords", True),
    ("grow.fillers", True),
    ("grow.switched", False),
]

#: a child that runs ``geosweep ARGS`` and exits when ``module:function`` is entered or left
CHILD = f"""
import os, sys
from geosweep.sweeps import extension, grow
module, name, when = sys.argv[1].split(":")
target = extension if module == "extension" else grow
inner = getattr(target, name)
def wrapped(*args, **kwargs):
    if when == "enter":
        os._exit({EXIT_STATUS})
    inner(*args, **kwargs)
    os._exit({EXIT_STATUS})
setattr(target, name, wrapped)
from geosweep.flows.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """The store to T = 0.5, its spec files, and direct runs of the extended and the grown spec."""
    d = tmp_path_factory.mktemp("kills")
    out = {"base": d / "base.zarr", "ext_ref": d / "ext_ref.zarr", "grow_ref": d / "grow_ref.zarr"}
    run_sweep(SPEC, out["base"], serial=True)
    probe = d / "probe.zarr"
    shutil.copytree(out["base"], probe)
    assert main(["extend", str(probe), "--T", str(T2), "--serial", "--quiet"]) == 0
    run_sweep(typed(json.loads(zarr.open_group(str(probe), mode="r").attrs["spec"])), out["ext_ref"], serial=True)
    run_sweep(GROWN, out["grow_ref"], serial=True)
    for name, spec in (("old", SPEC), ("grown", GROWN)):
        out[name] = d / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(spec))
    return out


def _extend_args(store: Path) -> list[str]:
    return ["extend", str(store), "--T", str(T2), "--serial", "--quiet"]


def _grow_args(store: Path, stores) -> list[str]:
    return ["run", str(stores["grown"]), "--store", str(store), "--grow", "--serial", "--quiet"]


def _killed(cmd: list[str], env: dict[str, str]) -> None:
    p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert p.returncode == EXIT_STATUS, (p.returncode, p.stderr[-2000:])


def _attrs_agree(store: Path) -> None:
    """The store's ``T`` and ``spec_hash`` attributes are its ``spec``'s."""
    attrs = dict(zarr.open_group(str(store), mode="r", use_consolidated=False).attrs)
    spec = json.loads(attrs["spec"])
    assert float(attrs["T"]) == float(spec["T"])
    assert attrs["spec_hash"] == hashlib.sha256(attrs["spec"].encode()).hexdigest()


def _after_kill(store: Path, stores, half_way: bool, finish: list[str], ref: Path, capsys) -> None:
    _attrs_agree(store)
    capsys.readouterr()
    if half_way:
        assert main(["verify", str(store)]) == 1
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and "interrupted" in out[0] and "unfinished" in out[0], out
        with pytest.raises(StoreMismatchError, match="interrupted"):
            verify(StoreRef.of(store))
        assert main(["run", str(stores["old"]), "--store", str(store), "--serial", "--quiet"]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "interrupted" in err[0], err
    assert main(finish) == 0, capsys.readouterr().err
    _attrs_agree(store)
    assert_stores_bitwise_equal(str(store), str(ref))
    capsys.readouterr()
    assert main(["verify", str(store)]) == 0, capsys.readouterr().out
    assert "every finished cell matches" in capsys.readouterr().out


@pytest.mark.parametrize(("phase", "half_way"), EXTEND_PHASES)
def test_a_killed_extension_is_finished_by_the_same_command(tmp_path, stores, phase, half_way, capsys):
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    _killed(geosweep(*_extend_args(a)), {ENV: phase})
    _after_kill(a, stores, half_way, _extend_args(a), stores["ext_ref"], capsys)


@pytest.mark.parametrize(("phase", "half_way"), GROW_PHASES)
def test_a_killed_grow_is_finished_by_the_same_command(tmp_path, stores, phase, half_way, capsys):
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    _killed(geosweep(*_grow_args(a, stores)), {ENV: phase})
    _after_kill(a, stores, half_way, _grow_args(a, stores), stores["grow_ref"], capsys)


@pytest.mark.parametrize(
    ("where", "command", "half_way"),
    [
        ("extension:_resize:leave", "extend", True),  # resized, the spec still T₁'s
        ("extension:consolidate:enter", "extend", False),  # switched, the consolidated copy not rewritten
        ("grow:_resize:leave", "grow", True),  # resized along the axis, coordinates not yet
    ],
)
def test_kills_where_the_issue_found_them(tmp_path, stores, where, command, half_way, capsys):
    """The issue's points, hit by wrapping the phase's function (no hook in the code needed)."""
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    args = _extend_args(a) if command == "extend" else _grow_args(a, stores)
    _killed([sys.executable, "-c", CHILD, where, *args], {})
    ref = stores["ext_ref"] if command == "extend" else stores["grow_ref"]
    _after_kill(a, stores, half_way, args, ref, capsys)

"""Exact spec identity and hostile spec files (issue 23 items 2, 8, 10, 11): every value that can be
written is identified exactly (integers above 2**53, -0.0), stored with the spec's types, and every
bad input is refused through the real CLI in one line (exit 2, or 3 for a store of another spec)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep.sweeps.spec import SpecError, parse_spec

REPO = Path(__file__).resolve().parent.parent
BASE = {"name": "lim", "system": "spring_pendula", "integrators": ["explicit_vi", "rk4"], "h": [0.01, 0.005],
        "T": 1.0, "dt_out": 0.1}  # fmt: skip
CHAIN = """name = "seeds"
system = "pendulum_chain"
integrators = ["lie_euler"]
h = [0.01]
T = 0.02
dt_out = 0.01
[params]
ic = "random"
seed = SEED
"""
SPEC = """name = "errs"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.01]
T = 0.2
dt_out = 0.1
"""


def geosweep(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``geosweep ARGS`` in a fresh process (the console script's code path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run([sys.executable, "-m", "geosweep.flows.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_line(p: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """Exit ``code``, no traceback, one line on stderr containing ``words`` (besides a cold cache's notice)."""
    lines = [line for line in p.stderr.splitlines() if line.strip() and "compiling kernels" not in line]
    assert p.returncode == code, p.stderr[-3000:]
    assert "Traceback" not in p.stderr and len(lines) == 1, p.stderr[-3000:]
    for w in words:
        assert w in lines[0], lines[0][:3000]
    return lines[0]


# ---- identity -------------------------------------------------------------------------------
def test_ordinary_specs_keep_the_hash_of_existing_stores():
    """The hashes below were computed before the exact-integer change: stores written then resume."""
    assert parse_spec(BASE).spec_hash == "e3a8bdb7556c2b8062f3c4904af67b2ec1abae95b29a757e3bf804fcd3dc1962"
    spec = {**BASE, "params": {"kappa12": [0, 3.25, 10], "g": 9}, "integrator_options": {"explicit_vi": {}}}
    assert parse_spec(spec).spec_hash == "3904a66ae8775907c63e5feb192c39e42804cac6314e990fca96277b5927f2c8"
    chain = {"name": "c", "system": "pendulum_chain", "integrators": ["lie_euler", "rkmk45"], "h": [0.01],
             "tol": [1e-6], "T": 0.1, "dt_out": 0.05,
             "params": {"ic": "random", "seed": [0, 7, 2**53], "N": 3, "g": [0, 1.5]}}  # fmt: skip
    assert parse_spec(chain).spec_hash == "8c9f5aae4541cea14ecdfd74036e0de69d66d35481a0d64597c5503cbdda78b5"


#: what geosweep wrote before the exact-integer change (a0310b8) for OLD_SPEC: its store's attributes
OLD_SPEC = SPEC + "[params]\nkappa12 = [0, 10]\ng = 9\n[integrator_options.explicit_vi]\n"
OLD_TEXT = (
    '{"T":0.2,"dt_out":0.1,"h":[0.01],"integrator_options":{"explicit_vi":{}},"integrators":["explicit_vi","rk4"],'
    '"name":"errs","params":{"g":9.0,"kappa12":[0.0,10.0]},"snapshot_dt":null,"system":"spring_pendula","tol":[]}'
)
OLD_HASH = "047ed55dab65569be01db1331e84b5f6076c35325f510761885f37dcc909549f"


def test_a_store_written_before_the_change_resumes(tmp_path):
    """A store whose identity attributes are those the previous geosweep wrote (OLD_TEXT, OLD_HASH,
    taken from a store it wrote) is resumed: every cell already complete, exit 0."""
    (tmp_path / "s.toml").write_text(OLD_SPEC)
    spec = parse_spec(tmp_path / "s.toml")
    assert spec.canonical_json() == OLD_TEXT and spec.spec_hash == OLD_HASH
    p = geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r+")
    group.attrs.update({"spec": OLD_TEXT, "spec_hash": OLD_HASH})
    p = geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=tmp_path)
    assert p.returncode == 0 and "4/4 cells already complete, 0 to run" in p.stderr, p.stderr[-3000:]


def test_integers_above_2_53_are_distinct_and_int64_bounded():
    chain = {"name": "c", "system": "pendulum_chain", "integrators": ["lie_euler"], "h": [0.01], "T": 0.1,
             "dt_out": 0.05}  # fmt: skip
    a = parse_spec({**chain, "params": {"ic": "random", "seed": 2**53 + 1}})
    b = parse_spec({**chain, "params": {"ic": "random", "seed": 2**53}})
    assert a.spec_hash != b.spec_hash
    assert json.loads(a.canonical_json())["params"]["seed"] == 2**53 + 1
    assert parse_spec({**chain, "params": {"seed": 2**63 - 1}}).params["seed"] == 2**63 - 1
    for params, field in (({"seed": 2**64}, "params.seed"), ({"seed": [0, 2**63 + 1]}, "params.seed[1]"),
                          ({"g": -(2**63) - 1}, "params.g")):  # fmt: skip
        with pytest.raises(SpecError) as e:
            parse_spec({**chain, "params": params})
        assert [f for f, _ in e.value.problems] == [field] and "64-bit" in str(e.value)
    with pytest.raises(SpecError, match="T: Input should be a valid number"):
        parse_spec({**chain, "T": 10**400})  # beyond any float: refused, not an OverflowError


def test_minus_zero_is_a_duplicate_axis_value():
    with pytest.raises(SpecError, match="params.g: axis values must be unique"):
        parse_spec({**BASE, "params": {"g": [0.0, -0.0]}})
    parse_spec({**BASE, "params": {"kappa12": [0.0, 1.0]}})


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_limit_is_a_positive_finite_number(value):
    with pytest.raises(SpecError, match="limits.steps_per_cell: must be a positive finite number"):
        parse_spec({**BASE, "limits": {"steps_per_cell": value}})


def test_a_table_where_a_value_belongs_is_named_as_such():
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, "params": {"kappa12": {"a": 1}}})
    assert e.value.problems == [("params.kappa12", "must be a number, a string or true/false, or a list of these, "
                                                   "not a table")]  # fmt: skip
    with pytest.raises(SpecError) as e:
        parse_spec({**BASE, "params": {"kappa12": [1.0, {"a": 1}]}})
    assert e.value.problems == [("params.kappa12[1]", "must be a number, a string or true/false, not a table")]


# ---- through the CLI --------------------------------------------------------------------------
def test_a_store_of_one_big_seed_refuses_the_other(tmp_path):
    """seed 2**53 + 1 and 2**53 are two sweeps: the second is refused (exit 3), not "already complete";
    the stored seed coordinate is that int64."""
    (tmp_path / "a.toml").write_text(CHAIN.replace("SEED", str(2**53 + 1)))
    (tmp_path / "b.toml").write_text(CHAIN.replace("SEED", str(2**53)))
    p = geosweep("run", "a.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    p = geosweep("run", "b.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=tmp_path)
    one_line(p, 3, "different sweep spec", "9007199254740993")
    ds = xr.open_zarr(tmp_path / "s.zarr")
    assert ds["seed"].dtype == np.int64 and int(ds["seed"]) == 2**53 + 1


def test_stored_coordinates_have_the_declared_types(tmp_path):
    """A float parameter written as integers is stored as float64 (not int64)."""
    (tmp_path / "s.toml").write_text(SPEC + "[params]\nkappa12 = [0, 10]\ng = 9\n")
    p = geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    ds = xr.open_zarr(tmp_path / "s.zarr")
    assert ds["kappa12"].dtype == np.float64 and ds["g"].dtype == np.float64
    assert ds["kappa12"].values.tolist() == [0.0, 10.0] and float(ds["g"]) == 9.0


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (SPEC + "[params]\ng = [0.0, -0.0]\n", ("params.g", "unique")),
        (SPEC + f"[params]\nkappa12 = {2**64}\n", ("params.kappa12", "64-bit")),
        (SPEC + "[limits]\nsteps_per_cell = nan\n", ("limits.steps_per_cell", "finite")),
        (SPEC + "[params.kappa12]\na = 1\n", ("params.kappa12", "not a table")),
    ],
)
def test_bad_values_one_line(tmp_path, text, words):
    (tmp_path / "s.toml").write_text(text)
    one_line(geosweep("run", "s.toml", "--serial", "--no-prefect", cwd=tmp_path), 2, *words)


def test_yaml_duplicate_keys_are_refused(tmp_path):
    (tmp_path / "s.yaml").write_text("name: errs\nsystem: spring_pendula\nintegrators: [rk4]\nh: [0.01]\n"
                                     "T: 0.2\ndt_out: 0.1\nparams:\n  g: 1.0\n  g: 2.0\n")  # fmt: skip
    one_line(geosweep("run", "s.yaml", "--serial", "--no-prefect", cwd=tmp_path), 2, "s.yaml", "duplicate key 'g'")


def test_a_huge_bad_value_is_not_echoed_whole(tmp_path):
    name = "x" * 3_000_000
    (tmp_path / "s.toml").write_text(SPEC.replace('"rk4"', f'"{name}"'))
    line = one_line(geosweep("run", "s.toml", "--serial", "--no-prefect", cwd=tmp_path), 2, "integrators[1]")
    assert len(line) < 2000 and "3000002 characters" in line


def test_a_byte_order_mark_is_not_part_of_the_spec(tmp_path):
    (tmp_path / "s.toml").write_bytes(b"\xef\xbb\xbf" + SPEC.encode())
    (tmp_path / "s.yaml").write_bytes(b"\xef\xbb\xbfname: errs\nsystem: spring_pendula\n"
                                      b"integrators: [explicit_vi, rk4]\nh: [0.01]\nT: 0.2\ndt_out: 0.1\n")  # fmt: skip
    plain = parse_spec({"name": "errs", "system": "spring_pendula", "integrators": ["explicit_vi", "rk4"],
                        "h": [0.01], "T": 0.2, "dt_out": 0.1})  # fmt: skip
    assert parse_spec(tmp_path / "s.toml") == plain == parse_spec(tmp_path / "s.yaml")


def test_a_fifo_spec_is_refused_without_blocking(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(tmp_path / "s.toml")
    one_line(geosweep("run", "s.toml", "--serial", "--no-prefect", cwd=tmp_path, timeout=60), 2,
             "s.toml", "not a regular file")  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A finished store of SPEC (copied by each test that edits it)."""
    where = tmp_path_factory.mktemp("store")
    (where / "s.toml").write_text(SPEC)
    p = geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=where, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return where


def _edited(store: Path, tmp_path: Path, **attrs) -> Path:
    import shutil

    shutil.copytree(store, tmp_path / "w")
    group = zarr.open_group(str(tmp_path / "w" / "s.zarr"), mode="r+")
    group.attrs.update(attrs)
    zarr.consolidate_metadata(str(tmp_path / "w" / "s.zarr"))
    return tmp_path / "w"


def test_a_hand_edited_spec_attribute_is_another_spec(store, tmp_path):
    cwd = _edited(store, tmp_path, spec="{hand edited")
    one_line(geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=cwd), 3,
             "spec attribute was changed")  # fmt: skip
    cwd = _edited(store, tmp_path / "b", spec="[1]", spec_hash="0" * 64)
    one_line(geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=cwd), 3,
             "different sweep spec", "'[1]'")  # fmt: skip


def test_a_format_string_is_not_a_format_number(store, tmp_path):
    cwd = _edited(store, tmp_path, geosweep_format="2")
    line = one_line(geosweep("run", "s.toml", "--store", "s.zarr", "--serial", "--no-prefect", cwd=cwd), 3,
                    "geosweep_format = '2', not a format number")  # fmt: skip
    assert "has store format 2" not in line

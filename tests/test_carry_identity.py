"""A kept carry is used only if it is its cell's (issue 49 item 3): it records the cell, the
trajectory's identity, the T it was kept at, the cell's stored checksum and a digest of itself,
and ``extend`` checks all of it against the store before continuing a cell. A foreign, rolled,
stale or damaged carry makes its cell run again from t = 0 — one warning line naming how many,
the store then bitwise a direct run to the new T — never a traceback; ``--recompute`` reads no
carry; ``geosweep verify`` names the cells whose carries are not theirs."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from geosweep.flows.cli import main
from geosweep.sweeps.carries import DIRNAME, carried_cells
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.extension import typed
from geosweep.sweeps.store import StoreRef
from tests.sweep_util import assert_stores_bitwise_equal, chain_pair

#: fixed-step and adaptive dense-output cells; two values of g make like cells (one stacked group)
SPEC = chain_pair("carry-identity")
T2 = 1.0


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """The store to T = 0.5, another store of the same grid (another initial condition), the
    store extended to T2 (its carries kept at T2) and a direct run to T2 (the reference)."""
    d = tmp_path_factory.mktemp("carries")
    out = {"base": d / "base.zarr", "foreign": d / "foreign.zarr", "extended": d / "ext.zarr", "ref": d / "ref.zarr"}
    run_sweep(SPEC, out["base"], serial=True)
    run_sweep({**SPEC, "params": {**SPEC["params"], "ic": "twisted"}}, out["foreign"], serial=True)
    shutil.copytree(out["base"], out["extended"])
    assert main(["extend", str(out["extended"]), "--T", str(T2), "--serial", "--quiet"]) == 0
    run_sweep(typed(json.loads(zarr.open_group(str(out["extended"]), mode="r").attrs["spec"])), out["ref"], serial=True)
    return out


def _objects(store: Path) -> list[Path]:
    objects = sorted((store / DIRNAME).iterdir())
    assert objects
    return objects


def _rewrite(path: Path, change) -> None:
    """Rewrite a carries object with ``change(entries)`` applied (a valid .npz again)."""
    with np.load(path) as z:
        entries = {k: z[k] for k in z.files}
    buf = io.BytesIO()
    np.savez(buf, **change(entries))
    path.write_bytes(buf.getvalue())


def _roll(store: Path) -> None:
    """Each cell's carry moved into the next cell's place (labelled as that cell, its contents kept)."""
    objects = _objects(store)
    assert len(objects) > 1
    entries = []
    for path in objects:
        with np.load(path) as z:
            entries.append({k: z[k] for k in z.files})
    for k, path in enumerate(objects):
        mine, theirs = entries[k], entries[k - 1]
        labels = {n: v for n, v in mine.items() if n.endswith(".cells")}
        assert labels.keys() == {n for n in theirs if n.endswith(".cells")}
        buf = io.BytesIO()
        np.savez(buf, **{**theirs, **labels})
        path.write_bytes(buf.getvalue())


def _float32(entries: dict) -> dict:
    return {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in entries.items()}


def _damage(store: Path, how: str, stores: dict[str, Path]) -> int:
    """Damage the carries of ``store`` as ``how`` says; returns how many cells' carries that hits."""
    path = _objects(store)[0]
    index = tuple(int(i) for i in path.stem[1:].split("_"))
    hit = len(carried_cells(StoreRef.of(store), index))
    data = path.read_bytes()
    if how == "foreign":  # carries of another store of the same grid
        shutil.rmtree(store / DIRNAME)
        shutil.copytree(stores["foreign"] / DIRNAME, store / DIRNAME)
    elif how == "rolled":
        _roll(store)
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "bitflip":
        path.write_bytes(data[:200] + bytes([data[200] ^ 0x10]) + data[201:])
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(49).bytes(len(data)))
    elif how == "directory":
        path.unlink()
        (path / "x").mkdir(parents=True)
    elif how == "float32":
        _rewrite(path, _float32)
    else:
        raise AssertionError(how)
    return 4 if how in ("foreign", "rolled") else hit


KINDS = ["foreign", "rolled", "truncated", "empty", "bitflip", "garbage", "directory", "float32"]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "computed again from t = 0" in line]


@pytest.mark.parametrize("how", KINDS)
def test_a_carry_not_the_cells_own_is_recomputed_from_zero(tmp_path, stores, how, capsys):
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    n = _damage(a, how, stores)
    capsys.readouterr()
    assert main(["verify", str(a)]) == 1  # the carries are named before anything is extended
    out = capsys.readouterr().out
    assert "foreign, stale or damaged" in out and "every finished cell matches" in out
    assert main(["extend", str(a), "--T", str(T2), "--serial", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(_warnings(err)) == 1, err
    assert f" {n} of 4 finished cells have a foreign" in _warnings(err)[0], err
    assert_stores_bitwise_equal(str(a), str(stores["ref"]))
    assert main(["verify", str(a)]) == 0  # the recomputed cells' carries are theirs again
    assert "every finished cell matches" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["foreign", "truncated", "directory", "float32"])
def test_recompute_reads_no_carry(tmp_path, stores, how, capsys):
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    _damage(a, how, stores)
    capsys.readouterr()
    assert main(["extend", str(a), "--T", str(T2), "--serial", "--quiet", "--recompute"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--recompute: 4 finished cells computed again" in err, err
    assert_stores_bitwise_equal(str(a), str(stores["ref"]))


def test_a_stale_carry_is_recomputed_and_verify_names_it(tmp_path, stores, capsys):
    """The carries the store had at T = 0.5 put back into the store extended to T2: internally
    intact, but not those of the stored samples (nor of its T)."""
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["extended"], a)
    shutil.rmtree(a / DIRNAME)
    shutil.copytree(stores["base"] / DIRNAME, a / DIRNAME)
    capsys.readouterr()
    assert main(["verify", str(a)]) == 1 and "4 kept carries foreign, stale or damaged" in capsys.readouterr().out
    assert main(["verify", str(a), "--repair"]) == 0 and "dropped those carries" in capsys.readouterr().out
    assert main(["verify", str(a)]) == 0 and "every finished cell matches" in capsys.readouterr().out
    assert main(["extend", str(a), "--T", "1.5", "--serial", "--quiet"]) == 2  # dropped: no carry, refused
    assert "no final carry" in capsys.readouterr().err


def test_clean_carries_are_used_and_verify_is_clean(tmp_path, stores, capsys):
    a = tmp_path / "a.zarr"
    shutil.copytree(stores["base"], a)
    assert main(["verify", str(a)]) == 0 and "every finished cell matches" in capsys.readouterr().out
    assert main(["extend", str(a), "--T", str(T2), "--serial", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert not _warnings(err), err
    assert_stores_bitwise_equal(str(a), str(stores["ref"]))

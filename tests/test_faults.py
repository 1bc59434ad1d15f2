"""Fault injection: SIGKILL of the driver at random instants of store creation and of a run,
damaged and deleted store objects, two runs started together, worker processes killed.

After each fault the sweep is resumed and must show 0 cells lost (every cell done), 0 cells
computed twice (the resuming run's record counts exactly the cells that were not done), 0
finished cells rewritten (their ``completed_at`` and ``checksum`` unchanged) and a store
bitwise equal to one uninterrupted run. Instants come from a seeded RNG. The short form runs
in CI (about a minute); ``-m slow`` runs many more instants and worker kills.

Related single-fault tests: tests/test_store_creation.py (fixed kill delays during creation),
tests/test_checkpoints.py (kills mid-segment of long cells), tests/test_integrity.py,
tests/test_lease.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from geosweep.flows.cli import main
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.store import CREATED_ATTR
from tests.sweep_util import assert_stores_bitwise_equal

REPO = Path(__file__).resolve().parent.parent
#: 8 cells of ≈ 0.3 s each (spring pendula, 40 000 steps)
SPEC = {
    "name": "faults",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.0005],
    "T": 20.0,
    "dt_out": 0.5,
    "params": {"m": [0.1, 0.2, 0.3, 0.4]},
}
TOML = """name = "faults"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.0005]
T = 20.0
dt_out = 0.5
[params]
m = [0.1, 0.2, 0.3, 0.4]
"""
CELLS = 8
SEED = 20261123


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """One uninterrupted serial run (also compiles the kernels in this process)."""
    store = tmp_path_factory.mktemp("ref") / "ref.zarr"
    res = run_sweep(SPEC, store, serial=True)
    assert res.complete and res.ran == CELLS
    return store


# ---- helpers -----------------------------------------------------------------------------------
def flags(store: Path) -> dict[str, np.ndarray]:
    """``done``, ``completed_at`` and ``checksum`` of a store (empty if its creation did not finish)."""
    try:
        g = zarr.open_group(str(store), mode="r", use_consolidated=False)
        if not g.attrs.get(CREATED_ATTR):
            return {}
        return {name: np.asarray(g[name][...]) for name in ("done", "completed_at", "checksum")}
    except Exception:  # noqa: BLE001 - no store, or a half-written one: nothing finished
        return {}


def runs(store: Path) -> list[dict]:
    return list(zarr.open_group(str(store), mode="r").attrs.get("runs", []))


def resume_and_check(store: Path, reference: Path, before: dict[str, np.ndarray]) -> None:
    """Resume ``store`` and assert 0 lost, 0 computed twice, 0 rewritten, bitwise equal to ``reference``."""
    was_done = before.get("done", np.zeros(0)) == 1
    n_done = int(was_done.sum())
    records = len(runs(store)) if before else 0
    res = run_sweep(SPEC, store, serial=True)
    after = flags(store)
    assert res.complete and (after["done"] == 1).all()  # 0 lost
    assert res.ran == CELLS - n_done  # 0 computed twice, and the record says so
    assert [r["cells_run"] for r in runs(store)[records:]] == ([CELLS - n_done] if n_done < CELLS else [])
    if n_done:  # 0 rewritten: finished cells keep their stamp and checksum, bit for bit
        for name in ("completed_at", "checksum"):
            assert np.array_equal(after[name][was_done], before[name][was_done]), name
    assert_stores_bitwise_equal(str(reference), str(store))


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "geosweep.flows.cli", *args]


def kill_at(spec: Path, store: Path, phase: str | int, delay: float) -> None:
    """Start ``geosweep run --serial`` and SIGKILL it ``delay`` s after ``phase``: "create" (the store
    folder appeared) or a number k (k cells finished)."""
    proc = subprocess.Popen(cli("run", str(spec), "--store", str(store), "--serial"), cwd=REPO,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if store.exists() and (phase == "create" or (_created(store) and _done(store) >= phase)):
                break
            time.sleep(0.002)
        time.sleep(delay)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the run may have ended first (its last cell's instant)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _done(store: Path) -> int:
    f = flags(store)
    return int((f["done"] == 1).sum()) if f else 0


def _created(store: Path) -> bool:
    try:
        return bool(json.loads((store / "zarr.json").read_text())["attributes"].get(CREATED_ATTR))
    except (OSError, ValueError, KeyError):
        return False


def instants(n: int, seed: int) -> list[tuple[str | int, float]]:
    """``n`` kill instants: the first during creation (≤ 0.6 s after the folder appears), the rest in
    the run: after a random number of finished cells (0 … 7) plus up to one cell's time (0.3 s)."""
    rng = random.Random(seed)
    return [("create", rng.uniform(0.0, 0.6))] + [(rng.randrange(CELLS), rng.uniform(0.0, 0.3)) for _ in range(n - 1)]


def kill_and_resume(tmp_path: Path, reference: Path, n: int, seed: int) -> list[int]:
    spec = tmp_path / "f.toml"
    spec.write_text(TOML)
    done_at_kill = []
    for i, (phase, delay) in enumerate(instants(n, seed)):
        store = tmp_path / f"k{i}.zarr"
        kill_at(spec, store, phase, delay)
        before = flags(store)
        done_at_kill.append(int((before.get("done", np.zeros(0)) == 1).sum()))
        resume_and_check(store, reference, before)
        shutil.rmtree(store)
    return done_at_kill


# ---- kills of the driver -----------------------------------------------------------------------
def test_sigkill_at_random_instants(tmp_path, reference):
    """2 instants from a seeded RNG: one in the store's creation, one in the run."""
    kill_and_resume(tmp_path, reference, 2, SEED)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_at_many_random_instants(tmp_path, reference, seed):
    kill_and_resume(tmp_path, reference, 8, seed)


# ---- damaged stores ----------------------------------------------------------------------------
def _objects(store: Path, var: str) -> list[Path]:
    return sorted(p for p in (store / var).rglob("*") if p.is_file() and p.name != "zarr.json")


def test_deleted_flag_arrays_are_rebuilt_and_only_unknown_cells_rerun(tmp_path, reference):
    """``done/`` deleted (then ``status/`` with it, then ``checksum/``): every later run works, cells
    whose checksum verifies stay done (their status recovered from it), a cell whose values were
    lost too is recomputed, and without checksums every cell is recomputed, bitwise the same."""
    store = tmp_path / "d.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    before = flags(store)
    shutil.rmtree(store / "done")
    for _ in range(2):  # the second run used to fail: "'done' not found in consolidated metadata"
        res = run_sweep(SPEC, store, serial=True)
        assert res.complete and res.ran == 0
    after = flags(store)
    assert np.array_equal(after["completed_at"], before["completed_at"])  # nothing rewritten
    for obj in _objects(store, "done"):  # the flag's objects lost, its metadata kept: the same
        obj.unlink()
    res = run_sweep(SPEC, store, serial=True)
    assert res.complete and res.ran == 0
    assert np.array_equal(flags(store)["completed_at"], before["completed_at"])

    for name in ("done", "status"):
        shutil.rmtree(store / name)
    lost = _objects(store, "final_state")[0]  # values lost with the flags: those cells rerun, the rest stay
    lost.unlink()
    res = run_sweep(SPEC, store, serial=True)
    after = flags(store)
    rerun = after["completed_at"] != before["completed_at"]
    assert res.complete and res.ran == int(rerun.sum()) >= 1 and res.ran < CELLS
    assert (after["done"] == 1).all()
    assert_stores_bitwise_equal(str(reference), str(store))
    rebuilt, made = zarr.open_group(str(store), mode="r"), zarr.open_group(str(reference), mode="r")
    for name in ("done", "status"):  # rebuilt with the template's attributes (one FLAG_LAYOUT)
        assert dict(rebuilt[name].attrs) == dict(made[name].attrs), name

    shutil.rmtree(store / "checksum")  # nothing left to verify against: recomputed, not trusted
    res = run_sweep(SPEC, store, serial=True)
    assert res.complete and res.ran == CELLS
    assert_stores_bitwise_equal(str(reference), str(store))


def test_damaged_objects_recomputed_exactly(tmp_path, reference, capsys):
    """Seeded choice of value objects deleted or overwritten with garbage; ``geosweep verify --repair``
    marks exactly the affected cells, the resume recomputes only them, the rest keep their stamps."""
    store = tmp_path / "v.zarr"
    assert run_sweep(SPEC, store, serial=True).complete
    before = flags(store)
    rng = random.Random(SEED)
    names = ["energy", "final_state", "max_abs_energy_error", "steps"]
    for var in rng.sample(names, 2):
        target = rng.choice(_objects(store, var))
        if rng.random() < 0.5:
            target.unlink()
        else:
            target.write_bytes(b"\x00damaged" * 8)
    assert main(["verify", str(store), "--repair"]) == 0
    capsys.readouterr()
    marked = flags(store)["done"] == 0
    assert 1 <= int(marked.sum()) < CELLS or int(marked.sum()) == CELLS
    res = run_sweep(SPEC, store, serial=True)
    after = flags(store)
    assert res.complete and res.ran == int(marked.sum())  # exactly the damaged cells
    keep = ~marked
    assert np.array_equal(after["completed_at"][keep], before["completed_at"][keep])
    assert main(["verify", str(store)]) == 0
    assert_stores_bitwise_equal(str(reference), str(store))


# ---- two runs at once --------------------------------------------------------------------------
def test_two_runs_started_together(tmp_path, reference):
    """Two ``geosweep run`` processes on one new store, started within a seeded 0–0.3 s: one runs the
    sweep, the other is refused in one line (exit 3, no traceback); no cell is computed twice."""
    spec = tmp_path / "c.toml"
    spec.write_text(TOML)
    store = tmp_path / "c.zarr"
    stagger = random.Random(SEED).uniform(0.0, 0.3)
    cmd = cli("run", str(spec), "--store", str(store), "--serial")
    first = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(stagger)
    second = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = [p.communicate(timeout=300) for p in (first, second)]
    codes = sorted(p.returncode for p in (first, second))
    assert codes == [0, 3], outs
    loser = outs[[first.returncode, second.returncode].index(3)][1]
    assert "being written by another run" in loser and "Traceback" not in loser
    assert len([line for line in loser.splitlines() if line.strip() and "compiling" not in line]) == 1, loser
    assert [r["cells_run"] for r in runs(store)] == [CELLS]
    assert_stores_bitwise_equal(str(reference), str(store))


# ---- worker kills --------------------------------------------------------------------------------
def worker_kill(tmp_path: Path, reference: Path, seed: int) -> None:
    """2 worker processes; once ``k`` cells (seeded, 1–4) are finished, one worker (seeded) is SIGKILLed.
    A watcher records every ``completed_at`` it sees: a finished cell's stamp never changes."""
    from distributed import Client, LocalCluster

    rng = random.Random(seed)
    after_cells = rng.randint(1, 4)
    store = tmp_path / f"w{seed}.zarr"
    seen: dict[tuple, set[float]] = {}
    stop = threading.Event()
    killed: list[int] = []

    def watch(pids: list[int]) -> None:
        while not stop.is_set():
            f = flags(store)
            if f:
                for cell in zip(*np.nonzero(f["done"] == 1)):
                    if np.isfinite(f["completed_at"][cell]):
                        seen.setdefault(tuple(int(i) for i in cell), set()).add(float(f["completed_at"][cell]))
                if not killed and int((f["done"] == 1).sum()) >= after_cells:
                    pid = rng.choice(pids)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.02)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        with Client(lc) as client:
            pids = list(client.run(os.getpid).values())
            watcher = threading.Thread(target=watch, args=(pids,), daemon=True)
            watcher.start()
            try:
                res = run_sweep(SPEC, store, client=client, slice_seconds=0.3)
            finally:
                stop.set()
                watcher.join(10)
    f = flags(store)
    assert killed, "the sweep finished before a worker could be killed"
    assert res.complete and (f["done"] == 1).all(), res.errors  # 0 lost
    assert res.ran == CELLS and runs(store)[-1]["cells_run"] == CELLS  # the record counts what ran
    for cell, stamps in seen.items():  # 0 rewritten
        assert stamps == {float(f["completed_at"][cell])}, (cell, stamps)
    assert_stores_bitwise_equal(str(reference), str(store))


def test_worker_killed_mid_run(tmp_path, reference):
    worker_kill(tmp_path, reference, SEED)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_worker_killed_at_random_points(tmp_path, reference, seed):
    worker_kill(tmp_path, reference, seed)

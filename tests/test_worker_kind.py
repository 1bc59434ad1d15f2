"""Issue 21: a local cluster's workers are processes for many sub-millisecond cells computed one by one,
threads otherwise (also for short cells computed together, geosweep.sweeps.together).

The Python around each cell (set-up, collecting and writing its values) holds the GIL; for 0.1 ms
cells it is most of the cell, so two threads in one process ran slower than one (benchmarks/README.md,
"Threads or processes"). Real LocalClusters, real zarr stores; the rule's thresholds are lowered by
setting geosweep's own constants, so that a small sweep takes the path of a large one.
"""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.flows.cli.parser import build_parser
from geosweep.sweeps import execution as ex
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution, auto_processes
from geosweep.sweeps.plan import make_plan
from tests.sweep_util import assert_stores_bitwise_equal, chain_ensemble


def _chain(seeds: int, T: float = 0.1) -> dict:
    """The issue's ensemble (3-link chains, random initial conditions): 4 cells per seed."""
    return chain_ensemble("kind", seeds, T)


def test_many_short_cells_take_processes_few_or_long_cells_threads():
    short = make_plan(_chain(ex.AUTO_PROCESS_MIN_CELLS // 4)).cost_array()  # 0.1 ms cells, 20 000 of them
    long = make_plan(_chain(ex.AUTO_PROCESS_MIN_CELLS // 4, T=25.0)).cost_array()  # ≈ 10 ms cells
    assert auto_processes(short)
    assert not auto_processes(short.ravel()[: ex.AUTO_PROCESS_MIN_CELLS - 1])  # too few to pay the start-up
    assert not auto_processes(long)
    assert not auto_processes(np.array([]))


def test_an_explicit_choice_or_a_cluster_elsewhere_is_kept():
    short = np.full(ex.AUTO_PROCESS_MIN_CELLS, 1e-5)
    said: list[str] = []
    assert Execution().for_cells(short, said.append).processes is True
    assert said and "processes" in said[0] and "--threads" in said[0]  # the choice is logged, with its way out
    assert Execution(processes=False).for_cells(short).processes is False
    assert Execution(processes=True).for_cells(short[:1]).processes is True
    for elsewhere in (Execution(serial=True), Execution(address="tcp://127.0.0.1:1"), Execution(cluster_file="c.yaml")):
        assert elsewhere.for_cells(short).processes is None  # no local cluster of ours to choose for
    said.clear()
    assert Execution().for_cells(short[:10], said.append).processes is False and not said


@pytest.mark.parametrize(("flags", "want"), [([], None), (["--processes"], True), (["--threads"], False)])
def test_the_command_line_chooses_or_leaves_it_to_geosweep(flags, want):
    for command in (["run", "spec.toml"], ["extend", "s.zarr", "--T", "2"]):
        args = build_parser().parse_args([*command, *flags])
        assert Execution.from_args(args).processes is want


def test_processes_and_threads_together_are_refused(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "spec.toml", "--processes", "--threads"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_run_of_many_short_cells_starts_worker_processes_bitwise_equal_to_serial(tmp_path, monkeypatch, dask_path):
    """Thresholds lowered so that 16 cells count as many: ``run_sweep`` without a client starts its own
    cluster of processes (the scheduler reports a nanny per worker) and stores what a serial run stores.
    The cells are the discrete gradient's (each computed alone); the Lie cells beside them are computed
    together (geosweep.sweeps.together) and do not count."""
    monkeypatch.setattr(ex, "AUTO_PROCESS_MIN_CELLS", 10)
    monkeypatch.setattr(ex, "AUTO_PROCESS_CELL_SECONDS", 1.0)  # the discrete gradient's cells count as short
    plan = make_plan({**_chain(16), "integrators": ["rkmk4", "dg_avf"], "h": [0.01]})
    said: list[str] = []
    result = run_sweep(plan, str(tmp_path / "auto.zarr"), n_workers=2, log=said.append)
    assert result.complete and result.ran == 32
    assert any(line.startswith("local workers: processes") for line in said), said
    assert any("on 2 workers (processes)" in line for line in said), said
    run_sweep(plan, str(tmp_path / "serial.zarr"), serial=True)
    assert_stores_bitwise_equal(str(tmp_path / "auto.zarr"), str(tmp_path / "serial.zarr"))
    said.clear()
    run_sweep(plan, str(tmp_path / "threads.zarr"), n_workers=2, processes=False, log=said.append)
    assert any("on 2 workers" in line for line in said) and not any("(processes)" in line for line in said), said


def test_many_short_cells_computed_together_keep_threads(tmp_path, monkeypatch, dask_path):
    """Short cells computed together hand the GIL over once per slice, not per cell: threads run them
    side by side (benchmarks/README.md, "Cells computed together"), without a process start-up."""
    monkeypatch.setattr(ex, "AUTO_PROCESS_MIN_CELLS", 10)
    monkeypatch.setattr(ex, "AUTO_PROCESS_CELL_SECONDS", 1.0)
    said: list[str] = []
    result = run_sweep(make_plan(_chain(8)), str(tmp_path / "t.zarr"), n_workers=2, log=said.append)
    assert result.complete and result.ran == 32
    assert any("on 2 workers" in line for line in said) and not any("processes" in line for line in said), said


def _blocked_signals() -> list[str]:
    import signal

    return sorted(s.name for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_local_worker_processes_block_sigint_and_the_driver_does_not():
    """Worker processes start with SIGINT blocked (a terminal's Ctrl-C reaches the whole group; the
    driver stops them); the driver's main thread keeps taking it (tests/test_signals.py: the run)."""
    import signal

    from distributed import Client

    cluster = ex.local_cluster(2, processes=True, dashboard_address=None)
    try:
        with Client(cluster) as client:
            masks = client.run(_blocked_signals)
        assert len(masks) == 2 and all("SIGINT" in m for m in masks.values()), masks
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        cluster.close()


@pytest.mark.parametrize(("integrators", "processes"), [(["rkmk4", "cf4"], False), (["dg_avf"], True)])
def test_the_command_line_counts_only_cells_computed_alone(monkeypatch, integrators, processes, dask_path):
    """``geosweep run``'s own local cluster, chosen once by ``run_sweep`` on the cells to run
    (:func:`geosweep.sweeps.worklist.resolve`): processes for many short cells computed one by one (the
    discrete gradient's), threads for as many computed together (the chain's Lie methods)."""
    from geosweep.flows.cli.common import _execution
    from geosweep.sweeps.store import shard_shape
    from geosweep.sweeps.worklist import WorkList, resolve

    monkeypatch.setattr(ex, "AUTO_PROCESS_MIN_CELLS", 10)
    monkeypatch.setattr(ex, "AUTO_PROCESS_CELL_SECONDS", 1.0)
    plan = make_plan({**_chain(16), "integrators": integrators, "h": [0.01]})  # 16 or 32 cells
    args = build_parser().parse_args(["run", "spec.toml", "--no-prefect", "--workers", "2"])
    execution = _execution(args)
    assert execution.processes is None  # left to the run
    work = WorkList(plan, list(plan.grid.cells()), plan.cost_array(), shard_shape(plan))
    choices = resolve(execution.model_copy(update={"in_driver_below": 0.0}), work, lambda _: None)
    assert not choices.local and choices.execution.processes is processes

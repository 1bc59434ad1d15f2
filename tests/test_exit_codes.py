"""One table from exceptions to exit codes (issue 24 item 4): :data:`geosweep.flows.cli.exits.EXIT_CODES`
is the only place a command's exception chooses its exit code, and its rows are hit by real
``geosweep`` runs (in-process ``main``, real stores)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import geosweep.flows.cli as cli
from geosweep.flows.cli.exits import EXIT_CODES, _class

ROOT = Path(__file__).resolve().parent.parent
SPEC = 'name = "exits"\nsystem = "double_pendulum"\nintegrators = ["rk4"]\nh = [0.01]\nT = 0.5\ndt_out = 0.25\n'


def test_no_command_chooses_an_exit_code_for_an_exception():
    """An ``except`` in the CLI never returns (or exits with) a number: it raises, and the table decides."""
    for path in sorted((ROOT / "flows" / "cli").glob("*.py")):
        for handler in ast.walk(ast.parse(path.read_text())):
            if not isinstance(handler, ast.ExceptHandler):
                continue
            for node in ast.walk(handler):
                returned = node.value if isinstance(node, ast.Return) else None
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "exit" and node.args:
                    returned = node.args[0]
                assert not (isinstance(returned, ast.Constant) and isinstance(returned.value, int)), (
                    f"{path.name}:{node.lineno} chooses an exit code outside flows/cli/exits.py"
                )


def test_table_rows_name_real_exception_classes_subclasses_first():
    classes = [_class(path) for path, _ in EXIT_CODES]
    assert all(issubclass(c, BaseException) for c in classes)
    for i, early in enumerate(classes):  # no row is shadowed by an earlier base class
        assert not any(issubclass(early, base) for base in classes[:i]), early


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("exits")
    (root / "s.toml").write_text(SPEC)
    assert cli.main(["run", str(root / "s.toml"), "--store", str(root / "s.zarr"), "--serial", "--quiet"]) == 0
    return root, root / "s.zarr"


def _copy(store: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy.zarr"
    shutil.copytree(store, out)
    return out


def _spec(tmp_path: Path, text: str) -> str:
    (tmp_path / "x.toml").write_text(text)
    return str(tmp_path / "x.toml")


CASES = {
    "geosweep.flows.plugins:PluginError": lambda root, st, tmp: ["systems", "--import", "no_such_module_xyz"],
    "geosweep.sweeps.spec:SpecError": lambda root, st, tmp: ["run", _spec(tmp, 'name = "x"\n'), "--serial"],
    "geosweep.sweeps.extension:ExtendError": lambda root, st, tmp: ["extend", str(st), "--T", "0.25", "--serial"],
    "geosweep.sweeps.store:StoreMismatchError": lambda root, st, tmp: [
        "run",
        _spec(tmp, SPEC.replace("T = 0.5", "T = 0.75")),
        "--store",
        str(_copy(st, tmp)),
        "--serial",
    ],
    "geosweep.flows.cli.exits:OptionsError": lambda root, st, tmp: ["report", str(st), "--sel", "nonsense"],
    "geosweep.sweeps.execution:ClusterFileError": lambda root, st, tmp: [
        "run",
        str(root / "s.toml"),
        "--store",
        str(tmp / "c.zarr"),
        "--no-prefect",
        "--cluster",
        str(tmp / "missing.yaml"),
    ],
    "geosweep.flows.cli.common:StoreProblem": lambda root, st, tmp: ["status", str(tmp / "nothing.zarr")],
    "geosweep.sweeps.execution:SchedulerUnreachable": lambda root, st, tmp: [
        "run",
        str(root / "s.toml"),
        "--store",
        str(tmp / "a.zarr"),
        "--no-prefect",
        "--address",
        "tcp://127.0.0.1:1",
    ],
    "geosweep.sweeps.repair:StoreDamagedError": lambda root, st, tmp: ["status", _damaged(st, tmp)],
    "geosweep.sweeps.lease:LeaseFileError": lambda root, st, tmp: ["verify", _leased(st, tmp), "--repair"],
}
#: rows a cheap in-process run cannot reach; the named tests hit them through the real CLI
ELSEWHERE = {
    "geosweep.sweeps.liveness:WorkersUnresponsive": "tests/test_cluster_interrupts.py, tests/test_slurm.py",
    "geosweep.sweeps.credentials:StorageOptionsError": "tests/test_credentials.py",
    "geosweep.sweeps.lease:StoreWriteError": "tests/test_faults.py",
    "geosweep.config:ConfigError": "tests/test_config.py (a bad value of each kind, in-process and the console script)",
}


def _damaged(store: Path, tmp_path: Path) -> str:
    from geosweep.sweeps.store import SWEEP_FLAGS

    out = _copy(store, tmp_path)
    shutil.rmtree(out / SWEEP_FLAGS[0])
    return str(out)


def _leased(store: Path, tmp_path: Path) -> str:
    out = _copy(store, tmp_path)
    Path(f"{out}.lease").mkdir()
    return str(out)


def test_every_row_is_covered():
    assert set(CASES) | set(ELSEWHERE) == {path for path, _ in EXIT_CODES}


@pytest.mark.parametrize("row", sorted(CASES))
def test_each_row_is_hit_by_a_real_cli_run(row, store, tmp_path, monkeypatch, capsys):
    root, st = store
    seen: list[BaseException] = []
    real = cli.exit_code

    def spy(exc: BaseException) -> int | None:
        seen.append(exc)
        return real(exc)

    monkeypatch.setattr(cli, "exit_code", spy)
    code = cli.main(CASES[row](root, st, tmp_path))
    expected = dict(EXIT_CODES)[row]
    assert code == expected, (row, code, capsys.readouterr().err[-2000:])
    assert len(seen) == 1 and isinstance(seen[0], _class(row)), (row, seen)
    # the first matching row is this one (not an earlier row of a base class)
    first = next(path for path, _ in EXIT_CODES if isinstance(seen[0], _class(path)))
    assert first == row
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)

"""Every fenced code block of README.md, deploy/README.md and the documentation's pages (docs/**/*.md,
:data:`READMES`) runs here (or is listed with the reason it cannot).

Blocks are found by their first line (:data:`BLOCKS`): a block that is added, or whose first line
changes, fails :func:`test_every_block_is_checked` until it is given a check here. Shell blocks
are checked line by line (:data:`COMMANDS`): a ``geosweep`` line is run in a scratch directory
(``geosweep`` is this checkout's CLI), or, where it needs a cluster, a remote store or a Prefect
deployment, parsed by the CLI's own argument parser with its spec and cluster files validated.
TOML specs are validated as written and run shortened (the sphere spec at icosphere level 1:
42 molecules instead of 642, same axes, same T; ``geosweep demo`` likewise runs the shipped demo
spec at level 1, through the CLI's own ``demo`` command); Python blocks are executed against the
stores the shell lines wrote. ``tests/test_lint.py`` checks the set-up commands against ``.ci/run``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the documentation's pages written by hand (the generated reference pages and build output are not)
NOT_PAGES = ("_build/", "reference/generated/", "jupyter_execute/")
DOC_PAGES = tuple(
    sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if not p.relative_to(ROOT / "docs").as_posix().startswith(NOT_PAGES)
    )
)
READMES = ("README.md", "deploy/README.md", *DOC_PAGES)
GETTING_STARTED = "docs/getting-started.md"
OWN_SYSTEM = "docs/howto/own-system.md"
KERNELS = "docs/howto/kernels.md"
GROW = "docs/howto/grow-a-study.md"

# --------------------------------------------------------------------------------------------
# the blocks
# --------------------------------------------------------------------------------------------


def code_blocks(name: str) -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of ``name`` (a path under the repository root);
    MyST directives (```` ```{toctree} ````, ```` ```{eval-rst} ````, …) are not code blocks."""
    text = (ROOT / name).read_text()
    found = re.finditer(r"^```(\{[\w-]+\}|\w*)[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    return [(m.group(1), m.group(2)) for m in found if not m.group(1).startswith("{")]


def block(name: str, first_line: str) -> str:
    """The block of ``name`` whose first line starts with ``first_line``."""
    found = [text for _lang, text in code_blocks(name) if text.startswith(first_line)]
    assert len(found) == 1, f"{name}: {len(found)} blocks start with {first_line!r}"
    return found[0]


def commands(text: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments and blank lines dropped."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:  # `a && b` is two commands
            n = words.index("&&") if "&&" in words else len(words)
            out.append(shlex.join(words[:n]))
            words = words[n + 1 :]
    return out


#: how both set-up commands begin: a virtual environment, then pip upgraded (tests/test_lint.py)
VENV = "python3 -m venv .venv && . .venv/bin/activate && python3 -m pip install -U pip && "

#: how each block is checked, by (file, start of its first line); "" language blocks included
BLOCKS: dict[tuple[str, str], str] = {
    ("README.md", f"{VENV}python3 -m pip install -c constraints.txt -e . &&"): "shell: set-up + demo",
    ("README.md", f'{VENV}python3 -m pip install -c constraints.txt -e ".[test]"'): "shell: the CI command",
    ("README.md", "import geosweep\nfrom geosweep.sweeps import Execution\n\nsol"): "python: the ten lines, run",
    ("README.md", "geosweep validate sphere.toml"): "shell: the sweep commands (getting started's)",
    (GETTING_STARTED, f"{VENV}python3 -m pip install -c constraints.txt -e . &&"): "shell: set-up + demo",
    (GETTING_STARTED, "# sphere.toml"): "spec: validated as written, run shortened",
    (GETTING_STARTED, "geosweep validate sphere.toml"): "shell: the sweep commands",
    (GETTING_STARTED, "import xarray as xr, geosweep"): "python: against the shortened sphere store",
    (GETTING_STARTED, "geosweep report results/sphere-demo.zarr"): "shell: reports of the demo store",
    (GETTING_STARTED, "import geosweep\nfrom geosweep.sweeps import Execution\ngeosweep.systems()"): (
        "python: the front door, executed in a scratch directory"
    ),
    ("docs/index.md", "python3 -m pip install -c constraints.txt -e"): "shell: the docs build",
    ("docs/explanation/architecture.md", "spec (TOML/YAML) →"): "not code: the pipeline diagram",
    ("docs/explanation/architecture.md", "kernels/    geosweep.kernels"): "layout: folders match pyproject",
    (KERNELS, "import geosweep\n\ntr = geosweep.integrate("): "python: executed, no deprecated alias",
    (KERNELS, "from geosweep.kernels.registry import FAMILIES, RunRequest"): "python: executed",
    (KERNELS, "from geosweep.kernels.chain.model import build_chain"): "python: executed, against cells alone",
    (KERNELS, "from geosweep.sweeps.engine import run_sweep"): "python: executed with a shortened spec_dict",
    (GROW, "geosweep run sweeps/examples/long_energy.toml"): "shell: parsed, spec and cluster validated",
    (GROW, "from geosweep import sweeps"): "python: executed in a scratch directory (run, extend)",
    (OWN_SYSTEM, "import numpy as np"): "python: my_systems.py of `geosweep run my_sweep.toml --import`",
    (OWN_SYSTEM, "# your package's pyproject.toml"): "toml: parsed, group checked",
    (OWN_SYSTEM, "import math"): "python: executed, then a short sweep",
    ("deploy/README.md", "export NUMBA_CACHE_DIR="): "shell: validate run, Slurm run parsed",
    (
        "deploy/README.md",
        "from geosweep.deploy.clusters import ClusterConfig",
    ): "python: executed (jobs=0 submits nothing)",
    (
        "deploy/README.md",
        "geosweep serve my_sweep.toml --store-root /scratch/nightly",
    ): "shell: parsed (serves until stopped)",
    ("deploy/README.md", "docker build"): "shell: no Docker daemon (test_deploy checks the Dockerfile)",
    ("deploy/README.md", "dask scheduler --port 8786"): "shell: daemons skipped, the run parsed",
    ("deploy/README.md", "squeue -u $USER"): "shell: needs Slurm (tests/test_slurm.py runs a real one)",
    ("deploy/README.md", "geosweep run my_sweep.toml --cluster deploy/k8s"): "shell: parsed, cluster validated",
    ("deploy/README.md", "kubectl apply"): "shell: kubectl skipped, the run parsed",
    ("deploy/README.md", "geosweep run my_sweep.toml --store s3://"): "shell: parsed (needs an S3 endpoint)",
    ("deploy/README.md", "import xarray as xr"): "python: needs an S3 endpoint; test_deploy opens S3 stores",
    ("deploy/README.md", "export GEOSWEEP_S3="): "shell: parsed with the variable set",
    ("deploy/README.md", "prefect server start &"): "shell: parsed (a long-running Prefect server)",
    ("deploy/README.md", "prefect work-pool create"): "shell: needs a Prefect server and work pool",
    (
        "deploy/README.md",
        "from geosweep.analysis.report import compare_stores",
    ): "python: imports executed; nightly runs",
}

SCRATCH = "/scratch/"
#: every command of every shell block: "run" (in the scratch directory; /scratch/ mapped into it) or
#: "parse: <reason>" (parsed by the CLI's parser; its spec and cluster files validated) or "skip: <reason>"
COMMANDS: dict[str, str] = {
    # README: set-up (pip needs the network and changes the environment; `geosweep demo` runs below)
    "python3 -m pip install -U pip": "skip: installs packages (the test environment is the installed one)",
    "python3 -m venv .venv": "skip: makes the virtual environment the suite runs in (.ci/run: a fresh one)",
    ". .venv/bin/activate": "skip: activates it in the shell",
    "python3 -m pip install -c constraints.txt -e .": "skip: installs packages (test_lint checks the pins)",
    "python3 -m pip install -c constraints.txt -e '.[test]'": "skip: installs packages",
    "python3 -m pytest": "skip: this suite itself",
    # docs/index.md: the docs build (tests/test_docs_build.py runs it)
    "python3 -m pip install -c constraints.txt -e '.[docs]'": "skip: installs packages",
    "python3 -m sphinx -W --keep-going -n -b html docs docs/_build/html": "skip: test_docs_build builds it",
    "geosweep demo": "run",
    # README: the sweep commands
    "geosweep validate sphere.toml": "run",
    "geosweep run sphere.toml": "run",
    "geosweep run sphere.toml --workers 8 --store /scratch/s.zarr": "run",
    "geosweep run sphere.toml --address tcp://scheduler:8786": "parse: needs a running Dask scheduler",
    "geosweep run sphere.toml --no-prefect": "run",
    "geosweep run sphere.toml --processes": "run",
    "geosweep status results/sphere-omega.zarr": "run",
    "geosweep report results/sphere-omega.zarr": "run",
    "geosweep systems": "run",
    "geosweep run my_sweep.toml --import my_systems": "run",
    "geosweep run sphere.toml --quiet": "run",
    # README: reports of the demo store
    "geosweep report results/sphere-demo.zarr": "run",
    "geosweep report results/sphere-demo.zarr --sel omega=0": "run",
    "python3 -m geosweep.analysis.render results/sphere-demo.zarr.report": "run",
    # README: the long example on Slurm
    "geosweep run sweeps/examples/long_energy.toml --cluster deploy/slurm/cluster.toml --store /scratch/long.zarr": (
        "parse: submits Slurm jobs"
    ),
    "geosweep status /scratch/long.zarr": "parse: the store of the Slurm run",
    "geosweep report /scratch/long.zarr": "parse: the store of the Slurm run",
    # deploy/README.md
    "export 'NUMBA_CACHE_DIR=$HOME/.cache/geosweep/numba'": "skip: sets the shell's environment",
    "geosweep validate my_sweep.toml": "run",
    "geosweep run my_sweep.toml --cluster deploy/slurm/cluster.toml --store '/scratch/$USER/my_sweep.zarr'": (
        "parse: submits Slurm jobs"
    ),
    "dask scheduler --port 8786 --dashboard-address :0 '&'": "skip: a long-running scheduler",
    "NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 dask worker tcp://head-node:8786 --nworkers 4 --nthreads 2 "
    "--resources geosweep-slice=1": "skip: long-running workers on other hosts (test_store_visibility starts them)",
    "geosweep run my_sweep.toml --address tcp://head-node:8786 --store /shared/my_sweep.zarr": (
        "parse: needs the scheduler and workers above"
    ),
    "squeue -u '$USER' -o '%i %j %T %r'": "skip: needs Slurm",
    "tail 'logs/dask/geosweep-*.err'": "skip: the job logs of a Slurm run",
    "docker build -t geosweep:latest -f deploy/Dockerfile .": "skip: no Docker daemon",
    "docker tag geosweep:latest registry.example.org/geosweep:latest": "skip: no Docker daemon",
    "docker push registry.example.org/geosweep:latest": "skip: no Docker daemon",
    "geosweep run my_sweep.toml --cluster deploy/k8s/cluster.yaml --store s3://my-bucket/geosweep/my_sweep.zarr": (
        "parse: starts pods on a Kubernetes cluster"
    ),
    "kubectl apply -f deploy/k8s/daskcluster.yaml": "skip: needs a Kubernetes cluster",
    "kubectl port-forward svc/geosweep-scheduler 8786:8786 '&'": "skip: needs a Kubernetes cluster",
    "geosweep run my_sweep.toml --address tcp://localhost:8786 --store s3://my-bucket/geosweep/my_sweep.zarr": (
        "parse: needs the cluster's scheduler and an S3 bucket"
    ),
    "geosweep run my_sweep.toml --store s3://my-bucket/geosweep/my_sweep.zarr --storage-options "
    '\'{"client_kwargs": {"endpoint_url": "https://s3.example.org"}}\'': "parse: needs an S3 endpoint",
    "geosweep status s3://my-bucket/geosweep/my_sweep.zarr --storage-options "
    '\'{"client_kwargs": {"endpoint_url": "https://s3.example.org"}}\'': "parse: needs an S3 endpoint",
    'export \'GEOSWEEP_S3={"key": "…", "secret": "…", "client_kwargs": {"endpoint_url": '
    '"https://s3.example.org"}}\'': "skip: sets the variable the next lines' parse uses",
    "geosweep run my_sweep.toml --store s3://my-bucket/geosweep/my_sweep.zarr --storage-options env:GEOSWEEP_S3": (
        "parse: needs an S3 endpoint"
    ),
    "geosweep serve my_sweep.toml --store-root s3://my-bucket/geosweep/nightly --storage-options env:GEOSWEEP_S3": (
        "parse: serves a deployment until stopped (test_nightly serves one)"
    ),
    "prefect server start '&'": "skip: a long-running server (test_nightly starts one)",
    "export PREFECT_API_URL=http://127.0.0.1:4200/api": "skip: sets the shell's environment",
    "geosweep serve my_sweep.toml --store-root s3://my-bucket/geosweep/nightly --cron '0 2 * * *' --cluster "
    "deploy/slurm/cluster.toml --max-failed-share 0.25": "parse: serves a deployment until stopped",
    "geosweep serve my_sweep.toml --store-root /scratch/nightly --extend-by 1000 --max-failed-share 0.25": (
        "parse: serves a deployment until stopped (test_nightly runs an extending night)"
    ),
    "prefect work-pool create geosweep --type process": "skip: needs a Prefect server",
    "prefect deploy --prefect-file deploy/prefect.yaml --all": "skip: needs a Prefect server",
    "prefect worker start --pool geosweep": "skip: needs a Prefect server",
}


def _block_key(name: str, text: str) -> tuple[str, str] | None:
    keys = [k for k in BLOCKS if k[0] == name and text.startswith(k[1])]
    return keys[0] if len(keys) == 1 else None


def _shell_blocks() -> list[tuple[str, str]]:
    out = []
    for name in READMES:
        for lang, text in code_blocks(name):
            key = _block_key(name, text)
            if lang in ("", "bash", "sh") and key is not None and BLOCKS[key].startswith("shell"):
                out.append((name, text))
    return out


def test_every_block_is_checked():
    """A new block, or a changed first line, must be given a check (or a reason) above."""
    seen = set()
    for name in READMES:
        for _lang, text in code_blocks(name):
            key = _block_key(name, text)
            assert key is not None, f"{name}: a code block without a check in BLOCKS: {text[:120]!r}"
            seen.add(key)
    assert seen == set(BLOCKS), f"BLOCKS names blocks that no longer exist: {set(BLOCKS) - seen}"
    listed = set()
    for _name, text in _shell_blocks():
        for cmd in commands(text):
            assert cmd in COMMANDS, f"a shell line without a check in COMMANDS: {cmd!r}"
            listed.add(cmd)
    assert listed == set(COMMANDS), f"COMMANDS names lines that no longer exist: {set(COMMANDS) - listed}"
    for how in COMMANDS.values():
        assert how == "run" or how.startswith(("parse: ", "skip: ")), how


# --------------------------------------------------------------------------------------------
# running them
# --------------------------------------------------------------------------------------------


def _geosweep() -> list[str]:
    exe = shutil.which("geosweep")
    return [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


#: ``geosweep demo`` with the demo spec's path pointed at ``argv[1]`` (the shortened copy of the
#: shipped spec, :func:`short_demo_spec`); everything else is the CLI's own ``demo`` command
DEMO_DRIVER = (
    "import sys, geosweep.flows.cli as c; c._demo_spec_path = lambda: sys.argv[1]; sys.exit(c.main(sys.argv[2:]))"
)


def short_demo_spec(cwd: Path) -> Path:
    """The shipped demo spec on the level-1 icosphere (as :func:`shortened_sphere_spec`), written
    under ``cwd`` with its file name (``geosweep demo`` prints it): same axes, T, h and snapshots."""
    from geosweep.flows.cli import DEMO_SPEC, _demo_spec_path

    path = cwd / "demo" / DEMO_SPEC
    path.parent.mkdir(exist_ok=True)
    path.write_text(shortened_sphere_spec(Path(_demo_spec_path()).read_text()))
    return path


def _run(cmd: str, cwd: Path, scratch: Path) -> subprocess.CompletedProcess:
    words = shlex.split(cmd.replace(SCRATCH, f"{scratch}/"))
    if words[:2] == ["geosweep", "demo"]:  # the demo shortened: 24 cells of 42 molecules, not 642
        words = [sys.executable, "-c", DEMO_DRIVER, str(short_demo_spec(cwd)), *words[1:]]
    elif words[0] == "geosweep":
        words = [*_geosweep(), *words[1:]]
    elif words[0] == "python3":
        words[0] = sys.executable
    p = subprocess.run(words, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"{cmd!r} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def _parse(cmd: str, cwd: Path, monkeypatch) -> None:
    """Parse a ``geosweep`` line with the CLI's parser and validate the spec and cluster file it names."""
    from geosweep.deploy.clusters import ClusterConfig
    from geosweep.flows.cli import build_parser
    from geosweep.sweeps.plan import make_plan

    words = shlex.split(cmd)
    assert words[0] == "geosweep", cmd
    monkeypatch.chdir(cwd)
    args = build_parser().parse_args(words[1:])
    if getattr(args, "spec", None):
        make_plan(str(ROOT / args.spec) if (ROOT / args.spec).exists() else args.spec)
    if getattr(args, "cluster", None):
        ClusterConfig.from_file(ROOT / args.cluster)
    assert not (getattr(args, "cluster", None) and getattr(args, "address", None)), cmd


def shortened_sphere_spec(text: str) -> str:
    """The README's sphere spec on the level-1 icosphere (42 molecules): same axes, T and h."""
    short, n = re.subn(r"^\[params\]([^\n]*)\n", "[params]\\1\nlevel = 1\n", text, flags=re.M)
    assert n == 1
    return short


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A directory with the README's files: sphere.toml (shortened), my_sweep.toml and my_systems.py
    (the rotor ring of "Your own (S²)ⁿ system") for the --import line."""
    d = tmp_path_factory.mktemp("readme")
    (d / "sphere.toml").write_text(shortened_sphere_spec(block(GETTING_STARTED, "# sphere.toml")))
    (d / "my_systems.py").write_text(block(OWN_SYSTEM, "import numpy as np"))
    (d / "my_sweep.toml").write_text(
        'name = "ring"\nsystem = "rotor_ring"\nintegrators = ["implicit_vi", "rk4"]\nh = [0.01]\nT = 0.5\n'
        "dt_out = 0.1\n[params]\nn = 6\nk = [0.5, 1.0]\n"
    )
    (d / "scratch").mkdir()
    return d


def test_readme_sphere_spec_is_valid_as_written():
    from geosweep.sweeps.plan import make_plan

    spec = tomllib.loads(block(GETTING_STARTED, "# sphere.toml"))
    plan = make_plan(spec)
    assert plan.grid.shape == (3, 3, 3, 2)  # integrator × h × omega × sense
    short = make_plan(tomllib.loads(shortened_sphere_spec(block(GETTING_STARTED, "# sphere.toml"))))
    assert short.grid.shape == plan.grid.shape and short.spec.T == plan.spec.T


def test_demo_spec_is_valid_as_shipped_and_shortened_on_the_same_axes(tmp_path):
    """`geosweep demo` runs shortened below (:func:`short_demo_spec`): the shipped spec validates
    as written, and the short one has its grid, T and snapshots on 42 molecules instead of 642."""
    from geosweep.flows.cli import _demo_spec_path
    from geosweep.sweeps.plan import make_plan

    plan = make_plan(_demo_spec_path())
    short = make_plan(str(short_demo_spec(tmp_path)))
    assert plan.grid.shape == short.grid.shape == (4, 3, 2)  # integrator × h × omega
    for field in ("T", "h", "dt_out", "snapshot_dt", "name"):
        assert getattr(short.spec, field) == getattr(plan.spec, field), field
    assert short.spec.params["level"] == 1 and plan.spec.params.get("level", 3) == 3


@pytest.fixture(scope="module")
def ran(workspace) -> dict[str, subprocess.CompletedProcess]:
    """Every "run" line of the shell blocks of README.md and the docs' pages, in order, in the
    workspace; a line that several pages give (the set-up, the sweep commands) runs once."""
    out = {}
    for name, text in _shell_blocks():
        if name == "deploy/README.md":
            continue
        for cmd in commands(text):
            if COMMANDS[cmd] != "run" or cmd in out:
                continue
            if cmd.startswith("python3 -m geosweep.analysis.render") and not _has_browser():
                continue  # headless Chromium (apt-get install -y chromium), as tests/test_report_html.py
            out[cmd] = _run(cmd, workspace, workspace / "scratch")
    return out


def _has_browser() -> bool:
    from geosweep.analysis.render import find_browser

    return find_browser() is not None


def test_readme_shell_lines_run(ran, workspace):
    import xarray as xr

    ds = xr.open_zarr(workspace / "results" / "sphere-omega.zarr")
    assert int((ds.status == 0).sum()) == 54
    assert (workspace / "scratch" / "s.zarr").exists()
    assert (workspace / "results" / "sphere-omega.zarr.report" / "index.md").exists()
    assert "lj_sphere" in ran["geosweep systems"].stdout
    assert "valid" in ran["geosweep validate sphere.toml"].stdout
    assert int((xr.open_zarr(workspace / "results" / "ring.zarr").status == 0).sum()) == 4
    assert (workspace / "results" / "sphere-demo.zarr.report" / "index.html").exists()
    assert "geosweep: demo spec sphere_demo.toml" in ran["geosweep demo"].stderr
    demo = xr.open_zarr(workspace / "results" / "sphere-demo.zarr")
    assert int((demo.status == 0).sum()) == 24 and demo.sizes["body"] == 42


def test_readme_analysis_block(ran, workspace, monkeypatch):
    import pandas as pd

    monkeypatch.chdir(workspace)
    ns: dict = {}
    code = block(GETTING_STARTED, "import xarray as xr, geosweep")
    *body, last = code.strip().splitlines()
    exec("\n".join(body), ns)
    table = eval(last.split("#")[0], ns)
    assert isinstance(table, pd.DataFrame) and table.shape == (3, 3)  # integrator × h
    assert table.notna().all().all()


def test_readme_ten_lines(tmp_path, monkeypatch):
    """The front page's example runs as written, and its comments say what it gives: the heavy top's
    symplectic SLGI at h = 0.01 to T = 10 keeps the energy error near 3e-5; the sweep's store is
    integrator × h × omega, its table integrator × h, and every cell is classified."""
    import pandas as pd

    from geosweep.kernels.status import Status

    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    code = block("README.md", "import geosweep\nfrom geosweep.sweeps import Execution\n\nsol")
    assert len(code.strip().splitlines()) <= 12
    exec(code, ns)
    sol, ds = ns["sol"], ns["ds"]
    assert sol.status == Status.OK and 2e-5 < sol["max_rel_energy_error"] < 5e-5, sol["max_rel_energy_error"]
    assert dict(ds.sizes)["integrator"] == 2 and int((ds.status == 0).sum()) == 8
    *_, table_line, classify_line = code.strip().splitlines()
    table = eval(table_line.split("#")[0], ns)
    assert isinstance(table, pd.DataFrame) and table.shape == (2, 2) and table.notna().all().all()
    classes = eval(classify_line.split("#")[0], ns)
    assert set(np.unique(classes.values)) <= {"round-off", "bounded", "drifting"}


def test_readme_front_door_block(tmp_path, monkeypatch):
    """The block's claims: the values in its comments, continue_to a direct run, the store grown and verified."""
    import geosweep
    from geosweep.kernels.status import Status

    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(block(GETTING_STARTED, "import geosweep\nfrom geosweep.sweeps import Execution\ngeosweep.systems()"), ns)
    sol = ns["sol"]
    assert sol.status == Status.OK and sol["max_rel_energy_error"] < 1e-8 and sol["max_unit_error"] < 1e-14
    direct = geosweep.integrate(ns["chain"], "rkmk45", T=2.0, dt_out=0.1, tol=1e-8)
    assert ns["longer"]["energy"].tobytes() == direct["energy"].tobytes()
    assert ns["ds"].sizes["time"] == 21 and int((ns["ds"].status == 0).sum()) == 2


def test_readme_kernel_blocks():
    ns: dict = {}
    code = block(KERNELS, "import geosweep\n\ntr = geosweep.integrate(")
    *body, last = code.strip().splitlines()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the page calls no deprecated alias
        exec("\n".join(body), ns)
    expr, comment = last.split("#", 1)
    mean_de, unit_err, status = eval(expr, ns)
    want = [w.strip() for w in comment.split(",")]
    assert float(want[0]) / 1.05 < mean_de < float(want[0]) * 1.05, (mean_de, want)
    assert unit_err < 10 * float(want[1]), (unit_err, want)
    assert repr(status) == want[2], (repr(status), want)
    exec(block(KERNELS, "from geosweep.kernels.registry import FAMILIES, RunRequest"), ns)
    assert ns["traj"].finished and ns["traj"].steps == 1000


def test_readme_cells_together_block():
    """The block's values are each cell's own (a few cells checked against start → advance → collect)."""
    ns: dict = {}
    exec(block(KERNELS, "from geosweep.kernels.chain.model import build_chain"), ns)
    values, ts2, models, req = ns["values"], ns["ts2"], ns["models"], ns["req"]
    assert values["max_rel_energy_error"].shape == (1000,) and (ns["stack"].status == 0).all()
    for i in (0, 517, 999):
        traj = ts2.start(models[i], "rkmk4", req, {})
        traj.advance()
        alone = ts2.collect(models[i], "rkmk4", traj, {}).values
        assert all(np.asarray(alone[n]).tobytes() == np.asarray(values[n][i]).tobytes() for n in alone)


def test_readme_run_sweep_block(workspace, monkeypatch):
    from distributed import Client, LocalCluster

    monkeypatch.chdir(workspace)
    spec_dict = tomllib.loads((workspace / "sphere.toml").read_text())  # the same sweep: the later calls resume
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
        ns = {"spec_dict": spec_dict, "my_distributed_client": client}
        exec(block(KERNELS, "from geosweep.sweeps.engine import run_sweep"), ns)
    import xarray as xr

    assert int((xr.open_zarr(workspace / "s.zarr").status == 0).sum()) == 54


def test_readme_extend_block(tmp_path, monkeypatch):
    import xarray as xr

    monkeypatch.chdir(tmp_path)
    exec(block(GROW, "from geosweep import sweeps"), {})
    ds = xr.open_zarr(tmp_path / "long.zarr")
    assert float(ds.attrs["T"]) == 20.0 and list(ds.h.values) == [0.01, 0.005]  # the user's spec grew the
    assert int((ds.status == 0).sum()) == 3 and int((ds.status == -2).sum()) == 1  # extended store (h0 pinned)
    assert [r["extension"]["to"] for r in ds.attrs["runs"] if "extension" in r] == [20.0]


def test_readme_long_energy_lines_parse(monkeypatch):
    text = block(GROW, "geosweep run sweeps/examples/long_energy.toml")
    for cmd in commands(text):
        assert COMMANDS[cmd].startswith("parse: ")
        _parse(cmd, ROOT, monkeypatch)


def test_readme_entry_point_block():
    from geosweep.flows.plugins import GROUP

    data = tomllib.loads(block(OWN_SYSTEM, "# your package's pyproject.toml"))
    (group,) = data["project"]["entry-points"]
    assert group == GROUP


def test_readme_skew_gradient_block(tmp_path):
    import importlib.util

    import numpy as np

    from geosweep.kernels.registry import SYSTEMS
    from geosweep.sweeps.engine import run_sweep

    path = tmp_path / "readme_lv.py"  # a file, as the README asks (Numba caches compiled code by file)
    path.write_text(block(OWN_SYSTEM, "import math"))
    spec = importlib.util.spec_from_file_location("readme_lv", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    system = SYSTEMS["lotka_volterra"].build()
    assert system.gradient_fd_error(np.array([1.2, 0.7])) < 1e-6
    sweep = {"name": "lv", "system": "lotka_volterra", "integrators": ["dg_avf"], "h": [0.1], "T": 1.0, "dt_out": 0.5}
    result = run_sweep(sweep, tmp_path / "lv.zarr", serial=True)
    assert (result.total, result.failed_cells) == (1, 0)


# --------------------------------------------------------------------------------------------
# deploy/README.md
# --------------------------------------------------------------------------------------------


def test_deploy_readme_shell_lines(workspace, tmp_path, monkeypatch):
    (tmp_path / "my_sweep.toml").write_text((workspace / "sphere.toml").read_text())
    monkeypatch.setenv("GEOSWEEP_S3", '{"key": "k", "secret": "s"}')
    for name, text in _shell_blocks():
        if name != "deploy/README.md":
            continue
        for cmd in commands(text):
            how = COMMANDS[cmd]
            if how == "run":
                _run(cmd, tmp_path, tmp_path)
            elif how.startswith("parse: "):
                _parse(cmd, tmp_path, monkeypatch)


def test_deploy_readme_job_script_block(monkeypatch):
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(block("deploy/README.md", "from geosweep.deploy.clusters import ClusterConfig"), ns)


def test_deploy_readme_nightly_block_imports():
    code = block("deploy/README.md", "from geosweep.analysis.report import compare_stores")
    imports = "\n".join(line for line in code.splitlines() if line.startswith(("from ", "import ")))
    exec(imports, {})


def test_readme_gearbox_forms_are_accepted():
    """Every `form = "…"` the gearbox's row of docs/explanation/preservation.md gives validates and builds."""
    from geosweep.sweeps.plan import make_plan

    page = (ROOT / "docs" / "explanation" / "preservation.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `gearbox` |"))
    forms = re.findall(r'`form = "(\w+)"`|`"(\w+)"`', row)
    forms = sorted({a or b for a, b in forms})
    assert forms == ["canonical", "qr", "reduced"], forms
    spec = {"name": "g", "system": "gearbox", "integrators": ["dg_gonzalez"], "h": [0.1], "T": 0.2, "dt_out": 0.1}
    plan = make_plan(spec | {"params": {"form": forms}})
    assert plan.grid.shape == (1, 1, 3)


def test_readme_layout_block_matches_the_package_mapping():
    """The layout (docs/explanation/architecture.md) names each folder with the package it is installed as."""
    import tomllib

    layout = "docs/explanation/architecture.md"
    block = next(t for _l, t in code_blocks(layout) if t.startswith("kernels/    geosweep.kernels"))
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    listed = {}
    for line in block.splitlines():
        folder, package = line.split()[:2]
        if package.startswith("geosweep"):
            listed[package] = folder.rstrip("/")
            assert (ROOT / folder).is_dir(), folder
    assert listed == mapping

"""The deploy layer with real parts: an S3 endpoint (moto server on 127.0.0.1), a 2-worker
LocalCluster, a temporary Prefect server, dask-jobqueue job scripts and the ``geosweep`` CLI.

Not covered here (no such systems on a CI machine): submitting to a real Slurm/PBS batch
system and a real Kubernetes cluster with the Dask operator.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from geosweep.deploy.clusters import (  # noqa: E402
    WORKER_ENV,
    ClusterConfig,
    MissingDependencyError,
    make_cluster,
)
from geosweep.kernels.vocabulary import RUN_DEPENDENT  # noqa: E402
from geosweep.sweeps.engine import SLICE_RESOURCE, run_sweep  # noqa: E402
from geosweep.sweeps.store import StoreRef, mark_for_rerun  # noqa: E402
from tests.proc_util import seeded_numba_cache  # noqa: E402

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
BUCKET = "geosweep-test"
SPEC = {
    "name": "deploy-springs",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 1.0,
    "dt_out": 0.05,
}
SPEC_TOML = """name = "deploy-springs"
system = "spring_pendula"
integrators = ["explicit_vi", "rk4"]
h = [0.01, 0.005]
T = 1.0
dt_out = 0.05
"""
RUN_STAMPS = RUN_DEPENDENT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _numba_threads_env() -> str | None:
    return os.environ.get("NUMBA_NUM_THREADS")


def assert_bitwise_equal(a: xr.Dataset, b: xr.Dataset) -> None:
    """Every physics variable and coordinate identical bit for bit (run stamps excepted)."""
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        if name in RUN_STAMPS:
            continue
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype, name
        assert x.tobytes() == y.tobytes(), name
    for c in a.coords:
        assert np.array_equal(a[c].values, b[c].values), c


# ---------------------------------------------------------------------------------------
# fixtures: real services on this machine
# ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 with one bucket; yields the fsspec storage options."""
    import boto3

    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)
    try:
        yield {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client

    with make_cluster("local", n_workers=2) as lc, Client(lc) as client:
        yield lc, client


@pytest.fixture(scope="module")
def prefect_server():
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield PREFECT_API_URL.value()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> xr.Dataset:
    """The spec run serially into a local store: the bitwise reference."""
    path = tmp_path_factory.mktemp("ref") / "ref.zarr"
    result = run_sweep(SPEC, path, serial=True)
    assert result.complete and result.ran == 4
    return xr.open_zarr(path)


# ---------------------------------------------------------------------------------------
# (a) object-store output
# ---------------------------------------------------------------------------------------
def test_s3_serial_run_resumes_and_opens_bitwise(s3, reference):
    url = f"s3://{BUCKET}/serial.zarr"
    first = run_sweep(SPEC, url, serial=True, storage_options=s3)
    assert first.complete and first.ran == 4 and first.store == url
    again = run_sweep(SPEC, url, serial=True, storage_options=s3)
    assert again.ran == 0 and again.skipped == 4 and again.slices == 0
    ds = xr.open_zarr(url, storage_options=s3)
    assert int(ds["done"].sum()) == 4
    assert_bitwise_equal(ds, reference)
    assert [r["cells_run"] for r in ds.attrs["runs"]] == [4]


def test_s3_on_local_cluster_resumes_interrupted_cells(s3, cluster, reference, dask_path):
    import zarr

    lc, client = cluster
    url = f"s3://{BUCKET}/cluster.zarr"
    first = run_sweep(SPEC, url, client=client, slice_seconds=0.01, storage_options=s3)
    assert first.complete and first.ran == 4 and first.slices >= 2
    # an interrupted run: two cells never got written (completion marker and checksum cleared)
    ref = StoreRef.of(url, s3)
    mark_for_rerun(ref, [(0, 0), (0, 1)])
    assert int(np.asarray(zarr.open_group(url, mode="r", storage_options=s3)["done"][...]).sum()) == 2
    second = run_sweep(SPEC, url, address=lc.scheduler_address, slice_seconds=0.01, storage_options=s3)
    assert second.complete and (second.skipped, second.ran) == (2, 2)
    assert_bitwise_equal(xr.open_zarr(url, storage_options=s3), reference)


# ---------------------------------------------------------------------------------------
# (b) clusters
# ---------------------------------------------------------------------------------------
def test_slurm_job_script_has_directives_and_env():
    c = make_cluster(
        "slurm",
        queue="compute",
        account="geo123",
        cores=4,
        memory="8GiB",
        walltime="01:00:00",
        job_extra_directives=["--constraint=skylake"],
        numba_cache_dir="/shared/numba-cache",
        env={"GEOSWEEP_TAG": "nightly"},
        worker_lifetime="55m",
        dashboard_address=":0",
    )
    try:
        script = c.job_script()
    finally:
        c.close()
    for line in (
        "#SBATCH -J geosweep",
        "#SBATCH -p compute",
        "#SBATCH -A geo123",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=8G",
        "#SBATCH -t 01:00:00",
        "#SBATCH --constraint=skylake",
        'export NUMBA_CACHE_DIR="/shared/numba-cache"',
        'export GEOSWEEP_TAG="nightly"',
        'mkdir -p "$NUMBA_CACHE_DIR"',
    ):
        assert line in script.splitlines(), line
    for key, value in WORKER_ENV.items():
        assert f'export {key}="{value}"' in script
    assert 'export PYTHONSAFEPATH="1"' in script.splitlines()  # the working directory off the workers' sys.path
    worker = script.splitlines()[-1]
    assert "--nthreads 1" in worker and "--nworkers 4" in worker and "--memory-limit 2.00GiB" in worker
    assert worker.endswith(" --nthreads 2 --resources geosweep-slice=1 --lifetime 55m --lifetime-stagger 2m")
    # the environment is set before the worker starts
    assert script.index("NUMBA_NUM_THREADS") < script.index("distributed.cli.dask_worker")


def test_a_cluster_files_env_overrides_the_workers_safe_path():
    c = make_cluster("slurm", env={"PYTHONSAFEPATH": ""}, dashboard_address=":0")
    try:
        lines = c.job_script().splitlines()
    finally:
        c.close()
    assert [line for line in lines if "PYTHONSAFEPATH" in line] == ['export PYTHONSAFEPATH=""']


def test_pbs_cluster_from_example_file_has_directives_and_env():
    cfg = ClusterConfig.from_file(DEPLOY / "pbs" / "cluster.yaml")
    assert cfg.kind == "pbs" and cfg.root.requests_workers
    options = cfg.options | {"jobs": 0, "adapt_max_jobs": None, "dashboard_address": ":0"}
    c = make_cluster("pbs", **options)
    try:
        script = c.job_script()
    finally:
        c.close()
    assert "#PBS -N geosweep" in script
    assert f"#PBS -q {cfg.root.queue}" in script
    assert f"#PBS -l walltime={cfg.root.walltime}" in script
    assert f"ncpus={cfg.root.cores}" in script
    for directive in cfg.root.job_extra_directives or []:  # none as shipped: whole nodes are a choice
        assert f"#PBS {directive}" in script
    assert f"#PBS -e {cfg.root.log_directory}/" in script  # the jobs' logs are kept
    assert 'export NUMBA_NUM_THREADS="1"' in script
    assert f'export NUMBA_CACHE_DIR="{cfg.root.numba_cache_dir}"' in script
    assert "--nthreads 1 --memory-limit" in script and f"--nworkers {cfg.root.cores}" in script
    assert f"--nthreads 2 --resources {SLICE_RESOURCE}=1" in script


def test_example_cluster_files_and_manifest_are_valid():
    slurm = ClusterConfig.from_file(DEPLOY / "slurm" / "cluster.toml")
    assert slurm.kind == "slurm" and slurm.root.requests_workers
    # as shipped: adaptive (retired workers are replaced), no --exclusive, job logs kept, a free dashboard port
    assert slurm.root.adapt_max_jobs >= 1 and slurm.root.worker_lifetime and slurm.root.numba_cache_dir
    assert not slurm.root.job_extra_directives and slurm.root.log_directory and slurm.root.dashboard_address == ":0"
    k8s = ClusterConfig.from_file(DEPLOY / "k8s" / "cluster.yaml")
    assert k8s.kind == "kubernetes"
    manifest = yaml.safe_load((DEPLOY / "k8s" / "daskcluster.yaml").read_text())
    assert manifest["apiVersion"] == "kubernetes.dask.org/v1" and manifest["kind"] == "DaskCluster"
    (worker,) = manifest["spec"]["worker"]["spec"]["containers"]
    assert worker["image"] == "geosweep:latest"
    assert worker["resources"]["requests"]["cpu"] == "1" and worker["resources"]["limits"]["cpu"] == "1"
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env["NUMBA_NUM_THREADS"] == "1" and env["PYTHONSAFEPATH"] == "1"
    assert WORKER_ENV.items() <= env.items()  # the pods' environment is the batch workers' one
    assert worker["args"][:6] == ["dask", "worker", "--nthreads", "2", "--resources", f"{SLICE_RESOURCE}=1"]
    with pytest.raises(ValueError, match="cors"):
        make_cluster("slurm", cors=4)
    with pytest.raises(ValueError, match="unknown cluster kind"):
        make_cluster("lsf")


def test_kubernetes_without_operator_client_says_what_to_install():
    try:
        import dask_kubernetes  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="pip install dask-kubernetes"):
            make_cluster("kubernetes", n_workers=1)
    else:
        pytest.skip("dask-kubernetes is installed; a real Kubernetes cluster would be needed")


SITE_JOBQUEUE = """
jobqueue:
  slurm:
    queue: site-partition
    account: site-account
    cores: 6
    memory: 12GiB
    python: /site/envs/geosweep/bin/python
    job-script-prologue: ["module load site-python/3.11"]
    job-extra-directives: ["--constraint=site"]
"""


@pytest.fixture
def site_jobqueue(tmp_path):
    """A site's dask jobqueue.yaml in a config directory (as $DASK_CONFIG names one), loaded by refresh."""
    import dask.config

    site = tmp_path / "site-dask"
    site.mkdir()
    (site / "jobqueue.yaml").write_text(SITE_JOBQUEUE)
    dask.config.refresh(paths=[*dask.config.paths, str(site)])
    try:
        yield site
    finally:
        dask.config.refresh()


def _slurm_script(path: Path) -> str:
    cfg = ClusterConfig.from_file(path)
    c = make_cluster(cfg.kind, **(cfg.options | {"dashboard_address": ":0"}))
    try:
        return c.job_script()
    finally:
        c.close()


def test_cluster_file_overrides_only_what_it_sets_of_the_site_jobqueue_yaml(site_jobqueue, tmp_path):
    project = tmp_path / "cluster.toml"
    project.write_text('kind = "slurm"\nqueue = "compute"\nwalltime = "01:00:00"\nworker_lifetime = "55m"\n')
    lines = _slurm_script(project).splitlines()
    for line in (
        "#SBATCH -p compute",  # the cluster file's
        "#SBATCH -t 01:00:00",  # the cluster file's
        "#SBATCH -A site-account",  # the site's, kept
        "#SBATCH --cpus-per-task=6",
        "#SBATCH --mem=12G",
        "#SBATCH --constraint=site",
        "#SBATCH -J geosweep",  # neither sets it: geosweep's default
        "module load site-python/3.11",
    ):
        assert line in lines, line
    worker = lines[-1]
    assert worker.startswith("/site/envs/geosweep/bin/python -m distributed.cli.dask_worker"), worker
    assert "--nworkers 6" in worker and "--nthreads 1" in worker and "--memory-limit 2.00GiB" in worker
    assert "--lifetime 55m" in worker
    # the site's prologue runs first, then the workers' environment
    assert lines.index("module load site-python/3.11") < lines.index('export NUMBA_NUM_THREADS="1"')

    # keys the cluster file sets win, python and prologue included
    project.write_text(
        'kind = "slurm"\ncores = 2\nmemory = "4GiB"\npython = "python3.11"\n'
        'prologue = ["source $HOME/venvs/gs/bin/activate"]\n'
    )
    lines = _slurm_script(project).splitlines()
    assert "#SBATCH -p site-partition" in lines and "#SBATCH --cpus-per-task=2" in lines
    assert "source $HOME/venvs/gs/bin/activate" in lines and "module load site-python/3.11" not in lines
    assert lines[-1].startswith("python3.11 -m distributed.cli.dask_worker") and "--nworkers 2" in lines[-1]


def test_a_batch_jobs_worker_command_runs_one_slice_at_a_time_with_a_writer_thread(tmp_path, reference, dask_path):
    """The worker line of a Slurm job script, run here as the job would run it (its exports, then
    the command, in a job directory) against the cluster's own scheduler: its workers declare the slice
    resource, have a spare thread, keep the job's working directory off ``sys.path`` and run a sweep
    bitwise equal to the serial reference."""
    from distributed import Client

    cache = seeded_numba_cache(tmp_path / "nc")  # the job's own cache, holding the suite's compiled kernels
    c = make_cluster("slurm", cores=2, memory="4GiB", dashboard_address=":0", numba_cache_dir=cache)
    try:
        lines = c.job_script().splitlines()
        exports = [line for line in lines if line.startswith("export ") or line.startswith("mkdir ")]
        script = tmp_path / "job.sh"
        script.write_text("\n".join(["set -e", *exports, "exec " + lines[-1]]) + "\n")
        jobdir = tmp_path / "job"
        jobdir.mkdir()
        job = subprocess.Popen(["bash", str(script)], start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=jobdir)  # fmt: skip
        try:
            with Client(c) as client:
                client.wait_for_workers(2, timeout=60)
                workers = client.scheduler_info(n_workers=-1)["workers"].values()
                assert all(w["nthreads"] == 2 and w["resources"] == {SLICE_RESOURCE: 1} for w in workers)
                paths = client.run(lambda: (sys.flags.safe_path, os.getcwd(), list(sys.path)))
                assert all(safe and cwd == str(jobdir) and cwd not in path for safe, cwd, path in paths.values())
                result = run_sweep(SPEC, tmp_path / "batch.zarr", client=client)
                assert result.complete and result.ran == 4
        finally:
            os.killpg(job.pid, 15)
            job.wait(30)
    finally:
        c.close()
    assert_bitwise_equal(xr.open_zarr(tmp_path / "batch.zarr"), reference)


def test_example_batch_files_choose_the_workers_python_explicitly():
    """Without a site setting the workers run `python3` from the compute node's PATH (after the
    prologue), never the absolute path of the interpreter running geosweep."""
    for path in (DEPLOY / "slurm" / "cluster.toml", DEPLOY / "pbs" / "cluster.yaml"):
        cfg = ClusterConfig.from_file(path)
        assert cfg.root.python == "python3"
        c = make_cluster(cfg.kind, **(cfg.options | {"jobs": 0, "adapt_max_jobs": None, "dashboard_address": ":0"}))
        try:
            script = c.job_script()
        finally:
            c.close()
        assert script.splitlines()[-1].startswith("python3 -m distributed.cli.dask_worker"), path
        assert sys.executable not in script
    c = make_cluster("slurm", cores=2, memory="4GiB", dashboard_address=":0")  # nothing set: geosweep's default
    try:
        assert c.job_script().splitlines()[-1].startswith("python3 -m distributed.cli.dask_worker")
    finally:
        c.close()


def _dockerfile() -> tuple[str, list[tuple[str, str]]]:
    text = (DEPLOY / "Dockerfile").read_text()
    joined = text.replace("\\\n", " ")
    instructions = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            instructions.append((word.upper(), rest.strip()))
    return text, instructions


def test_dockerfile_builds_the_image_the_kubernetes_manifests_name():
    """deploy/Dockerfile (not built here: no Docker daemon on CI) against the manifests and the package."""
    import tomllib

    from geosweep.deploy.clusters import KubernetesOptions

    text, instructions = _dockerfile()
    assert "docker build -t geosweep:latest -f deploy/Dockerfile ." in text
    images = {KubernetesOptions().image, ClusterConfig.from_file(DEPLOY / "k8s" / "cluster.yaml").root.image}
    manifest = yaml.safe_load((DEPLOY / "k8s" / "daskcluster.yaml").read_text())
    for part in ("worker", "scheduler"):
        images |= {c["image"] for c in manifest["spec"][part]["spec"]["containers"]}
    assert images == {"geosweep:latest"}

    pyproject = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())
    (base,) = [rest for word, rest in instructions if word == "FROM"]
    version = tuple(int(x) for x in base.split(":")[1].split("-")[0].split(".")[:2])
    assert version >= tuple(int(x) for x in pyproject["project"]["requires-python"].lstrip(">=").split("."))
    copied = {src for word, rest in instructions if word == "COPY" for src in rest.split()[:-1]}
    packages = set(pyproject["tool"]["setuptools"]["package-dir"].values())  # geosweep and its mapped folders
    assert packages | {"pyproject.toml", "README.md"} <= copied
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert 'pip install ".[cluster]"' in runs and " -e " not in runs  # a package, not an editable checkout
    assert "load_builtins()" in runs and "warmup()" in runs  # kernels compiled into the image
    env = " ".join(rest for word, rest in instructions if word == "ENV")
    for key, value in WORKER_ENV.items():
        assert f"{key}={value}" in env
    assert "NUMBA_CACHE_DIR=/opt/geosweep/numba-cache" in env
    assert any(word == "USER" and rest != "root" for word, rest in instructions)
    # the operator's pods keep the image's Numba cache (no override in the manifest)
    (worker,) = manifest["spec"]["worker"]["spec"]["containers"]
    assert "NUMBA_CACHE_DIR" not in {e["name"] for e in worker["env"]}


def _ignore_rules(path: Path) -> list[tuple[re.Pattern, bool]]:
    """A .dockerignore file as Docker reads it: one pattern a line (``#`` lines and blank lines
    skipped, surrounding space trimmed, a leading ``/`` dropped), ``!`` re-includes; each pattern a
    regular expression over '/'-separated paths: ``**`` any number of directories (``**/`` also
    none), ``*`` and ``?`` within one name, ``[…]`` a class. Returns (pattern, excludes) in order."""
    rules = []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        excludes = not line.startswith("!")
        line = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        out, i = "", 0
        while i < len(line):
            ch = line[i]
            if line.startswith("**", i):
                i += 2
                if line.startswith("/", i):
                    i += 1
                    out += "(.*/)?"
                else:
                    out += ".*"
                continue
            if ch == "*":
                out += "[^/]*"
            elif ch == "?":
                out += "[^/]"
            elif ch == "[":
                j = line.index("]", i)
                out += line[i : j + 1]
                i = j
            elif ch == "\\" and i + 1 < len(line):
                i += 1
                out += re.escape(line[i])
            else:
                out += re.escape(ch)
            i += 1
        rules.append((re.compile(out), excludes))
    return rules


def _ignored(rules: list[tuple[re.Pattern, bool]], rel: str) -> bool:
    """Docker's rule: a pattern matches a path or any of its parent directories; the last pattern
    that matches decides."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern, excludes in rules:
        if any(pattern.fullmatch(p) for p in prefixes):
            ignored = excludes
    return ignored


def _build_context(root: Path, rules: list[tuple[re.Pattern, bool]]) -> set[str]:
    """The files of the build context ``root`` that the rules keep ('/'-separated, relative). An
    excluded directory is entered only when a re-including pattern could reach below it."""
    reinclude = [p.pattern for p, excludes in rules if not excludes]
    kept = set()
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath).relative_to(root).as_posix()
        base = "" if base == "." else base + "/"
        dirnames[:] = [
            d for d in dirnames if not _ignored(rules, base + d) or any(_may_hold(r, base + d) for r in reinclude)
        ]
        kept |= {base + f for f in filenames if not _ignored(rules, base + f)}
    return kept


def _may_hold(pattern: str, directory: str) -> bool:
    """Whether a re-including regular expression could match a path below ``directory``: its
    literal start (up to the first special character) and the directory agree as far as both go."""
    literal = re.match(r"(?:[^\\.*?()\[\]|+^$]|\\.)*", pattern).group(0).replace("\\", "")
    return literal.startswith(directory + "/") or (directory + "/").startswith(literal)


def _copy_sources(instructions: list[tuple[str, str]]) -> list[str]:
    return [src for word, rest in instructions if word == "COPY" for src in rest.split()[:-1]]


def test_every_copy_source_of_the_dockerfile_is_in_its_filtered_build_context():
    """deploy/Dockerfile.dockerignore (the Dockerfile's own ignore file, used by BuildKit before the
    root's) applied to the repository as Docker applies it: each COPY source must be a file, or a
    directory with files, of what is left — `COPY geosweep geosweep` failed with `/geosweep: not
    found` when the file re-included only the other folders. Every package's modules get in (each
    `__init__.py` of [tool.setuptools] packages), no Numba cache or bytecode does."""
    import tomllib

    root = DEPLOY.parent
    rules = _ignore_rules(DEPLOY / "Dockerfile.dockerignore")
    kept = _build_context(root, rules)
    _, instructions = _dockerfile()
    sources = _copy_sources(instructions)
    missing = [s for s in sources if s not in kept and not any(k.startswith(s.rstrip("/") + "/") for k in kept)]
    assert not missing, f"COPY sources outside the build context of deploy/Dockerfile.dockerignore: {missing}"
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = setuptools["package-dir"]
    for package in setuptools["packages"]:
        mapped = max((p for p in dirs if package == p or package.startswith(p + ".")), key=len)
        folder = "/".join([dirs[mapped], *package[len(mapped) :].split(".")[1:]])
        assert f"{folder}/__init__.py" in kept, package
    assert any(k.startswith("sweeps/examples/") and k.endswith(".toml") for k in kept)  # package data
    assert not [k for k in kept if "__pycache__" in k or k.endswith((".nbi", ".nbc", ".pyc"))]
    assert not [k for k in kept if k.startswith((".venv/", ".git/", "tests/"))]


def test_the_dockerignore_reading_follows_docker():
    """The pattern semantics the test above relies on (Docker's documented examples): the last match
    wins, `!` re-includes, `**` spans directories (none too), a match on a directory covers its files."""
    rules = [(p, e) for p, e in _rules_of("**\n!keep/**\n**/*.tmp\n!keep/x.tmp\n*/temp*\n# c\n")]
    assert _ignored(rules, "top.py") and not _ignored(rules, "keep/a/b.py")
    assert _ignored(rules, "keep/a/b.tmp") and not _ignored(rules, "keep/x.tmp")
    assert _ignored(rules, "keep/temporary.txt") and not _ignored(rules, "keep/a/temporary.txt")
    rules = _rules_of("**/__pycache__\n/docs\n")
    assert _ignored(rules, "__pycache__/m.pyc") and _ignored(rules, "a/b/__pycache__/m.pyc")
    assert _ignored(rules, "docs/x.md") and not _ignored(rules, "a/docs/x.md")


def _rules_of(text: str) -> list[tuple[re.Pattern, bool]]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "ignore"
        f.write_text(text)
        return _ignore_rules(f)


def _docker_engine() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _docker_engine(), reason="no Docker engine answers `docker info`")
def test_the_image_builds_and_imports_geosweep():
    """The README's build command, for real (BuildKit: the Dockerfile's own ignore file), then the
    installed package in the image: its kernels load from the image's warm Numba cache."""
    root = DEPLOY.parent
    tag = "geosweep:test-build"
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    cmd = ["docker", "build", "-t", tag, "-f", "deploy/Dockerfile", "."]
    build = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    try:
        code = "import geosweep.kernels.registry as r; r.load_builtins(); print(sorted(r.FAMILIES))"
        out = subprocess.run(["docker", "run", "--rm", tag, "python", "-c", code], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "dg" in out.stdout and "s2" in out.stdout
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def test_local_cluster_workers_run_one_slice_at_a_time(cluster):
    """Single-threaded kernels (NUMBA_NUM_THREADS=1), one slice per worker (the resource), a spare
    thread for shard writers."""
    _, client = cluster
    workers = client.scheduler_info(n_workers=-1)["workers"]
    assert len(workers) == 2 and all(w["nthreads"] == 2 for w in workers.values())
    assert all(w["resources"] == {SLICE_RESOURCE: 1} for w in workers.values())
    assert set(client.run(_numba_threads_env).values()) == {"1"}


# ---------------------------------------------------------------------------------------
# (c) the nightly schedule
# ---------------------------------------------------------------------------------------
def test_nightly_deployment_has_cron_schedule_and_dated_stores(tmp_path):
    from geosweep.flows.deployments import dated_store, nightly_deployment

    dep = nightly_deployment(SPEC, str(tmp_path / "nightly"), n_workers=2)
    assert dep.name == "nightly-deploy-springs"
    (sched,) = dep.schedules
    assert sched.schedule.cron == "0 2 * * *" and sched.schedule.timezone == "UTC"
    assert dep.parameters["store_root"] == str(tmp_path / "nightly") and dep.parameters["n_workers"] == 2
    assert dep.entrypoint.endswith("flows/deployments.py:nightly_flow")
    other = nightly_deployment(SPEC, "s3://bucket/runs/", cron="30 3 * * 1-5", timezone="Europe/Berlin", name="x")
    assert other.schedules[0].schedule.cron == "30 3 * * 1-5" and other.name == "x"

    day = dt.date(2026, 3, 9)
    assert dated_store("s3://bucket/runs/", "demo", day) == "s3://bucket/runs/demo/2026-03-09.zarr"
    assert dated_store(tmp_path, "demo", "2026-03-09") == str(tmp_path / "demo" / "2026-03-09.zarr")
    today = dt.datetime.now(dt.UTC).date().isoformat()
    assert dated_store("gs://b", "demo") == f"gs://b/demo/{today}.zarr"


def test_nightly_flow_writes_and_resumes_todays_store(prefect_server, cluster, tmp_path, dask_path):
    from geosweep.flows.deployments import nightly_flow

    lc, _ = cluster
    root = tmp_path / "nightly"
    out = nightly_flow(SPEC, str(root), address=lc.scheduler_address, slice_seconds=0.01)
    day = dt.datetime.now(dt.UTC).date()  # the flow ran moments ago; guard a midnight crossing below
    store = Path(out["store"])
    assert store.parent == root / "deploy-springs" and store.name in {f"{day}.zarr", f"{day - dt.timedelta(1)}.zarr"}
    assert out["ran"] == 4 and not out["errors"] and "cells complete: 4/4" in out["summary"]
    assert int(xr.open_zarr(store)["done"].sum()) == 4
    again = nightly_flow(SPEC, str(root), address=lc.scheduler_address, day=store.stem)
    assert again["store"] == str(store) and again["ran"] == 0 and again["skipped"] == 4


# ---------------------------------------------------------------------------------------
# (d) the CLI against the S3 endpoint
# ---------------------------------------------------------------------------------------
def _geosweep(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    exe = shutil.which("geosweep")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "geosweep.flows.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_cli_run_with_storage_options_and_cluster_file(s3, prefect_server, cluster, reference, tmp_path, dask_path):
    lc, _ = cluster
    spec = tmp_path / "springs.toml"
    spec.write_text(SPEC_TOML)
    local = tmp_path / "local.toml"
    local.write_text('kind = "local"\nn_workers = 1\n')
    url = f"s3://{BUCKET}/cli.zarr"
    so = json.dumps(s3)

    p = _geosweep(
        "run", str(spec), "--store", url, "--storage-options", so, "--address", lc.scheduler_address, "--no-prefect"
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "0/4 cells already complete, 4 to run" in p.stderr
    assert "storage_options=STORAGE_OPTIONS" in p.stdout and "testing" not in p.stdout  # no secrets printed
    assert_bitwise_equal(xr.open_zarr(url, storage_options=s3), reference)

    # the default path (the Prefect flow, on the test server) on a cluster file resumes the S3 store: it is
    # complete, so no cluster starts (every choice is made on the cells still to run: none)
    p = _geosweep(
        "run", str(spec), "--store", url, "--storage-options", so, "--cluster", str(local),
        env={"PREFECT_API_URL": prefect_server},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "starting local cluster" not in p.stderr and "cells complete: 4/4" in p.stdout, p.stderr[-3000:]
    assert "distributed." not in p.stderr and "\r" not in p.stderr  # no Dask INFO, no bar in a log file

    p = _geosweep("status", url, "--storage-options", so)
    assert p.returncode == 0 and "cells complete: 4/4" in p.stdout, p.stderr[-3000:]
    # a command that hangs on the endpoint fails by its subprocess timeout (_geosweep), not by a wall-clock
    # bound over the three, which a busy CI machine crossed (62.6 s of 60 at load ~5)

    # the report of a URL store goes beside it, into the bucket
    p = _geosweep("report", url, "--storage-options", so)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"report: {url}.report/index.md" in p.stdout
    fs = s3fs.S3FileSystem(**s3)
    assert fs.exists(f"{BUCKET}/cli.zarr.report/index.md") and fs.exists(f"{BUCKET}/cli.zarr.report/status_map.png")
    assert not (tmp_path / "report").exists() and not Path("report").exists()


def test_cli_missing_bucket_and_unreachable_endpoint_are_one_line(s3, tmp_path):
    spec = tmp_path / "springs.toml"
    spec.write_text(SPEC_TOML)
    so = json.dumps(s3)
    store = "s3://no-such-bucket/x.zarr"
    for cmd in (["run", str(spec), "--no-prefect", "--store", store], ["status", store], ["report", store]):
        p = _geosweep(*cmd, "--storage-options", so)
        assert p.returncode == 2, p.stderr[-3000:]
        assert p.stderr.strip().splitlines()[-1] == (
            f"geosweep: bucket 'no-such-bucket' does not exist at {s3['client_kwargs']['endpoint_url']}, "
            "or these credentials cannot see it"
        )
        assert "Traceback" not in p.stderr
    closed = json.dumps({**s3, "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{_free_port()}"}})
    t0 = time.perf_counter()
    p = _geosweep("run", str(spec), "--store", f"s3://{BUCKET}/x.zarr", "--storage-options", closed, "--serial")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
    (line,) = p.stderr.strip().splitlines()
    assert line.startswith("geosweep: cannot reach the store's endpoint http://127.0.0.1:") and "refused" in line
    assert time.perf_counter() - t0 < 30


def test_cli_refuses_bad_options_with_exit_2(tmp_path):
    spec = tmp_path / "springs.toml"
    spec.write_text(SPEC_TOML)
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "slurm"\ncors = 4\n')
    p = _geosweep("run", str(spec), "--storage-options", "{not json", "--serial")
    assert p.returncode == 2 and "--storage-options" in p.stderr
    p = _geosweep("run", str(spec), "--cluster", str(bad), "--serial")
    assert p.returncode == 2 and "--cluster cannot be combined" in p.stderr
    p = _geosweep("run", str(spec), "--cluster", str(bad), "--store", str(tmp_path / "x.zarr"))
    assert p.returncode == 2 and "cors" in p.stderr and not (tmp_path / "x.zarr").exists()

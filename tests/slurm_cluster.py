"""A real Slurm on this machine for the tests: ``munged``, ``slurmctld`` and ``slurmd`` (Debian's
``slurm-wlm`` 22.05 and ``munge``), one node on loopback, configured in a temporary directory.

:func:`slurm` is a session fixture, used only when asked (``GEOSWEEP_TEST_SLURM=1``; .ci/run sets it):
it installs the packages when they are missing and the tests run as root (``apt-get install -y slurm-wlm
munge``), otherwise the tests that use it are skipped with the reason. It sets ``SLURM_CONF`` for this
process and its children (``sbatch``, ``squeue``, ``scancel`` of dask-jobqueue and geosweep) and stops
the daemons at the end.

:func:`slurm_user` runs a driver, and so its jobs, as a non-root user (``geosweep-test``, created when
the tests run as root). When the test interpreter lives in a directory that user cannot enter (pyenv in
``/root``, mode 700), ``slurmd`` and that user's driver run in a mount namespace of their own in which
``/root`` is an empty tmpfs holding only the interpreter's tree (bind-mounted): the host's ``/root`` is
not touched."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from geosweep import config

PACKAGES = ("slurm-wlm", "munge")
#: the non-root user of :func:`slurm_user`
TEST_USER = "geosweep-test"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")
#: memory (MB) the node offers to jobs: a few GiB, whatever the machine has
NODE_MEMORY_MB = 6000


@dataclass
class Slurm:
    """A running single-node Slurm: its configuration, partition and directories."""

    conf: Path
    root: Path
    partition: str
    node: str
    cpus: int

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def squeue(self) -> list[dict[str, str]]:
        """The jobs in the queue: id, name, state, reason."""
        out = _run(["squeue", "-h", "-o", "%i|%j|%T|%r"], self.env()).stdout
        return [dict(zip(("id", "name", "state", "reason"), line.split("|"))) for line in out.splitlines() if line]

    def cancel_all(self) -> None:
        _run(["scancel", "--full", "-u", "root"], self.env(), check=False)
        for _ in range(100):
            if not self.squeue():
                return
            time.sleep(0.2)


def _run(cmd: list[str], env: dict | None = None, check: bool = True, timeout: float = 60):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=check, timeout=timeout)


def opted_out() -> str | None:
    """Why the Slurm tests are skipped when they were not asked for (``GEOSWEEP_TEST_SLURM=1``), else None:
    without it the suite installs nothing, starts no daemon and adds no user on the machine."""
    if config.TEST_SLURM.get():
        return None
    return f"the real Slurm's tests install and start Slurm on this machine: set {config.TEST_SLURM.name}=1 to run them"


def _missing() -> list[str]:
    return [d for d in DAEMONS if shutil.which(d) is None and not Path("/usr/sbin", d).exists()]


def _install() -> str | None:
    """Install slurm-wlm and munge with apt-get; None when installed, else why not."""
    if not _missing():
        return None
    if os.geteuid() != 0:
        return f"Slurm is not installed ({', '.join(_missing())} missing) and the tests do not run as root"
    if shutil.which("apt-get") is None:
        return "Slurm is not installed and there is no apt-get to install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    p = subprocess.run(["apt-get", "install", "-y", *PACKAGES], env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        return f"apt-get install {' '.join(PACKAGES)} failed: {p.stderr.strip()[-300:]}"
    return None if not _missing() else f"still missing after apt-get: {', '.join(_missing())}"


#: Slurm's Torque/PBS compatibility commands (``qsub``, ``qdel``, ``qstat``, ``pbsnodes`` as Perl wrappers)
TORQUE_WRAPPERS = "slurm-wlm-torque"


def is_torque_wrapper(command: str) -> bool:
    """Whether ``command`` on PATH is one of Slurm's Torque compatibility wrappers (not a PBS)."""
    path = shutil.which(command)
    if path is None:
        return False
    with open(path, "rb") as f:
        head = f.read(600)
    return head.startswith(b"#!") and b"SchedMD" in head


def install_torque_wrappers() -> str | None:
    """Install :data:`TORQUE_WRAPPERS` with apt-get when ``qsub`` is missing; None when the wrappers are
    there, else why not (a real PBS's ``qsub`` already installed, not root, no apt-get, apt failed)."""
    if shutil.which("qsub") is not None:
        return None if is_torque_wrapper("qsub") else "qsub is a real PBS's, not Slurm's Torque wrapper"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{TORQUE_WRAPPERS} is not installed and cannot be (not root or no apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    p = subprocess.run(
        ["apt-get", "install", "-y", TORQUE_WRAPPERS], env=env, capture_output=True, text=True, timeout=900
    )
    if p.returncode != 0:
        return f"apt-get install {TORQUE_WRAPPERS} failed: {p.stderr.strip()[-300:]}"
    return None if is_torque_wrapper("qsub") else f"no qsub after apt-get install {TORQUE_WRAPPERS}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_line(memory_mb: int) -> tuple[str, int]:
    """The ``NodeName`` line of this machine (``slurmd -C``), with less memory than it has."""
    line = _run(["slurmd", "-C"]).stdout.splitlines()[0]
    fields = dict(f.split("=", 1) for f in line.split())
    fields["RealMemory"] = str(min(memory_mb, int(fields["RealMemory"]) - 512))
    fields["NodeAddr"] = "127.0.0.1"
    return " ".join(f"{k}={v}" for k, v in fields.items()), int(fields["CPUs"])


def write_config(root: Path) -> tuple[Path, str, int]:
    """slurm.conf (and an empty cgroup.conf) in ``root``: (path, node name, cpus)."""
    for d in ("state", "spool", "log"):
        (root / d).mkdir(parents=True, exist_ok=True)
    node_line, cpus = _node_line(NODE_MEMORY_MB)
    node = node_line.split()[0].split("=", 1)[1]
    conf = root / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=geosweep-test",
                f"SlurmctldHost={node}(127.0.0.1)",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={root / 'munge.socket'}",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={root / 'state'}",
                f"SlurmdSpoolDir={root / 'spool'}",
                f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                f"SlurmdPidFile={root / 'slurmd.pid'}",
                f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "MpiDefault=none",
                "SchedulerType=sched/backfill",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory",
                "ReturnToService=2",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "KillWait=5",
                "MinJobAge=30",
                "SchedulerParameters=sched_interval=2",
                "SlurmctldParameters=enable_configless",
                f"{node_line} State=UNKNOWN",
                f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    (root / "cgroup.conf").write_text("")
    return conf, node, cpus


def _wait_node_idle(env: dict, node: str, seconds: float = 60) -> str:
    t0 = time.monotonic()
    state = ""
    while time.monotonic() - t0 < seconds:
        p = _run(["sinfo", "-h", "-n", node, "-o", "%T"], env, check=False)
        state = p.stdout.strip()
        if state in ("idle", "mixed", "allocated"):
            return state
        time.sleep(0.5)
    return state or "no answer"


def start(root: Path) -> tuple[Slurm, list[subprocess.Popen]]:
    """Start munged, slurmctld and slurmd with a configuration in ``root``."""
    conf, node, cpus = write_config(root)
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen] = []
    log = open(root / "log" / "daemons.log", "w")

    def daemon(cmd: list[str]) -> None:
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    daemon(
        [
            "munged", "-F", "--force", f"--socket={root / 'munge.socket'}", f"--pid-file={root / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={root / 'munged.seed'}",
        ]
    )  # fmt: skip
    for _ in range(100):
        if (root / "munge.socket").exists():
            break
        time.sleep(0.1)
    daemon(["slurmctld", "-D", "-i", "-f", str(conf)])
    time.sleep(1.0)
    daemon([*_in_namespace(root), "slurmd", "-D", "-f", str(conf), "-N", node])  # user jobs reach the interpreter
    return Slurm(conf=conf, root=root, partition="debug", node=node, cpus=cpus), procs


def _hidden_tree() -> Path | None:
    """The directory under ``/root`` holding the test interpreter (e.g. ``/root/.pyenv``) when ``/root``
    is closed to other users, else None (nothing to hide or show)."""
    exe = Path(sys.executable).resolve()
    if os.geteuid() != 0 or Path("/root") not in exe.parents or os.stat("/root").st_mode & 0o001:
        return None
    return Path("/root", exe.relative_to("/root").parts[0])


def _in_namespace(root: Path, user: str | None = None) -> list[str]:
    """Command prefix: a private mount namespace whose ``/root`` is a tmpfs holding only the interpreter's
    tree (:func:`_hidden_tree`), then (``user``) the command as that user, environment kept. No prefix when
    the interpreter is reachable anyway."""
    tree = _hidden_tree()
    if tree is None:
        return ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--"] if user else []
    stage = root / "stage"
    stage.mkdir(exist_ok=True)
    script = (
        f"set -e; mount --bind '{tree}' '{stage}'; mount -t tmpfs -o mode=755 tmpfs /root; "
        f"mkdir -p '{tree}'; mount --bind '{stage}' '{tree}'; exec \"$@\""
    )
    run_as = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--"] if user else []
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *run_as]


@dataclass
class SlurmUser:
    """A non-root user for drivers and jobs: ``command`` wraps a command to run as that user, ``work``
    is a directory of the user's (spec, store, job logs, a copy of the Numba cache)."""

    name: str
    uid: int
    work: Path
    prefix: list[str]

    def command(self, cmd: list[str]) -> list[str]:
        return [*self.prefix, *cmd]

    def env(self, slurm: Slurm) -> dict[str, str]:
        home = pwd.getpwnam(self.name).pw_dir
        return {**slurm.env(), "HOME": home, "USER": self.name, "LOGNAME": self.name,
                "NUMBA_CACHE_DIR": str(self.work / "numba")}  # fmt: skip


def _make_user() -> str | None:
    """Create :data:`TEST_USER` (as root) when missing; None when it exists, else why not."""
    try:
        pwd.getpwnam(TEST_USER)
        return None
    except KeyError:
        pass
    if os.geteuid() != 0:
        return f"the tests do not run as root: no user {TEST_USER} can be created"
    p = subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", TEST_USER], capture_output=True, text=True)
    return None if p.returncode == 0 else f"useradd {TEST_USER} failed: {p.stderr.strip()[-300:]}"


@pytest.fixture(scope="session")
def slurm_user(slurm):
    """A non-root user whose drivers submit the jobs (:class:`SlurmUser`), or the test is skipped with the
    reason. Already running as non-root: that user."""
    if os.geteuid() != 0:
        me = pwd.getpwuid(os.geteuid()).pw_name
        work = Path(tempfile.mkdtemp(prefix="geosweep-user-"))
        yield SlurmUser(me, os.geteuid(), work, [])
        shutil.rmtree(work, ignore_errors=True)
        return
    reason = _make_user()
    if reason:
        pytest.skip(reason)
    entry = pwd.getpwnam(TEST_USER)
    work = Path(tempfile.mkdtemp(prefix="geosweep-user-"))
    cache = os.environ.get("NUMBA_CACHE_DIR")
    if cache and Path(cache).is_dir():  # the warm cache, as the user's own (no compile in every test)
        shutil.copytree(cache, work / "numba", symlinks=True)
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(work)], check=True)
    user = SlurmUser(TEST_USER, entry.pw_uid, work, _in_namespace(slurm.root, TEST_USER))
    probe = subprocess.run(
        user.command([sys.executable, "-c", "import distributed, geosweep.flows"]),
        env=user.env(slurm), capture_output=True, text=True, cwd=work, timeout=120,
    )  # fmt: skip
    try:
        if probe.returncode != 0:
            pytest.skip(f"the test interpreter does not run as {TEST_USER}: {probe.stderr.strip()[-300:]}")
        yield user
    finally:
        _run(["scancel", "--full", "-u", TEST_USER], slurm.env(), check=False)
        shutil.rmtree(work, ignore_errors=True)


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running one-node Slurm (see the module docstring), or the tests are skipped with the reason."""
    reason = opted_out() or _install()
    if reason:
        pytest.skip(reason)
    # the configuration and munge's socket readable by the non-root user of slurm_user (pytest's own
    # temporary directories are closed to other users)
    root = Path(tempfile.mkdtemp(prefix="geosweep-slurm-"))
    root.chmod(0o755)
    cluster, procs = start(root)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        state = _wait_node_idle(cluster.env(), cluster.node)
        if state not in ("idle", "mixed", "allocated"):
            logs = "".join(
                (root / "log" / f).read_text()[-1500:]
                for f in ("slurmctld.log", "slurmd.log")
                if (root / "log" / f).exists()
            )
            pytest.skip(f"the test Slurm's node did not come up ({state}): {logs}")
        yield cluster
    finally:
        try:
            cluster.cancel_all()
        finally:
            stop(procs)
            shutil.rmtree(root, ignore_errors=True)
            if previous is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = previous

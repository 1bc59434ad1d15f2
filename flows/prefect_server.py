"""Prefect's temporary API server, started before this process imports Prefect (:func:`start_prefect_server`):
it boots on the other core while a spec's kernels compile (:mod:`geosweep.flows.firstrun`)."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

from geosweep import config
from geosweep.flows.child_process import DETACHED, SAFE_PATH
from geosweep.flows.output import LOG

#: how long the early start of Prefect's temporary server may take while kernels compile (Prefect's own
#: default, 20 s, is too short on 2 busy cores: the flow would then start a second server)
SERVER_START_TIMEOUT = 120


def _api_url_configured() -> bool | None:
    """Whether Prefect will find an API URL (``PREFECT_API_URL`` or the active profile's), read
    without importing Prefect (≈ 3 s); None when a settings source this does not read is present
    (``prefect.toml``, ``[tool.prefect]`` in ``pyproject.toml`` or ``.env`` here)."""
    if config.environ("PREFECT_API_URL"):
        return True
    cwd = Path.cwd()
    if (cwd / "prefect.toml").exists() or (cwd / ".env").exists():
        return None
    try:
        if "[tool.prefect" in (cwd / "pyproject.toml").read_text(errors="replace"):
            return None
    except OSError:
        pass
    home = Path(config.environ("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(config.environ("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return None
    active = config.environ("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    profile = data.get("profiles", {}).get(active, {})
    return bool(profile.get("PREFECT_API_URL")) if isinstance(profile, dict) else None


class _TemporaryServer(threading.Thread):
    """Prefect's temporary API server (the process Prefect itself would start for a flow without
    ``PREFECT_API_URL``), started at once, before this process imports Prefect: it boots on the
    other core meanwhile. ``PREFECT_API_URL`` then points at it; :meth:`join` waits until it
    answers; it is stopped when this process exits."""

    def __init__(self) -> None:
        super().__init__(name="geosweep-prefect-start", daemon=True)
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log: Path | None = None
        self._reported = False
        self._spawn()
        config.put("PREFECT_API_URL", f"{self.url}/api", replace=True)
        config.put("PREFECT_UI_URL")  # no UI on this server: no "View at" link to nowhere
        atexit.register(self.stop)
        self.start()

    def _spawn(self) -> None:
        import importlib.util

        spec = importlib.util.find_spec("prefect")
        app_dir = Path(spec.origin).parent.parent if spec and spec.origin else Path.cwd()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        served = config.values("PREFECT_UI_ENABLED", "PREFECT__SERVER_EPHEMERAL", "PREFECT__SERVER_FINAL")
        env = {**os.environ, **served}
        env.pop("PREFECT_API_URL", None)
        cmd = [sys.executable, *SAFE_PATH, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
               "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port),
               "--log-level", "error", "--lifespan", "on"]  # fmt: skip
        # its own session: a terminal's Ctrl-C reaches only geosweep, which stops the server itself. Its
        # output goes to a file, shown only if it dies: the server logs the sqlite retries of its own
        # event consumer ("database is locked" while another run uses the same Prefect database) as
        # tracebacks, which are not the run's errors
        fd, name = tempfile.mkstemp(prefix="geosweep-prefect-server-", suffix=".log")
        self.log = Path(name)
        with os.fdopen(fd, "wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, **DETACHED)
        LOG.debug(f"Prefect temporary server starting on {self.url}, its log in {self.log}")

    def _report_death(self) -> None:
        """Name the server's exit and the end of its log (a server that died is the flow's error)."""
        proc = self.proc
        if proc is None or proc.poll() is None or self.log is None or self._reported:
            return
        self._reported = True
        tail = self.log.read_text(errors="replace").strip().splitlines()[-20:] if self.log.exists() else []
        LOG.warning(f"Prefect's temporary server exited ({proc.returncode}); its log ({self.log}) ends:\n"
                    + "\n".join(tail))  # fmt: skip

    def run(self) -> None:
        import urllib.request

        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.url}/api/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self._report_death()
        LOG.debug("Prefect temporary server did not answer; the flow reports it")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif proc is not None:
            self.proc = proc
            self._report_death()
            self.proc = None
        if self.log is not None and not self._reported:  # kept when it died: the warning names it
            self.log.unlink(missing_ok=True)


def start_prefect_server() -> threading.Thread | None:
    """Start Prefect's temporary server when no ``PREFECT_API_URL`` is set (else None); join the
    returned thread (it waits until the server answers) before calling a flow.

    Read without importing Prefect whenever possible (:func:`_api_url_configured`): the server
    process then starts at once. Otherwise Prefect's own start runs in the thread.
    """
    configured = _api_url_configured()
    if configured:
        return None
    if configured is False:
        return _TemporaryServer()
    from geosweep.flows.deployments import prefect_api_url

    if prefect_api_url() is not None:
        return None

    def start() -> None:
        try:
            from prefect.client.orchestration import get_client
            from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

            timeout = max(SERVER_START_TIMEOUT, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
            with temporary_settings({PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: timeout}):
                with get_client(sync_client=True) as client:
                    client.api_healthcheck()
        except Exception as e:  # noqa: BLE001 - the flow starts (and reports) the server itself then
            LOG.debug(f"early Prefect server start failed: {e}")

    # not a daemon: a run refused meanwhile (bad cluster file …) waits for the start to end instead of
    # killing the thread inside an extension module at exit (an abort), and Prefect then stops the server
    thread = threading.Thread(target=start, name="geosweep-prefect-start", daemon=False)
    thread.start()
    return thread

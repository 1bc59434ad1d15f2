"""Storage options by reference: credentials reach the store but never Prefect's database
(real moto S3 endpoint, real Prefect test server, real zarr stores)."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
import xarray as xr

from geosweep.flows.cli import build_parser, main
from geosweep.sweeps.credentials import (
    REDACTED,
    StorageOptions,
    StorageOptionsError,
    deployment_parameter,
    redact,
    resolve,
)
from geosweep.sweeps.execution import Execution

moto_server = pytest.importorskip("moto.server")

SECRET = "S3cr3t-value-4711"
KEY_ID = "AKIA-geosweep-test"
BUCKET = "creds"
SPEC = {
    "name": "creds",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01],
    "T": 0.2,
    "dt_out": 0.1,
}


def test_references_resolve_and_never_serialise_a_secret(tmp_path, monkeypatch):
    opts = {"key": KEY_ID, "secret": SECRET, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    monkeypatch.setenv("GEOSWEEP_TEST_SO", json.dumps(opts))
    (tmp_path / "so.json").write_text(json.dumps(opts))
    for text in ("env:GEOSWEEP_TEST_SO", f"@{tmp_path / 'so.json'}"):
        so = StorageOptions.of(text)
        assert so.options == opts and so.reference == text and resolve(text) == opts
        assert so.model_dump() == {"reference": text} and SECRET not in repr(so) + so.model_dump_json()
        assert deployment_parameter(so) == text
    assert resolve("profile:research") == {"profile": "research"}
    literal = StorageOptions.of(json.dumps(opts))
    assert literal.reference is None and literal.secrets == ["key", "secret"]
    dumped = literal.model_dump()
    assert dumped == {"key": REDACTED, "secret": REDACTED, "client_kwargs": {"endpoint_url": REDACTED}}
    assert SECRET not in literal.model_dump_json() and SECRET not in repr(literal)
    assert redact({"a": [{"aws_session_token": "t"}]}) == {"a": [{"aws_session_token": REDACTED}]}
    with pytest.raises(StorageOptionsError, match="credentials"):
        deployment_parameter(opts)  # a deployment stores its parameters: literal secrets refused
    assert deployment_parameter({"anon": True}) == {"anon": True}
    for bad, why in (("env:GEOSWEEP_UNSET_VAR", "not set"), (f"@{tmp_path / 'missing.json'}", "cannot read"),
                     ("[1, 2]", "JSON object"), ("{oops", "not valid JSON")):  # fmt: skip
        with pytest.raises(StorageOptionsError, match=why):
            StorageOptions.of(bad)
    args = build_parser().parse_args(["status", "s3://b/x.zarr", "--storage-options", "env:GEOSWEEP_TEST_SO"])
    assert args.storage_options.reference == "env:GEOSWEEP_TEST_SO"


def test_cli_refuses_an_unresolvable_reference_in_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["status", "s3://b/x.zarr", "--storage-options", "env:GEOSWEEP_UNSET_VAR"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--storage-options: env:GEOSWEEP_UNSET_VAR: the environment variable" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def s3():
    import boto3

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET, region_name="us-east-1"
    ).create_bucket(Bucket=BUCKET)
    try:
        yield {"key": KEY_ID, "secret": SECRET, "client_kwargs": {"endpoint_url": endpoint}}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def _stored_runs() -> str:
    """Every flow run and task run the Prefect server holds, as JSON text (parameters included)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        flows = client.read_flow_runs()
        tasks = client.read_task_runs()
        deployments = client.read_deployments()
    return "\n".join(r.model_dump_json() for r in [*flows, *tasks, *deployments])


def test_prefect_flow_runs_hold_no_credentials(s3, prefect_server, tmp_path, monkeypatch):
    """The CLI's path (a StorageOptions from literal JSON, passed in process) and a deployment's path
    (an ``env:`` reference resolved in the flow) both write the S3 store; neither flow run's stored
    parameters, nor any task run, holds the secret."""
    from geosweep.flows.deployments import nightly_deployment, nightly_flow
    from geosweep.flows.sweep_flow import sweep_flow
    from geosweep.sweeps.plan import make_plan

    monkeypatch.setenv("GEOSWEEP_TEST_S3", json.dumps(s3))
    url = f"s3://{BUCKET}/cli.zarr"
    out = sweep_flow(
        make_plan(SPEC), store=url, execution=Execution(n_workers=1), storage_options=StorageOptions.of(json.dumps(s3))
    )
    assert out["ran"] == 2
    root = f"s3://{BUCKET}/nightly"
    out = nightly_flow(SPEC, root, n_workers=1, storage_options="env:GEOSWEEP_TEST_S3", report=False)
    assert out["ran"] == 2
    stored = _stored_runs().replace(" ", "")
    assert '"reference":"env:GEOSWEEP_TEST_S3"' in stored  # the subflow keeps the reference
    assert '"secret":"***"' in stored and '"endpoint_url":"***"' in stored  # the CLI's literal options, redacted
    assert SECRET not in stored and KEY_ID not in stored
    ds = xr.open_zarr(url, storage_options=s3)
    assert int(ds["done"].sum()) == 2 and np.isfinite(ds["max_abs_energy_error"].values).all()

    dep = nightly_deployment(SPEC, f"s3://{BUCKET}/nightly", storage_options="env:GEOSWEEP_TEST_S3")
    assert dep.parameters["storage_options"] == "env:GEOSWEEP_TEST_S3"
    with pytest.raises(StorageOptionsError, match="credentials"):
        nightly_deployment(SPEC, f"s3://{BUCKET}/nightly", storage_options=s3)


HIDDEN = {"s3_additional_kwargs": {"SSECustomerKey": "c0ffee-customer-key-0815", "SSECustomerAlgorithm": "AES256"},
          "client_kwargs": {"endpoint_url": "http://alice:pw-alice-0815@127.0.0.1:9"}, "anon": False}  # fmt: skip


def test_no_value_of_literal_options_is_recorded():
    """Whether a value is a secret cannot be told from its name (SSECustomerKey, a URL's user:password@):
    every value of literal options but true/false/null is redacted, and a deployment refuses them."""
    so = StorageOptions.of(json.dumps(HIDDEN))
    text = so.model_dump_json() + repr(so)
    assert "c0ffee" not in text and "pw-alice" not in text and "AES256" not in text
    assert so.model_dump()["anon"] is False and so.model_dump()["client_kwargs"] == {"endpoint_url": REDACTED}
    with pytest.raises(StorageOptionsError, match="s3_additional_kwargs.SSECustomerKey"):
        deployment_parameter(HIDDEN)


def test_prefect_records_no_value_of_literal_options(prefect_server, tmp_path):
    """The CLI's Prefect path with literal options (a local store: the options travel as the flow's
    parameter but reach no filesystem): neither the customer key nor the URL's password is stored."""
    from geosweep.flows.sweep_flow import sweep_flow
    from geosweep.sweeps.plan import make_plan

    out = sweep_flow(make_plan(SPEC), store=str(tmp_path / "s.zarr"), execution=Execution(n_workers=1),
                     storage_options=StorageOptions.of(json.dumps(HIDDEN)))  # fmt: skip
    assert out["ran"] == 2
    stored = _stored_runs()
    assert "c0ffee-customer-key" not in stored and "pw-alice" not in stored


def test_credentials_of_an_endpoint_url_are_not_printed(tmp_path):
    """An unreachable endpoint is named in the error line without its ``user:password@``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    (tmp_path / "s.toml").write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in SPEC.items()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
    p = subprocess.run([sys.executable, "-m", "geosweep.flows.cli", "run", "s.toml", "--store", f"s3://{BUCKET}/x.zarr",
                        "--storage-options", json.dumps(HIDDEN), "--serial", "--no-prefect"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2, p.stderr[-3000:]
    assert "pw-alice" not in p.stderr + p.stdout and "c0ffee" not in p.stderr + p.stdout
    assert "http://***@127.0.0.1:9" in p.stderr and "Traceback" not in p.stderr


def test_a_store_url_with_credentials_is_refused(capsys):
    """``s3://user:password@bucket/…`` would be recorded by Prefect (the flow's store parameter) and
    printed on every line: refused in one line that does not echo the password."""
    code = main(["status", "s3://alice:pw-alice-0815@creds/x.zarr"])
    err = capsys.readouterr().err
    assert code == 2 and "pw-alice" not in err and "s3://***@creds/x.zarr" in err, err

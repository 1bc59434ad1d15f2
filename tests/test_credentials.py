"""Storage options by reference: credentials reach the store but never Prefect's database
(real moto S3 endpoint, real Prefect test server, real zarr stores)."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
import xarray as xr

from flows.cli import build_parser, main
from sweeps.credentials import REDACTED, StorageOptions, StorageOptionsError, deployment_parameter, redact, resolve

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
    assert dumped["secret"] == REDACTED and dumped["client_kwargs"] == opts["client_kwargs"]
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
    from flows.deployments import nightly_deployment, nightly_flow
    from flows.sweep_flow import sweep_flow
    from sweeps.plan import make_plan

    monkeypatch.setenv("GEOSWEEP_TEST_S3", json.dumps(s3))
    url = f"s3://{BUCKET}/cli.zarr"
    out = sweep_flow(make_plan(SPEC), store=url, n_workers=1, storage_options=StorageOptions.of(json.dumps(s3)))
    assert out["ran"] == 2
    root = f"s3://{BUCKET}/nightly"
    out = nightly_flow(SPEC, root, n_workers=1, storage_options="env:GEOSWEEP_TEST_S3", report=False)
    assert out["ran"] == 2
    stored = _stored_runs().replace(" ", "")
    assert '"reference":"env:GEOSWEEP_TEST_S3"' in stored  # the subflow keeps the reference
    assert '"secret":"***"' in stored and '"endpoint_url":"http' in stored  # the CLI's literal options, redacted
    assert SECRET not in stored and KEY_ID not in stored
    ds = xr.open_zarr(url, storage_options=s3)
    assert int(ds["done"].sum()) == 2 and np.isfinite(ds["max_abs_energy_error"].values).all()

    dep = nightly_deployment(SPEC, f"s3://{BUCKET}/nightly", storage_options="env:GEOSWEEP_TEST_S3")
    assert dep.parameters["storage_options"] == "env:GEOSWEEP_TEST_S3"
    with pytest.raises(StorageOptionsError, match="credentials"):
        nightly_deployment(SPEC, f"s3://{BUCKET}/nightly", storage_options=s3)

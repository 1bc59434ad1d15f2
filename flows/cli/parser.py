"""The ``geosweep`` argument parser: every command and its options, one function per command."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from geosweep.flows.cli.options import (
    _positive_int,
    _share,
    _storage_options,
    _version,
)
from geosweep.flows.output import LEVELS

#: adds one command (its name, ``add_parser``'s keywords) with the options every command shares
Command = Callable[..., argparse.ArgumentParser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geosweep")
    parser.add_argument("--version", action="version", version=f"geosweep {_version()}")
    common = _common_options()
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    for add in COMMANDS:
        add(command)
    # the description names every command, from the parser itself (one added later is listed too)
    parser.description = f"Distributed parameter sweeps of geometric integrators. Commands: {', '.join(sub.choices)}."
    return parser


def _common_options() -> argparse.ArgumentParser:
    """The options of every command: ``--quiet``, ``--log-level``, ``--import``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-q", "--quiet", action="store_true", help="print only warnings, errors and the result (no progress)"
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LEVELS,
        default="INFO",
        help="level of geosweep's and Prefect's messages (default INFO; Dask's stay at WARNING unless DEBUG)",
    )
    common.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import MODULE first (repeatable): your own systems, integrators or families (see flows/plugins.py); "
        "installed geosweep.plugins entry points are always loaded",
    )
    return common


def _add_store_options(p: argparse.ArgumentParser) -> None:
    """``--storage-options`` of a remote store."""
    p.add_argument(
        "--storage-options",
        type=_storage_options,
        metavar="JSON|env:NAME|@FILE|profile:NAME",
        help='fsspec options of a remote store: JSON, e.g. \'{"client_kwargs": {"endpoint_url": "https://…"}}\', '
        "or, for credentials, a reference: env:NAME (JSON in a variable), @FILE (a JSON file), profile:NAME",
    )


def _add_execution_options(p: argparse.ArgumentParser, workers_help: str) -> None:
    """Where cells run: workers, a scheduler or a cluster file, slices, the store's options."""
    p.add_argument("--workers", type=_positive_int, help=workers_help)
    p.add_argument("--address", help="address of an existing Dask scheduler (tcp://host:8786)")
    p.add_argument("--cluster", metavar="FILE", help="start the cluster described in FILE (deploy/clusters.py)")
    p.add_argument("--slice-seconds", type=float, default=10.0, help="target work per Dask task (s)")
    _add_store_options(p)


def _add_worker_kind(p: argparse.ArgumentParser, default: str) -> None:
    """``--processes`` or ``--threads``: the kind of local Dask workers."""
    kind = p.add_mutually_exclusive_group()
    kind.add_argument(
        "--processes",
        dest="processes",
        action="store_const",
        const=True,
        default=None,
        help=f"local Dask workers as processes (default: {default})",
    )
    kind.add_argument(
        "--threads",
        dest="processes",
        action="store_const",
        const=False,
        help="local Dask workers as threads in this process (the kernels release the GIL; the Python "
        "around each cell does not)",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of ``run`` and ``demo``."""
    p.add_argument("--store", help="zarr store path or URL (default: results/<name>.zarr)")
    _add_execution_options(
        p,
        "local Dask workers (default: all cores): processes for many sub-millisecond cells, else threads "
        "in this process (--processes, --threads choose)",
    )
    p.add_argument("--no-prefect", action="store_true", help="run on Dask without the Prefect flow")
    p.add_argument("--serial", action="store_true", help="run in this process, no Dask, no Prefect")
    _add_worker_kind(p, "processes for 20 000 or more cells estimated under 0.2 ms each, else threads")
    p.add_argument(
        "--threads-per-cell",
        type=_positive_int,
        metavar="N",
        help="threads inside one cell, same results on any count (default: 1, or cores/cells when "
        "fewer cells than cores are to run; the (S²)ⁿ potentials use them)",
    )


def _run(command: Command) -> None:
    """``geosweep run SPEC``."""
    p = command("run", help="run (or resume) a sweep spec")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    _add_run_options(p)
    p.add_argument(
        "--grow",
        action="store_true",
        help="grow the --store to this spec: values appended at the end of its sweep axes (only the new cells "
        "are computed; stored cells are kept as they are) and/or a larger T (finished cells continue, see extend)",
    )
    p.add_argument(
        "--recompute",
        action="store_true",
        help="with --grow and a larger T: every finished cell runs again from t = 0 (no kept carry is read)",
    )


def _extend(command: Command) -> None:
    """``geosweep extend STORE --T T``."""
    p = command(
        "extend",
        help="continue every finished cell of a store to a later final time T",
        description="Continue every finished cell of STORE from its kept final carry to the later T: bitwise "
        "the store computed to T from the start. Fixed-step cells change no stored sample; adaptive cells "
        "with dense output rewrite the rows inside their last step to the old T (always the row at the old "
        "T), which a run to the new T steps across and interpolates.",
    )
    p.add_argument("store")
    p.add_argument("--T", type=float, required=True, help="the new final time (a multiple of the store's dt_out)")
    p.add_argument(
        "--recompute",
        action="store_true",
        help="every finished cell runs again from t = 0, no kept carry read (else: cells without one are refused)",
    )
    _add_execution_options(p, "local Dask workers (default: all cores)")
    p.add_argument("--serial", action="store_true", help="run in this process, no Dask")
    _add_worker_kind(p, "threads")


def _demo(command: Command) -> None:
    """``geosweep demo``."""
    p = command("demo", help="run the built-in sphere MD demo sweep (≈ 13 s on 2 idle cores, ≈ 8 s more at first)")
    _add_run_options(p)


def _serve(command: Command) -> None:
    """``geosweep serve SPEC --store-root ROOT``."""
    p = command("serve", help="serve the nightly Prefect deployment of a spec (runs until stopped)")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    p.add_argument("--store-root", required=True, help="directory or URL; stores go to ROOT/<name>/<YYYY-MM-DD>.zarr")
    p.add_argument("--cron", default="0 2 * * *", help='cron schedule (default "0 2 * * *")')
    p.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (default UTC)")
    p.add_argument("--name", help="deployment name (default nightly-<spec name>)")
    p.add_argument(
        "--max-failed-share",
        type=_share,
        default=0.5,
        metavar="F",
        help="a night's flow run fails when more than this share of its cells failed (0–1, default 0.5)",
    )
    p.add_argument(
        "--compare-rtol",
        type=float,
        default=1e-6,
        metavar="R",
        help="relative change of a per-cell value that the comparison with the previous night lists (default 1e-6)",
    )
    p.add_argument(
        "--temporary",
        action="store_true",
        help="allow serving without PREFECT_API_URL, on a temporary Prefect server (the schedule dies with it)",
    )
    p.add_argument(
        "--heartbeat",
        type=int,
        default=60,
        metavar="S",
        help="seconds between the flow runs' heartbeats (≥ 30, default 60)",
    )
    p.add_argument(
        "--crash-after",
        type=float,
        metavar="S",
        help="a run that sends no heartbeat for S seconds (killed by walltime, scancel …) is marked Crashed "
        "by a server automation (default 2 heartbeats + 30 s)",
    )
    p.add_argument("--no-crash-detection", action="store_true", help="do not create the crash-detection automation")
    p.add_argument(
        "--extend-by",
        type=float,
        metavar="DT",
        help="grow one store, ROOT/<name>/extended.zarr, by DT each night (geosweep extend) instead of a dated store",
    )
    _add_execution_options(p, "local Dask worker threads of each run (default: all cores)")


def _validate(command: Command) -> None:
    """``geosweep validate SPEC``."""
    p = command("validate", help="check a spec and estimate its cost (cells, core-s, wall time, store); runs nothing")
    p.add_argument("spec")
    p.add_argument("--workers", type=int, help="local workers the wall-time estimate assumes (default: all cores)")
    p.add_argument("--no-prefect", action="store_true", help="estimate a run without the Prefect flow")
    p.add_argument("--slice-seconds", type=float, default=10.0, help="target work per Dask task (s), as for run")


def _status(command: Command) -> None:
    """``geosweep status STORE``."""
    p = command("status", help="completion and status of a store")
    p.add_argument("store")
    _add_store_options(p)


def _verify(command: Command) -> None:
    """``geosweep verify STORE``."""
    p = command("verify", help="check every finished cell of a store against its checksum")
    p.add_argument("store")
    p.add_argument("--repair", action="store_true", help="mark damaged cells so that the next run recomputes them")
    _add_store_options(p)


def _report(command: Command) -> None:
    """``geosweep report STORE``."""
    p = command("report", help="figures and an index (Markdown, HTML) of a store's results")
    p.add_argument("store")
    p.add_argument("--out", help="output directory or URL (default: <store>.report beside the store, URLs too)")
    p.add_argument(
        "--sel",
        action="append",
        metavar="NAME=VALUE",
        help="slice of the per-slice figures, e.g. --sel omega=3.25 (repeatable; default: the system's declared one)",
    )
    _add_store_options(p)


def _systems(command: Command) -> None:
    """``geosweep systems``."""
    command("systems", help="list systems, integrators and their parameters")


#: the commands in the order ``--help`` lists them
COMMANDS: tuple[Callable[[Command], None], ...] = (
    _run,
    _extend,
    _demo,
    _serve,
    _validate,
    _status,
    _verify,
    _report,
    _systems,
)

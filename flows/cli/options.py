"""The parser's option types and the version line: light (stdlib only), so that ``geosweep --help``,
``--version`` and ``geosweep CMD --help`` import no command (see :mod:`geosweep.flows.cli`)."""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("geosweep")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _storage_options(text: str):
    """``--storage-options``: a reference (``env:NAME``, ``@file.json``, ``profile:NAME``) or a JSON
    object of fsspec options (see :mod:`geosweep.sweeps.credentials`); resolved now, refused in one line."""
    from geosweep.sweeps.credentials import StorageOptions, StorageOptionsError

    try:
        return StorageOptions.of(text)
    except StorageOptionsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_int(text: str) -> int:
    """``--workers``: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value

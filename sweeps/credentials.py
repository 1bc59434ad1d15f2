"""Storage options by reference, so that credentials are never persisted.

``--storage-options`` (and every ``storage_options`` argument) takes fsspec options as

* ``env:NAME`` — a JSON object read from the environment variable ``NAME``,
* ``@path/to/options.json`` — a JSON object read from a file,
* ``profile:NAME`` — a named credentials profile (``~/.aws/credentials``): ``{"profile": NAME}``,
* a JSON object or a mapping (literal options).

:class:`StorageOptions` carries the resolved options together with the reference they came
from. Its JSON form (what Prefect records when it is a flow parameter) is the reference alone,
or — for literal options — the options with every value but true/false/null replaced by ``"***"``
(:func:`redact_values`: whether a value is a secret cannot be told from its name, e.g.
``s3_additional_kwargs.SSECustomerKey``, or an ``endpoint_url`` with ``user:password@``); the
resolved options exist only in memory (the flow's process and, pickled, its Dask tasks). A
deployment (whose parameters live in Prefect's database) accepts a reference or literal options
of true/false/null only (:func:`deployment_parameter`); its flow resolves the reference in the
process that runs it, from that process's environment and files. :func:`scrub` removes the
credentials of URLs (``scheme://user:password@host``) from a message.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, model_serializer

from geosweep import config

#: Largest options file read (bytes).
MAX_FILE_BYTES = 2**20
#: Option names whose values are secrets (compared in lower case; also any name containing
#: "secret", "password", "token" or "credential").
SECRET_KEYS = frozenset(
    {"key", "secret", "access_key", "secret_key", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
     "session_token", "client_secret", "account_key", "sas_token", "connection_string", "passwd", "private_key"}
)  # fmt: skip
_SECRET_PARTS = ("secret", "password", "token", "credential", "private_key", "customerkey", "customer_key", "apikey")
REDACTED = "***"
#: ``scheme://user:password@`` (or ``scheme://token@``): the credentials part of a URL.
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"]+@")


class StorageOptionsError(ValueError):
    """A storage-options reference that cannot be resolved (unset variable, unreadable file, not JSON)."""


def is_secret(name: str) -> bool:
    """True for an option name that holds a credential (``secret``, ``key``, ``token`` …)."""
    low = str(name).lower()
    return low in SECRET_KEYS or any(part in low for part in _SECRET_PARTS)


def redact(value: Any) -> Any:
    """A copy of ``value`` (nested mappings and lists) with every secret value replaced by ``"***"``."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret(k) and v is not None else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def redact_values(value: Any) -> Any:
    """A copy of ``value`` (nested mappings and lists) with every value but true/false/null replaced by
    ``"***"``: what literal storage options look like wherever they are recorded."""
    if isinstance(value, dict):
        return {k: redact_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v) for v in value]
    return value if value is None or isinstance(value, bool) else REDACTED


def recordable_names(value: Any, prefix: str = "") -> list[str]:
    """Dotted names of the entries of (nested) options that :func:`redact_values` would hide."""
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in recordable_names(v, f"{prefix}.{k}" if prefix else str(k))]
    if isinstance(value, list | tuple):
        return [n for i, v in enumerate(value) for n in recordable_names(v, f"{prefix}[{i}]")]
    return [] if value is None or isinstance(value, bool) else [prefix]


def scrub(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced (``s3://***@host``): safe to print."""
    return _URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def secret_names(value: Any, prefix: str = "") -> list[str]:
    """Dotted names of the secret entries of (nested) options."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            name = f"{prefix}.{k}" if prefix else str(k)
            if is_secret(k) and v is not None:
                out.append(name)
            else:
                out.extend(secret_names(v, name))
    return out


def _json_object(text: str, where: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise StorageOptionsError(f"{where} is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise StorageOptionsError(f'{where} must be a JSON object, e.g. {{"anon": false}}')
    return value


def is_reference(text: str) -> bool:
    """True for ``env:NAME``, ``@file`` and ``profile:NAME`` (not literal JSON)."""
    return text.startswith(("env:", "@", "profile:"))


def load(text: str) -> dict:
    """Resolve a reference (``env:NAME``, ``@file``, ``profile:NAME``) or parse literal JSON."""
    text = text.strip()
    if text.startswith("env:"):
        name = text[4:]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise StorageOptionsError(f"{text}: not an environment variable name")
        value = config.named(name)
        if value is None:
            raise StorageOptionsError(f"{text}: the environment variable {name} is not set in this process")
        return _json_object(value, f"environment variable {name}")
    if text.startswith("@"):
        path = os.path.expanduser(text[1:])
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            raise StorageOptionsError(f"cannot read {path}: {e.strerror or e}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise StorageOptionsError(f"{path} is larger than {MAX_FILE_BYTES // 1024} kB")
        try:
            return _json_object(raw.decode("utf-8"), path)
        except UnicodeDecodeError:
            raise StorageOptionsError(f"{path} is not UTF-8 text") from None
    if text.startswith("profile:"):
        name = text[8:]
        if not name:
            raise StorageOptionsError("profile: needs a profile name, e.g. profile:default")
        return {"profile": name}
    return _json_object(text, "the options")


class StorageOptions(BaseModel):
    """Resolved fsspec options and the reference they came from (None for literal options).

    Serialised (e.g. by Prefect, as a flow parameter) as ``{"reference": …}`` or as the redacted
    options: never with a secret value.
    """

    model_config = ConfigDict(frozen=True)

    options: dict[str, Any]
    reference: str | None = None

    @classmethod
    def of(cls, value: StorageOptions | dict | str | None) -> StorageOptions | None:
        """From a reference or JSON text, a mapping, or the JSON form this class serialises to."""
        if value is None or isinstance(value, StorageOptions):
            return value
        if isinstance(value, str):
            text = value.strip()
            return cls(options=load(text), reference=text if is_reference(text) else None)
        if isinstance(value, dict):
            if set(value) == {"reference"} and isinstance(value["reference"], str):
                return cls.of(value["reference"])
            if REDACTED in json.dumps(value):
                raise StorageOptionsError(
                    "these storage options hold redacted secrets (***): pass a reference instead (env:NAME, @file)"
                )
            return cls(options=dict(value))
        raise StorageOptionsError(f"storage options must be a mapping or a reference, not {type(value).__name__}")

    @property
    def secrets(self) -> list[str]:
        return secret_names(self.options)

    @model_serializer
    def _public(self) -> dict[str, Any]:
        return {"reference": self.reference} if self.reference else redact_values(self.options)

    def __repr__(self) -> str:
        return f"StorageOptions({self._public()!r})"

    __str__ = __repr__


def resolve(value: StorageOptions | dict | str | None) -> dict | None:
    """Plain fsspec options (a dict) from any accepted form, or None."""
    so = StorageOptions.of(value)
    return None if so is None else dict(so.options)


def deployment_parameter(value: StorageOptions | dict | str | None) -> str | dict | None:
    """What a deployment may store as its ``storage_options`` parameter: the reference, or literal
    options of true/false/null only. Any other literal value (it may be a credential) is refused
    (:class:`StorageOptionsError`)."""
    if isinstance(value, str) and is_reference(value.strip()):
        StorageOptions.of(value)  # resolvable here (a typo is refused now, not at 02:00)
        return value.strip()
    so = StorageOptions.of(value)
    if so is None:
        return None
    if so.reference:
        return so.reference
    if names := recordable_names(so.options):
        listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise StorageOptionsError(
            f"storage options hold values that may be credentials ({listed}): a deployment keeps its parameters "
            "in Prefect's database, so pass a reference instead (env:NAME, @path/to/options.json, profile:NAME)"
        )
    return dict(so.options)

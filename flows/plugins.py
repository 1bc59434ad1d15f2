"""Custom systems, integrators and families for every command: plugins and ``--import``.

A plugin is a module that registers on import (``register_system``, ``register_module``, …),
found in two ways:

* the entry-point group ``geosweep.plugins`` of any installed package, loaded at CLI start and
  in every nightly flow run::

      # the plugin package's pyproject.toml
      [project.entry-points."geosweep.plugins"]
      rotors = "my_package.rotors"            # a module (registers on import) or a callable

* ``--import MODULE`` (repeatable) for a module on the path; the current directory is searched
  first, as for ``python -m``.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from importlib.metadata import entry_points

GROUP = "geosweep.plugins"


class PluginError(ImportError):
    """A plugin or ``--import`` module could not be loaded."""


def load_plugins(imports: list[str] | tuple[str, ...] | None = None, *, entry_point_group: str = GROUP) -> list[str]:
    """Load every ``geosweep.plugins`` entry point, then import ``imports``; returns what was loaded.

    An entry point may name a module (imported) or a callable (called with no arguments).
    Raises :class:`PluginError` naming the plugin that failed.
    """
    loaded = []
    for ep in entry_points(group=entry_point_group):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, types.ModuleType):
                obj()
        except Exception as e:  # noqa: BLE001 - name the plugin, whatever it raised
            raise PluginError(f"plugin {ep.name} ({ep.value}) from entry point group {GROUP}: {e}") from e
        loaded.append(f"{ep.name} ({ep.value})")
    if imports:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        for name in imports:
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001
                raise PluginError(f"--import {name}: {type(e).__name__}: {e}") from e
            loaded.append(name)
    return loaded

"""``geosweep systems``: the registered systems and integrators."""

from __future__ import annotations

import argparse

from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, integrators_for, load_builtins


def cmd_systems(args: argparse.Namespace) -> int:
    load_builtins()  # declarations only: the kernels compile on first use (geosweep.kernels._jit.DeclaredDispatcher)
    for sysdef in SYSTEMS.values():
        print(f"{sysdef.name}  [family {sysdef.family}]")
        print(f"    {sysdef.doc}")
        for p in sysdef.params:
            extra = f" one of {list(p.choices)}" if p.choices else ""
            units = f" [{p.units}]" if p.units and p.units != "1" else ""
            print(f"    - {p.name} ({p.kind.__name__}{units}, default {p.default!r}){extra}: {p.doc}")
        print(f"    integrators: {', '.join(i.name for i in integrators_for(sysdef))}")
        print()
    print("integrators:")
    for idef in INTEGRATORS.values():
        print(f"  {idef.name}  [family {idef.family}, order {idef.order}]: {idef.doc}")
        for p in idef.params:
            print(f"    - {p.name} ({p.kind.__name__}, default {p.default!r}): {p.doc}")
    return 0

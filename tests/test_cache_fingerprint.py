"""Compiled kernels are never loaded from a cache made from other sources (geosweep.kernels._jit).

Numba checks a cached function against its own source file only, so after an edit of a function
in another file that it calls (a ``git pull`` into an editable install), the caller's cache entry
still holds the old callee. The kernels' cache carries, per module, a fingerprint of the sources its
entries may hold (its import closure and that of every module importing it); a module's entries are
dropped when that fingerprint differs, and only those: an edit of one family recompiles that family.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from geosweep.kernels import _jit

ROOT = Path(__file__).resolve().parent.parent

CALLEE = "from geosweep.kernels._jit import kjit\n\n\n@kjit\ndef f(x):\n    return x + {k}\n"
CALLER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from geosweep.kernels._jit import drop_stale_cache, kjit

    if sys.argv[1] == "guarded":
        here = Path(__file__).resolve().parent
        drop_stale_cache(here, [here / "__pycache__"])

    from callee import f


    @kjit
    def g(x):
        return f(x)


    print(g(1))
    """
)


def _run(pkg: Path, mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = f"{pkg}{os.pathsep}{ROOT}"
    out = subprocess.run([sys.executable, str(pkg / "caller.py"), mode], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.strip().splitlines()[-1])


def test_a_caller_cached_before_its_callee_changed_is_recompiled(tmp_path):
    for mode in ("plain", "guarded"):
        pkg = tmp_path / mode
        pkg.mkdir()
        (pkg / "callee.py").write_text(CALLEE.format(k=1))
        (pkg / "caller.py").write_text(CALLER)
        assert _run(pkg, mode) == 2  # compiled and cached
        (pkg / "callee.py").write_text(CALLEE.format(k=2))  # only the callee's file changes
        expected = 2 if mode == "plain" else 3
        assert _run(pkg, mode) == expected, mode  # Numba alone loads the stale caller; the guard recompiles


def test_the_cache_is_dropped_only_when_the_sources_change(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "src" / "__pycache__"
    cache.mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n")
    for name in ("a.f-1.py311.nbi", "a.f-1.py311.1.nbc", "a.cpython-311.pyc"):
        (cache / name).write_text("")
    assert _jit.drop_stale_cache(src, [cache]) == 2  # no fingerprint yet: compiled from unknown sources
    assert sorted(p.name for p in cache.iterdir()) == ["a.cpython-311.pyc", _jit.SOURCE_MARK]
    (cache / "a.f-1.py311.nbi").write_text("")
    assert _jit.drop_stale_cache(src, [cache]) == 0  # same sources: kept
    assert (cache / "a.f-1.py311.nbi").exists()
    (src / "a.py").write_text("x = 2\n")
    assert _jit.drop_stale_cache(src, [cache]) == 1
    assert not (cache / "a.f-1.py311.nbi").exists()


def test_the_kernels_cache_names_the_sources_it_was_compiled_from():
    root = Path(_jit.__file__).resolve().parent
    dirs = _jit.cache_dirs(root)
    assert {d.name for d in dirs} == {"__pycache__"} or os.environ.get("NUMBA_CACHE_DIR")
    mark = json.loads((dirs[0] / _jit.SOURCE_MARK).read_text())
    assert mark == {"tree": _jit.source_fingerprint(root), "modules": _jit.closure_fingerprints(root)}


#: a callee reached through a function passed as an argument: ``g(h, x)`` in ``m`` calls ``h``, whose
#: callee ``k`` (module ``p``) it imports neither; only ``main`` links them. Numba keys ``g``'s entry on
#: the function passed in, which is why a module's fingerprint need not cover its importers' imports
PASSED_IN = {
    "p.py": "from geosweep.kernels._jit import kjit\n\n\n@kjit\ndef k(x):\n    return x + {k}\n",
    "n.py": "from geosweep.kernels._jit import kjit\nfrom p import k\n\n\n@kjit\ndef h(x):\n    return k(x) * 2\n",
    "m.py": "from geosweep.kernels._jit import kjit\n\n\n@kjit\ndef g(f, x):\n    return f(x) + 1\n",
    "main.py": textwrap.dedent(
        """
        import sys
        from pathlib import Path

        from geosweep.kernels._jit import drop_stale_cache

        if sys.argv[1] == "guarded":
            here = Path(__file__).resolve().parent
            drop_stale_cache(here, [here / "__pycache__"])

        from m import g
        from n import h

        print(g(h, 1))
        """
    ),
}


def test_a_kernel_given_a_function_whose_callee_changed_is_recompiled(tmp_path):
    for mode in ("plain", "guarded"):
        pkg = tmp_path / mode
        pkg.mkdir()
        for name, text in PASSED_IN.items():
            (pkg / name).write_text(text.format(k=10) if name == "p.py" else text)
        (pkg / "caller.py").write_text(PASSED_IN["main.py"])
        assert _run(pkg, mode) == 23  # (1 + 10) * 2 + 1
        (pkg / "p.py").write_text(PASSED_IN["p.py"].format(k=20))  # only the innermost callee changes
        assert _run(pkg, mode) == (23 if mode == "plain" else 43), mode


def _changed_by_an_edit(tmp_path: Path, edited: str) -> set[str]:
    """The modules of a copy of the kernels whose entries an edit of ``edited`` makes stale."""
    root = tmp_path / "kernels"
    shutil.copytree(Path(_jit.__file__).resolve().parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    before = _jit.closure_fingerprints(root)
    with open(root / edited, "a") as f:
        f.write("\n# edited\n")
    after = _jit.closure_fingerprints(root)
    return {rel for rel in before if before[rel] != after[rel]}


def test_an_edit_of_one_family_leaves_the_other_families_compiled(tmp_path):
    stale = _changed_by_an_edit(tmp_path, "torus/forces.py")
    assert {"torus/forces.py", "torus/stepper.py", "torus/family.py"} <= stale
    kept = {"s2/stepper.py", "s2/steps.py", "chain/rhs.py", "lie/stepper.py", "dg/steppers.py", "core/driver.py"}
    assert not stale & kept, stale & kept
    assert len(stale) < len(_jit.closure_fingerprints(Path(_jit.__file__).resolve().parent)) // 2


def test_an_edit_of_what_every_family_imports_drops_every_entry(tmp_path):
    stale = _changed_by_an_edit(tmp_path, "linalg.py")
    assert {"s2/stepper.py", "torus/stepper.py", "chain/rhs.py", "dg/steppers.py", "lie/stepper.py"} <= stale


def test_the_cache_of_one_module_is_dropped_with_the_modules_it_depends_on(tmp_path):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    (src / "shared.py").write_text("x = 1\n")
    (src / "a" / "x.py").write_text("from shared import x\n")
    (src / "b" / "y.py").write_text("from shared import x\n")
    dirs = [src / "__pycache__", src / "a" / "__pycache__", src / "b" / "__pycache__"]  # sorted packages
    entries = {dirs[1]: "x.f-1.py311", dirs[2]: "y.f-1.py311", dirs[0]: "shared.f-1.py311"}

    def cache() -> None:
        for d, stem in entries.items():
            d.mkdir(exist_ok=True)
            for suffix in (".nbi", ".1.nbc"):
                (d / f"{stem}{suffix}").write_text("")

    cache()
    assert _jit.drop_stale_cache(src, dirs) == 6  # no mark: all of unknown sources
    cache()
    (src / "a" / "x.py").write_text("from shared import x\ny = 2\n")
    assert _jit.drop_stale_cache(src, dirs) == 2  # a's entries; shared's and b's stay
    assert (dirs[2] / "y.f-1.py311.nbi").exists() and not (dirs[1] / "x.f-1.py311.nbi").exists()
    cache()
    (src / "shared.py").write_text("x = 3\n")
    assert _jit.drop_stale_cache(src, dirs) == 6  # everything imports it

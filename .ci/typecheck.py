#!/usr/bin/env python3
"""mypy on the typed core (pyproject's ``[tool.mypy] files``) under the package names users import.

The folders ``kernels/``, ``sweeps/`` … are the packages ``geosweep.kernels``, ``geosweep.sweeps`` …
through setuptools' ``package-dir`` mapping, which mypy cannot read. This script lays the namespace out
as symlinks in a temporary directory (``geosweep/kernels -> <checkout>/kernels`` …), runs mypy on the
listed files there, and prints the diagnostics with the checkout's paths. Exit code: mypy's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = config["tool"]["setuptools"]["package-dir"]
    files = config["tool"]["mypy"]["files"]
    with tempfile.TemporaryDirectory(prefix="geosweep-typecheck-") as tmp:
        pkg = Path(tmp) / "geosweep"
        pkg.mkdir()
        for path in (ROOT / "geosweep").iterdir():  # the package's own modules (the front door) and py.typed
            if path.suffix in (".py", ".typed"):
                shutil.copy(path, pkg / path.name)
        for dotted, folder in mapping.items():
            if dotted != "geosweep":
                (pkg / dotted.split(".", 1)[1]).symlink_to(ROOT / folder, target_is_directory=True)
        targets = [str(pkg / f.removeprefix("geosweep/")) for f in files]
        env = {**os.environ, "MYPYPATH": tmp}
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--explicit-package-bases"]
        out = subprocess.run([*cmd, *targets], cwd=ROOT, env=env, capture_output=True, text=True)
        text = (out.stdout + out.stderr).replace(str(pkg) + os.sep, "")
    print(text, end="")
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())

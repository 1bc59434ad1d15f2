"""Render a report's ``index.html`` in a real headless browser and save a screenshot beside it.

    python3 -m analysis.render results/sphere-demo.zarr.report     # → …/index_screenshot.png

Uses Chromium (``apt-get install -y chromium``; also ``chromium-browser`` or Google Chrome) in
headless mode. The screenshot shows what a reader sees: styled tables, the figures with their
captions. ``tests/test_report_html.py`` runs it (skipped where no browser is installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SCREENSHOT = "index_screenshot.png"


def find_browser() -> str | None:
    """Path of a Chromium-family browser on PATH (``GEOSWEEP_BROWSER`` overrides), or None."""
    env = os.environ.get("GEOSWEEP_BROWSER")
    if env:
        return shutil.which(env) or (env if Path(env).exists() else None)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def screenshot(report_dir: str | os.PathLike, out: str | os.PathLike | None = None, *, width: int = 1280,
               height: int = 3200, timeout: float = 60.0) -> Path:  # fmt: skip
    """Render ``report_dir/index.html`` headless at ``width`` × ``height`` px into ``out``
    (default ``report_dir/index_screenshot.png``). Raises ``RuntimeError`` with the browser's
    message if no browser is found or it writes no image."""
    page = Path(report_dir).absolute() / "index.html"
    if not page.exists():
        raise FileNotFoundError(f"{page}: no index.html (run `geosweep report` first)")
    target = Path(out) if out is not None else page.parent / SCREENSHOT
    browser = find_browser()
    if browser is None:
        raise RuntimeError(f"no headless browser found (tried {', '.join(BROWSERS)}); apt-get install -y chromium")
    target.unlink(missing_ok=True)
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",  # containers and CI run as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--allow-file-access-from-files",
        f"--window-size={width},{height}",
        f"--screenshot={target}",
        page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if not target.exists() or target.stat().st_size == 0:
        raise RuntimeError(f"{browser} wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 -m analysis.render REPORT_DIR", file=sys.stderr)
        return 2
    print(screenshot(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

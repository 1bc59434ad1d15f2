"""Render a report's ``index.html`` in a real headless browser and save a screenshot beside it.

    python3 -m geosweep.analysis.render results/sphere-demo.zarr.report     # → …/index_screenshot.png

Uses Chromium (``apt-get install -y chromium``; also ``chromium-browser`` or Google Chrome) in
headless mode. The screenshot shows what a reader sees, the whole page (its height measured in the
browser first): styled tables, the figures with their captions, the notes.
``tests/test_report_html.py`` runs it (skipped where no browser is installed).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from geosweep import config

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
SCREENSHOT = "index_screenshot.png"


def find_browser() -> str | None:
    """Path of a Chromium-family browser on PATH (``GEOSWEEP_BROWSER`` overrides), or None."""
    chosen = config.BROWSER.get()  # its path; a name that is no program is refused (ConfigError)
    if chosen:
        return chosen
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


#: a script that records the laid-out page height (after every image has loaded) on ``<body>``
_MEASURE = (
    "<script>window.addEventListener('load', () => document.body.setAttribute("
    "'data-page-height', document.documentElement.scrollHeight));</script>"
)
#: the tallest screenshot taken (px): a page taller than this is cut, and :func:`screenshot` says so
MAX_HEIGHT = 30000


def _base_cmd(browser: str, width: int, height: int) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",  # containers and CI run as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--allow-file-access-from-files",
        f"--window-size={width},{height}",
    ]


def page_height(page: Path, browser: str, width: int, timeout: float = 60.0) -> int:
    """Height [px] of ``page`` laid out ``width`` px wide with its images loaded, measured in the
    browser (a copy of the page with :data:`_MEASURE` added, ``--dump-dom``). Raises
    ``RuntimeError`` if the browser reports none."""
    probe = page.with_name(f".{page.stem}_measure.html")
    probe.write_text(page.read_text().replace("</body>", _MEASURE + "</body>"))
    try:
        cmd = [*_base_cmd(browser, width, 800), "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r'data-page-height="(\d+)"', proc.stdout)
    if not found:
        raise RuntimeError(f"{browser} reported no page height (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return int(found.group(1))


def screenshot(report_dir: str | os.PathLike, out: str | os.PathLike | None = None, *, width: int = 1280,
               height: int | None = None, timeout: float = 60.0) -> Path:  # fmt: skip
    """Render ``report_dir/index.html`` headless ``width`` px wide into ``out`` (default
    ``report_dir/index_screenshot.png``): the whole page, its height measured in the browser
    (:func:`page_height`), unless ``height`` [px] is given. Raises ``RuntimeError`` with the
    browser's message if no browser is found, it writes no image, or the page is taller than
    :data:`MAX_HEIGHT`."""
    page = Path(report_dir).absolute() / "index.html"
    if not page.exists():
        raise FileNotFoundError(f"{page}: no index.html (run `geosweep report` first)")
    target = Path(out) if out is not None else page.parent / SCREENSHOT
    browser = find_browser()
    if browser is None:
        raise RuntimeError(f"no headless browser found (tried {', '.join(BROWSERS)}); apt-get install -y chromium")
    if height is None:
        height = page_height(page, browser, width, timeout)
        if height > MAX_HEIGHT:
            raise RuntimeError(f"{page}: the page is {height} px tall, more than MAX_HEIGHT = {MAX_HEIGHT} px")
    target.unlink(missing_ok=True)
    cmd = [*_base_cmd(browser, width, height), f"--screenshot={target}", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if not target.exists() or target.stat().st_size == 0:
        raise RuntimeError(f"{browser} wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-400:]}")
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python3 -m geosweep.analysis.render REPORT_DIR", file=sys.stderr)
        return 2
    print(screenshot(args[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""index.html is a real page (pandas tables, captions, the same content as index.md), checked by
rendering it in a headless Chromium (`python3 -m geosweep.analysis.render`; skipped without a browser)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

from geosweep.analysis.render import SCREENSHOT, find_browser, page_height, screenshot
from geosweep.sweeps.engine import run_sweep

SPEC = {
    "name": "html-sp",
    "system": "spring_pendula",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.01, 0.005],
    "T": 5.0,
    "dt_out": 0.05,
}


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from geosweep.analysis.report import make_report

    root = tmp_path_factory.mktemp("html")
    assert run_sweep(SPEC, root / "s.zarr", serial=True).complete
    return make_report(root / "s.zarr", root / "s.zarr.report")


def test_index_html_is_a_page_with_the_content_of_index_md(report):
    md = report.index.read_text()
    page = (report.out / "index.html").read_text()
    assert "<pre>" not in page and "<style>" in page and "{'" not in page  # no raw Markdown, no dict
    p = Page()
    p.feed(page)
    tables = [a for t, a in p.tags if t == "table"]
    assert len(tables) >= 2 and all("data" in a.get("class", "") for a in tables)
    text = " ".join(" ".join(p.text).split())
    for head in re.findall(r"^##+ (.+)$", md, flags=re.M):  # every heading of index.md
        assert head in text, head
    for line in md.splitlines():  # every fact line at the top (store, cells, counts, ...)
        if re.match(r"^(store|family|sweep axes|cells|slice): ", line):
            key, value = line.split(": ", 1)
            assert f"{key} {' '.join(value.split())}" in text, line
    imgs = [a["src"] for t, a in p.tags if t == "img"]
    assert sorted(imgs) == sorted(f"{n}.png" for n in report.figures)
    assert text.count("Look for:") >= len(report.figures)  # every caption says what to look for
    assert page.count("<figcaption>") == len(report.figures)


@pytest.mark.skipif(find_browser() is None, reason="no headless Chromium (apt-get install -y chromium)")
def test_index_html_renders_in_a_headless_browser(report):
    import matplotlib.colors as mc
    import matplotlib.image as mpimg

    shot = screenshot(report.out, width=1200)
    assert shot == report.out / SCREENSHOT and shot.stat().st_size > 50_000
    img = mpimg.imread(shot)[..., :3]
    full = page_height(report.out / "index.html", find_browser(), 1200)
    assert img.shape[:2] == (full, 1200) and full > 3200  # the whole page; a fixed 3200 px cut it
    assert (img[-250:] < 0.5).any(axis=-1).mean() > 0.002  # the notes at the very end are in the picture
    hsv = mc.rgb_to_hsv(img.reshape(-1, 3))
    vivid = np.unique((img.reshape(-1, 3)[(hsv[:, 1] > 0.4) & (hsv[:, 2] > 0.3)] * 32).astype(int), axis=0)
    assert len(vivid) > 40, len(vivid)  # the figures' coloured curves were loaded and drawn
    assert (img < 0.5).any(axis=-1).mean() > 0.005  # dark text and lines: not a blank or error page

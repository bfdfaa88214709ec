"""The HTML report as a real browser renders it: the system's headless Chromium, driven by
Playwright (which downloads no browser of its own; `bash tests/install-chromium.sh` installs
Chromium). The page is opened from its file, and every other request it makes is refused and
recorded, so a test sees any network use and every console message."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Rendered:
    """A page as the browser shows it: Playwright's page, what it logged, what it asked for."""

    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def texts(self, selector: str) -> list[str]:
        return [text.strip() for text in self.page.locator(selector).all_text_contents()]


@contextmanager
def rendered(path: Path, *, width: int = 1280, height: int = 900) -> Iterator[Rendered]:
    """The HTML file `path` loaded in headless Chromium; requests other than the file refused."""
    assert CHROMIUM, "no Chromium: `bash tests/install-chromium.sh` installs it"
    from playwright.sync_api import sync_playwright

    url = path.resolve().as_uri()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            shown = Rendered(page)
            page.on("console", lambda message: shown.console.append((message.type, message.text)))
            page.on("pageerror", lambda error: shown.page_errors.append(str(error)))

            def refuse_others(route: Any) -> None:
                if route.request.url == url:
                    route.continue_()
                else:
                    shown.requests.append(route.request.url)
                    route.abort()

            page.route("**/*", refuse_others)
            page.goto(url, wait_until="load")
            yield shown
        finally:
            browser.close()


def assert_clean(shown: Rendered) -> None:
    """Nothing failed and nothing was fetched while the page loaded."""
    assert shown.page_errors == [] and shown.requests == []
    assert [text for kind, text in shown.console if kind in ("error", "warning")] == []


def screenshot(shown: Rendered, path: Path) -> None:
    shown.page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a picture, not a blank page


def nothing_clipped(shown: Rendered) -> None:
    """Every map's nodes and cuts (markers and labels) lie inside the map's svg, as drawn."""
    maps = shown.page.locator("svg.model-map").all()
    assert maps
    for drawn in maps:
        svg = drawn.bounding_box()
        assert svg is not None
        elements = drawn.locator(".map-node, .map-cut, .map-edge").all()
        assert elements
        for element in elements:
            box = element.bounding_box()
            assert box is not None
            assert svg["x"] - 0.5 <= box["x"] and svg["y"] - 0.5 <= box["y"], box
            assert box["x"] + box["width"] <= svg["x"] + svg["width"] + 0.5, box
            assert box["y"] + box["height"] <= svg["y"] + svg["height"] + 0.5, box

"""The HTML report as headless Chromium renders it (tests/browser.py): no console error, no
request beyond the page itself, the dead variables, their cuts and the model's map in the DOM, a
screenshot of each page; crafted names render as text and run nothing.

The pages: the seed's script under `gradcheck run`, a Keras GAN's `fit` (two gradient requests,
one section each), and crafted names in the report and in the map."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gradcheck_cli.analysis.model_map import (
    LOSS_ID,
    MapCut,
    MapEdge,
    MapNode,
    MapStatus,
    MapVariable,
    ModelMap,
    NodeKind,
)
from gradcheck_cli.cli import run_command
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import Format, render
from tests.browser import assert_clean, nothing_clipped, rendered, screenshot
from tests.cli_runs import invoke
from tests.reporters.test_html import ATTRIBUTE, SCRIPT, _crafted_report

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "sample_models" / "faulty_weights_tf1.py"
GAN = ROOT / "tests" / "scripts" / "run" / "gan_train_step.py"

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("html_pages")
    written = {}
    for name, script in [("seed", SEED), ("gan", GAN)]:
        page = folder / f"{name}.html"
        code, _, stderr = invoke(run_command, [str(script), "-f", "html", "-o", str(page)])
        assert code == 1, stderr
        written[name] = page
    return written


def test_the_seed_s_page_shows_the_dead_layer_and_its_cuts(
    pages: dict[str, Path], tmp_path: Path
) -> None:
    with rendered(pages["seed"]) as shown:
        assert_clean(shown)
        page = shown.page
        assert page.locator('.variable.status-blocked[data-variable="hidden1/weights_i"]').count()
        lines = {cut.get_attribute("data-line") for cut in page.locator("li.cut").all()}
        assert lines == {"40", "42", "46"}
        blocked = page.locator(".map-node.status-blocked")
        assert [node.get_attribute("data-scope") for node in blocked.all()] == ["hidden1"]
        assert blocked.first.is_visible()
        assert len(shown.texts(".map-node.status-ok")) == 1  # softmax_linear
        map_cuts = " ".join(shown.texts(".map-cut"))
        for shown_cut in ("Cast (GC102)", "BitwiseXor (GC103)", "StopGradient (GC101)"):
            assert shown_cut in map_cuts
        # The cut lines are highlighted in the annotated source, each linked from its story.
        highlighted = page.locator("tr.cut-line")
        assert highlighted.count() >= 3
        assert page.locator('a[href="#src-sample_models_faulty_weights_tf1.py-40"]').count()
        nothing_clipped(shown)
        screenshot(shown, tmp_path / "seed.png")


def test_a_gan_s_two_requests_are_two_sections_each_with_its_map(
    pages: dict[str, Path], tmp_path: Path
) -> None:
    with rendered(pages["gan"]) as shown:
        assert_clean(shown)
        sections = shown.page.locator("section.report")
        assert sections.count() == 2
        for index in range(2):
            assert sections.nth(index).locator("figure.model-map svg").count() == 1
        assert shown.page.locator(".variable.status-blocked, .variable.status-unused").count()
        nothing_clipped(shown)
        screenshot(shown, tmp_path / "gan.png")


def _crafted_map() -> ModelMap:
    at = SourceLocation(str(ROOT / "model.py"), 7)
    crafted = MapNode(
        "s0",
        SCRIPT,
        NodeKind.SCOPE,
        MapStatus.BLOCKED,
        3,
        (MapVariable(SCRIPT, MapStatus.BLOCKED),),
    )
    attribute = MapNode("s1", ATTRIBUTE, NodeKind.SCOPE, MapStatus.UNUSED, 1)
    loss = MapNode(LOSS_ID, "</svg><img src=x onerror=alert(1)>", NodeKind.LOSS, MapStatus.NONE, 1)
    cut = MapCut(ATTRIBUTE, "StopGradient", Reason.STOP_GRADIENT, "s0", location=at, code="GC101")
    return ModelMap((crafted, attribute, loss), (MapEdge("s0", LOSS_ID),), (cut,))


def test_crafted_names_render_as_text_and_run_nothing(tmp_path: Path) -> None:
    report = dataclasses.replace(_crafted_report(), model_map=_crafted_map())
    page = tmp_path / "crafted.html"
    page.write_text(render(report, Format.HTML))
    with rendered(page) as shown:
        assert_clean(shown)
        names = shown.texts(".variable")
        assert SCRIPT in names and ATTRIBUTE in names
        assert shown.page.locator("img, iframe, object, embed, body script").count() == 0
        labels = " ".join(shown.texts(".map-node"))
        assert SCRIPT in labels and ATTRIBUTE in labels
        assert "</svg><img src=x onerror=alert(1)>" in " ".join(shown.texts("svg text"))
        assert (
            shown.page.evaluate("document.querySelectorAll('[onmouseover],[onerror]').length") == 0
        )

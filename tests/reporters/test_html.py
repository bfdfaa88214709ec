"""The HTML page: one self-contained file, every name escaped, stable hooks for a browser test,
the seed's page compared with a golden file (tests/golden.py; `--update-goldens` rewrites it)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from html.parser import HTMLParser
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
from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Status
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.report_output import open_page
from gradcheck_cli.reporters import CheckFailure, Format, render
from gradcheck_cli.reporters.html.markup import RULE_PAGES
from gradcheck_cli.version import __version__
from tests.cli_runs import invoke
from tests.golden import assert_matches_golden, fixed_machine
from tests.import_probe import imported_after
from tests.reporters.factories import verdict
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SEED_SCRIPT = "sample_models/faulty_weights_tf1.py"
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '" onmouseover="x'


class Page(HTMLParser):
    """Every start tag of a page, with its attributes, and its text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, css_class: str) -> list[dict[str, str | None]]:
        return [attrs for _, attrs in self.tags if css_class in (attrs.get("class") or "").split()]


@pytest.fixture(autouse=True)
def _in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed_machine(monkeypatch)


@pytest.fixture(scope="module")
def seed(repository_checks: RepositoryChecks) -> Report:
    return repository_checks.start(SEED_SCRIPT, "loss").result()


def _crafted_report() -> Report:
    at = SourceLocation(str(REPO / "model.py"), 7)
    blocked = verdict(
        SCRIPT,
        Status.BLOCKED,
        location=SourceLocation(str(REPO / "model.py"), 3),
        blockers=(Blocker(ATTRIBUTE, "StopGradient", Reason.STOP_GRADIENT, SCRIPT, None, at),),
        route=(
            PathStep(SCRIPT, "_Arg"),
            PathStep(ATTRIBUTE, "StopGradient", location=at, cut=Reason.STOP_GRADIENT),
            PathStep("loss", "Mean"),
        ),
    )
    unused = verdict(ATTRIBUTE, Status.UNUSED)
    code = {(str(REPO / "model.py"), 3): f"w = tf.Variable(1.0, name='{SCRIPT}')"}
    code[(str(REPO / "model.py"), 7)] = "y = tf.stop_gradient(w)  # </pre><b>"
    return Report(SourceInfo(SCRIPT, "script", ATTRIBUTE), (blocked, unused), code=code)


def _no_network_loads(page: Page) -> None:
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs and "style" not in attrs
        href = attrs.get("href") or ""
        if tag == "a" and href.startswith("http"):
            assert href.startswith(RULE_PAGES + "/GC") and href.endswith(".md"), href
        else:
            assert not href or href.startswith("#"), href


def test_crafted_names_render_as_text() -> None:
    text = render(_crafted_report(), Format.HTML)
    page = Page(text)
    _no_network_loads(page)
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs)
    assert {attrs["data-variable"] for attrs in page.having("variable")} == {SCRIPT, ATTRIBUTE}
    (cut,) = page.having("cut")
    assert cut["data-op"] == ATTRIBUTE and cut["data-line"] == "7"
    assert SCRIPT in "".join(page.text)
    assert "<b>" not in text.split("src-model.py-7", 1)[1].split("</tr>", 1)[0].split("<pre", 1)[1]


def test_control_characters_are_escaped_as_the_other_formats_do() -> None:
    report = Report(SourceInfo("m.py", "script", "loss"), (verdict("w\x1b[31m\n", Status.UNUSED),))
    text = render(report, Format.HTML)
    assert "\x1b" not in text and "w\\x1b[31m\\n" in text


def test_a_model_that_could_not_be_checked_gets_its_section() -> None:
    failure = CheckFailure("<broken>.py", "could not import: <b>", "script")
    page = Page(render([_crafted_report(), failure], Format.HTML))
    assert len(page.having("report")) == 2
    assert "could not import: <b>" in "".join(page.text)
    assert len(page.having("overall")) == 1


def _links_land(page: Page) -> list[str]:
    """Every id on the page once, and every link within the page to one of them; the links."""
    ids = [attrs["id"] for _, attrs in page.tags if attrs.get("id")]
    assert len(ids) == len(set(ids))
    links = [attrs.get("href") or "" for tag, attrs in page.tags if tag == "a"]
    inside = [link.removeprefix("#") for link in links if link.startswith("#")]
    assert set(inside) <= set(ids), set(inside) - set(ids)
    return inside


def _mapped(report: Report) -> Report:
    """The crafted report with its map: the blocked variable's node, its cut, the unused one's."""
    at = SourceLocation(str(REPO / "model.py"), 7)
    nodes = (
        MapNode(
            "s0",
            "a/b",
            NodeKind.SCOPE,
            MapStatus.BLOCKED,
            3,
            (MapVariable(SCRIPT, MapStatus.BLOCKED),),
        ),
        MapNode(
            "s1",
            "a_b",
            NodeKind.SCOPE,
            MapStatus.UNUSED,
            1,
            (MapVariable(ATTRIBUTE, MapStatus.UNUSED),),
        ),
        MapNode(LOSS_ID, "loss", NodeKind.LOSS, MapStatus.NONE, 1),
    )
    cut = MapCut(ATTRIBUTE, "StopGradient", Reason.STOP_GRADIENT, "s0", location=at, code="GC101")
    return dataclasses.replace(report, model_map=ModelMap(nodes, (MapEdge("s0", LOSS_ID),), (cut,)))


def test_the_map_links_each_dead_node_to_its_story_and_each_cut_to_its_line() -> None:
    twice = [_mapped(_crafted_report()), _mapped(_crafted_report())]
    page = Page(render(twice, Format.HTML))
    links = _links_land(page)
    stories = [attrs["id"] for attrs in page.having("story")]
    assert len(stories) == 4  # two in each report, each with its own id
    assert all(story and story.startswith("var-") for story in stories)
    tags = [(tag, attrs) for tag, attrs in page.tags]
    nodes = [i for i, (_, attrs) in enumerate(tags) if "map-node" in (attrs.get("class") or "")]
    linked = [tags[i - 1][1]["href"] for i in nodes if tags[i - 1][0] == "a"]
    assert len(linked) == 4 and set(linked) == {f"#{story}" for story in stories}
    assert links.count("src-model.py-7") >= 2  # each map's cut label, and the stories' cuts


def test_the_page_loads_neither_rich_nor_tensorflow() -> None:
    assert not imported_after("import gradcheck_cli.reporters.html.page", "rich")
    assert not imported_after("import gradcheck_cli.reporters.html.page")


def test_the_seed_page(seed: Report) -> None:
    page = Page(render(seed, Format.HTML))
    _no_network_loads(page)
    blocked = {a["data-variable"] for a in page.having("status-blocked")}
    assert blocked == {"hidden1/weights_i"}  # its story and its row in the table
    cuts = [
        (attrs["data-op"], attrs["data-line"], attrs["data-rule"]) for attrs in page.having("cut")
    ]
    assert [(op.split("/")[-1].rstrip("_0123456789"), line, rule) for op, line, rule in cuts] == [
        ("Cast", "40", "GC102"),
        ("BitwiseXor", "42", "GC103"),
        ("StopGradient", "46", "GC101"),
    ]
    links = {attrs["href"]: attrs.get("title") for attrs in page.having("rule")}
    assert links[f"{RULE_PAGES}/GC101.md"].startswith("A tf.stop_gradient cuts")
    ids = {attrs.get("id") for _, attrs in page.tags}
    assert {f"src-sample_models_faulty_weights_tf1.py-{n}" for n in (36, 40, 42, 46)} <= ids
    (generator,) = [a for tag, a in page.tags if tag == "meta" and a.get("name") == "generator"]
    assert generator["content"] == f"gradcheck {__version__}"


def test_the_seed_page_matches_golden(seed: Report, request: pytest.FixtureRequest) -> None:
    text = render(seed, Format.HTML).replace(f"gradcheck {__version__}", "gradcheck VERSION")
    assert_matches_golden(text, "seed_script.html", request)


def test_format_html_output_and_also(tmp_path: Path) -> None:
    from gradcheck_cli.cli import command

    also, output = tmp_path / "also.html", tmp_path / "out.html"
    ran = invoke(command, [SEED_SCRIPT, "--loss", "loss", "-f", "html", "--also", f"html:{also}"])
    assert ran.returncode == 1
    assert Page(ran.stdout).having("cut") and ran.stdout == also.read_text(encoding="utf-8")
    inside = _links_land(Page(ran.stdout))  # the map's links to the story and the cut lines
    assert (
        "var-hidden1_weights_i" in inside and "src-sample_models_faulty_weights_tf1.py-46" in inside
    )
    ran = invoke(command, [SEED_SCRIPT, "--loss", "loss", "-f", "html", "-o", str(output)])
    assert ran.returncode == 1 and ran.stdout == ""
    assert output.read_text(encoding="utf-8") == also.read_text(encoding="utf-8")


def test_run_open_writes_the_page_and_opens_it_in_the_browser(tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n', encoding="utf-8")
    browser.chmod(0o755)
    environment = {**os.environ, "BROWSER": str(browser)}
    script = "tests/scripts/run/gan_train_step.py"
    ran = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", "run", script, "--open", "-q"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 1, ran.stderr
    (uri,) = opened.read_text(encoding="utf-8").split()
    assert uri.startswith("file://") and uri.endswith(".html")
    page = Path(uri.removeprefix("file://"))
    try:
        assert len(Page(page.read_text(encoding="utf-8")).having("report")) == 2  # two steps
    finally:
        page.unlink()


def test_open_without_a_browser_says_where_the_page_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import webbrowser

    monkeypatch.setattr(webbrowser, "open", lambda uri: False)
    assert open_page("<!DOCTYPE html>\n") is None
    (line,) = capsys.readouterr().err.splitlines()
    where = Path(line.rpartition(" ")[2])
    try:
        assert where.read_text(encoding="utf-8") == "<!DOCTYPE html>\n"
    finally:
        where.unlink()


def test_a_fragment_for_a_notebook_scopes_its_style_and_prefixes_its_ids() -> None:
    from gradcheck_cli.reporters.html.page import html_fragment

    report = _mapped(_crafted_report())
    one, two = html_fragment([report], "r1-"), html_fragment([report], "r2-", fix_command="")
    assert one.startswith('<div class="gradcheck-report">') and "<body" not in one
    page = Page(one)
    assert all(link.startswith("r1-") for link in _links_land(page))
    ids = {attrs["id"] for _, attrs in page.tags if attrs.get("id")}
    assert ids and all(anchor and anchor.startswith("r1-") for anchor in ids)
    assert "url(#r1-map0-arrow)" in one
    assert not ids & {attrs.get("id") for _, attrs in Page(two).tags}
    style = one.split("<style>", 1)[1].split("</style>", 1)[0]
    assert ".gradcheck-report article.story h4 {" in style and "\nbody" not in style

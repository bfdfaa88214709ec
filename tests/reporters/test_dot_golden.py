"""`--format dot` on real scripts and a SavedModel: golden pictures a user can read, whose cuts
(nested functions' included) are the ones TensorFlow's own gradients confirm."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gradcheck_cli import check
from gradcheck_cli.cli import command
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters import Format, render
from tests import forked_python, oracle
from tests.cli_runs import invoke
from tests.golden import assert_matches_golden, fixed_machine, redacted
from tests.reporters.test_dot import Dot, _check_structure, _label_text
from tests.shared_checks import RepositoryChecks

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = {
    "seed_script": ("sample_models/faulty_weights_tf1.py", "loss"),
    "cond_branch_cut": ("tests/scripts/cond_branch_cut.py", "loss"),
    # A called tf.function with a tf.cond inside, and a while loop: cuts two functions deep.
    "nested_function_cuts": ("tests/scripts/nested_function_cuts.py", "loss"),
}
SAVED = "savedmodel_with_debug_info"


@pytest.fixture(scope="module")
def reports(
    tmp_path_factory: pytest.TempPathFactory, repository_checks: RepositoryChecks
) -> dict[str, tuple[Report, Path]]:
    scripts = {name: repository_checks.start(path, loss) for name, (path, loss) in SCRIPTS.items()}
    scratch = tmp_path_factory.mktemp("dot")
    saved = scratch / "with_debug_info"
    write = "import runpy, sys; runpy.run_path(sys.argv[1])['main'](sys.argv[2])"
    forked_python.run(["-c", write, str(REPO / "sample_models/write_savedmodel.py"), str(saved)])
    checked = {name: future.result() for name, future in scripts.items()}
    checked[SAVED] = check(str(saved), "loss")
    return {name: (report, scratch) for name, report in checked.items()}


def _picture(reports: dict[str, tuple[Report, Path]], case: str) -> tuple[Report, str, Dot]:
    report, scratch = reports[case]
    text = render(redacted(report, scratch), Format.DOT)
    return report, text, _check_structure(text)


def _shows_code(label: str, where: str, code: str) -> bool:
    """True if `label` has the line `where` and, on the lines below, `code` (folded)."""
    lines = label.split("\n")
    if where not in lines:
        return False
    below = " ".join(lines[lines.index(where) + 1 :])
    return below.startswith(" ".join(code.split()))


def _labels(dot: Dot) -> list[str]:
    return [_label_text(attrs.get("label", "")) for attrs in dot.nodes.values()]


@pytest.mark.parametrize("case", [*SCRIPTS, SAVED])
def test_the_picture_matches_its_golden(
    case: str,
    reports: dict[str, tuple[Report, Path]],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixed_machine(monkeypatch)
    _, text, _ = _picture(reports, case)
    assert_matches_golden(text, f"{case}.dot", request)


@pytest.mark.parametrize("case", [*SCRIPTS, SAVED])
def test_labels_speak_words_not_codes(
    case: str, reports: dict[str, tuple[Report, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed_machine(monkeypatch)
    report, text, dot = _picture(reports, case)
    # No reason code, no `_Arg`: a function's argument is named by the value passed in.
    # (`stop_gradient` is also the API's name, which the words for the cut use; `other`, a word.)
    for reason in set(Reason) - {Reason.STOP_GRADIENT, Reason.OTHER}:
        assert reason.value not in text, reason
    assert not any("_Arg" in label for label in _labels(dot))
    # Every cut edge is red and says why in the terminal's words: a blocker's message.
    messages = {
        blocker.message for v in report.variables for blocker in (*v.blockers, *v.side_cuts)
    }
    cut = [attrs for _, _, attrs in dot.edges if attrs.get("color") == "red"]
    assert cut
    for attrs in cut:
        if "label" in attrs:
            assert " ".join(_label_text(attrs["label"]).split("\n")) in messages
    # Each blocker's op shows the user's file:line and the code there.
    for verdict in report.dead:
        for blocker in verdict.blockers:
            code = report.code_at(blocker.location)
            if blocker.location is None or code is None:
                continue
            where = f"{blocker.location.file.removeprefix(str(REPO) + '/')}:{blocker.location.line}"
            assert any(_shows_code(label, where, code) for label in _labels(dot)), where


def test_a_cond_branch_is_a_cluster_with_its_cut_inside(
    reports: dict[str, tuple[Report, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed_machine(monkeypatch)
    _, _, dot = _picture(reports, "cond_branch_cut")
    (branch,) = [name for name in dot.clusters if name.startswith("cluster_function cond_false")]
    assert dot.cluster_labels[branch].startswith("cond_false: false branch of cond (If), ")
    members = dot.clusters[branch]
    (round_,) = [node for node in members if node.endswith("/cond/Round")]
    assert dot.nodes[round_]["color"] == "red"
    # The variable enters the branch at its argument, named by the variable passed in.
    argument = dot.node_labelled("threshold, passed as argument 2 of cond_false")
    assert argument in members
    dot.edge("variable:threshold", argument)
    # The cond op itself is not the cut: the branch returns into it, and it leads on.
    assert dot.nodes["op:cond"].get("color") != "red"
    assert any(s in members and t == "op:cond" for s, t, _ in dot.edges)
    assert not any(t == "op:cond" and s not in members for s, t, _ in dot.edges)


def test_cuts_two_functions_deep_are_drawn_where_they_are_and_tensorflow_agrees(
    reports: dict[str, tuple[Report, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, loss = SCRIPTS["nested_function_cuts"]
    tensorflow = oracle.start_dead_in_script(str(REPO / path), loss)
    fixed_machine(monkeypatch)
    report, _, dot = _picture(reports, "nested_function_cuts")
    assert oracle.dead_names(tensorflow.result()) == {"offset", "step"}
    assert {v.name for v in report.dead} == {"offset", "step"}
    called = next(name for name in dot.clusters if "shifted" in name)
    branches = [name for name in dot.clusters if "cond_true" in name or "cond_false" in name]
    assert len(branches) == 2
    (loop,) = [name for name in dot.clusters if "while_body" in name]
    # The cond's branches are drawn inside the called function; each holds its cut.
    for branch in branches:
        assert set(dot.clusters[branch]) < set(dot.clusters[called])
        assert any(dot.nodes[node].get("color") == "red" for node in dot.clusters[branch])
    (cast,) = [n for n in dot.clusters[loop] if dot.nodes[n].get("color") == "red"]
    assert _label_text(dot.nodes[cast]["label"]).startswith("while/Cast\n")
    assert dot.cluster_labels[loop].startswith("while_body: loop body of while (While), ")
    assert dot.cluster_labels[called].startswith("shifted: called by StatefulPartitionedCall, ")


def test_the_command_line_writes_a_picture_graphviz_draws(tmp_path: Path) -> None:
    script = REPO / SCRIPTS["nested_function_cuts"][0]
    out = tmp_path / "cuts.dot"
    code, stdout, stderr = invoke(command, [script, "--loss", "loss", "-f", "dot", "-o", out])
    assert code == 1, stderr
    dot = _check_structure(out.read_text(encoding="utf-8"))
    assert any(name.startswith("cluster_function") for name in dot.clusters)
    if shutil.which("dot"):
        svg = subprocess.run(
            ["dot", "-Tsvg", str(out)], capture_output=True, text=True, check=True
        ).stdout
        assert re.search(r"<svg width=\"\d+pt\"", svg)

"""A layer's output carried by assignments that end in a name nothing reads: the line where
it is dropped and the statement that goes on from other values."""

from __future__ import annotations

from pathlib import Path

from gradcheck_cli.findings.advice.overwrites import Dropped, dropped_output
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation

CALL = """\
class Net:
    def call(self, x):
        h = self.layer1(x)
        h = self.layer2(h)
        out = self.layer3(h)
{tail}
"""


def _dropped(tmp_path: Path, tail: str) -> Dropped | None:
    script = tmp_path / "net.py"
    script.write_text(CALL.format(tail=tail))
    return dropped_output(SourceLines(), SourceLocation(str(script), 3))


def test_the_chain_of_assignments_is_followed_to_the_one_nobody_reads(tmp_path: Path) -> None:
    assert _dropped(tmp_path, "        return self.layer4(x)") == Dropped(
        "out", "self.layer3", 5, 6
    )


def test_a_value_that_reaches_a_return_is_not_dropped(tmp_path: Path) -> None:
    assert _dropped(tmp_path, "        return self.layer4(out)") is None


def test_a_value_read_by_anything_but_one_name_s_assignment_is_not_dropped(
    tmp_path: Path,
) -> None:
    assert _dropped(tmp_path, "        self.log(out)\n        return x") is None


def test_an_overwritten_value_is_told_as_overwritten_not_dropped(tmp_path: Path) -> None:
    assert _dropped(tmp_path, "        out = self.layer4(x)\n        return out") is None


def test_the_last_statement_of_its_block_has_nothing_after_it_to_name(tmp_path: Path) -> None:
    assert _dropped(tmp_path, "") is None

"""A sub-model this loss never reads, whose layers Keras names without the model (a functional
GAN's discriminator): one story, named by the attribute that holds it, with the hint that
another loss may train it, and an allow-dead pattern that accepts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck_cli import check
from gradcheck_cli.findings.report import Report
from gradcheck_cli.reporters.grouping import group_dead
from tests.oracle import dead_in_script, dead_names

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "scripts" / "intent" / "functional_gan.py"
DISCRIMINATOR = {"d_hidden/kernel", "d_hidden/bias", "d_out/kernel", "d_out/bias"}


@pytest.fixture(scope="module")
def report() -> Report:
    return check(str(SCRIPT), "loss")


def test_the_discriminator_is_one_story_with_the_other_loss_hint(report: Report) -> None:
    assert (
        {v.name for v in report.dead}
        == DISCRIMINATOR
        == dead_names(dead_in_script(str(SCRIPT), "loss"))
    )
    (group,) = group_dead(report)
    assert {v.name for v in group.members} == DISCRIMINATOR
    assert group.fix is not None
    assert group.fix.startswith("if another loss trains discriminator")
    assert 'allow-dead = ["discriminator.*"]' in group.fix
    assert "call x " not in group.fix


def test_the_advised_pattern_accepts_it() -> None:
    accepted = check(str(SCRIPT), "loss", allow_dead=["discriminator.*"])
    assert not accepted.dead
    assert set(accepted.allowed) == DISCRIMINATOR

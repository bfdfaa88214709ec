"""Twin networks keep their verdicts: a network with a trained twin (a target network given the
online one's weights, two discriminators from one seeded builder, a siamese tower left over,
layers that share one seeded initializer) is checked and reported like any other, in the plain
script form, a SavedModel and `gradcheck run`, as TensorFlow's own gradients judge it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import command, run_command
from tests import forked_python, oracle
from tests.cli_runs import invoke

TWINS = Path(__file__).parent / "scripts" / "twins"
SCRIPT = TWINS / "twin_networks.py"
LOSSES = ("critic_loss", "twin_loss")
# The networks each loss leaves unread, whose twins it trains or reads.
UNREAD = {
    "critic_loss": {"actor", "generator", "disc_x", "disc_y", "tower_a", "tower_b", "left"},
    "twin_loss": {"target_actor", "disc_x", "tower_b", "right"},
}

SAVE = """
import sys
import tensorflow as tf
sys.path.insert(0, sys.argv[1])
import twin_networks as twins


class Twins(tf.Module):
    def __init__(self):
        super().__init__()
        self.networks = [getattr(twins, name) for name in sys.argv[3:]]

    @tf.function(input_signature=[])
    def critic_loss(self):
        return twins.critic_loss()

    @tf.function(input_signature=[])
    def twin_loss(self):
        return twins.twin_loss()


tf.saved_model.save(Twins(), sys.argv[2])
"""
NETWORKS = (
    "actor critic target_actor target_critic generator disc_x disc_y tower_a tower_b left right"
)


def _dead(report: dict[str, Any]) -> set[str]:
    return {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}


def _checked(target: Path, loss: str, *extra: str) -> dict[str, Any]:
    code, stdout, stderr = invoke(command, [str(target), "--loss", loss, "-f", "json", *extra])
    assert code == 1, stdout + stderr
    report: dict[str, Any] = json.loads(stdout)
    return report


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("twins") / "saved"
    forked_python.run(["-c", SAVE, str(TWINS), str(folder), *NETWORKS.split()], None)
    return folder


@pytest.mark.parametrize("loss", LOSSES)
def test_a_network_whose_twin_the_loss_uses_is_still_checked(loss: str) -> None:
    pending = oracle.start_dead_in_script(str(SCRIPT), loss)
    report = _checked(SCRIPT, loss)
    tensorflow = pending.result()
    # Every trainable variable the script creates is a candidate, with TensorFlow's verdict.
    assert {v["name"] for v in report["variables"]} == set(tensorflow)
    assert _dead(report) == oracle.dead_names(tensorflow)
    unread = {v["name"].split("/")[0] for v in report["variables"] if v["status"] == "unused"}
    assert UNREAD[loss] <= unread


@pytest.mark.parametrize("loss", LOSSES)
def test_twin_networks_in_a_saved_model_keep_their_verdicts(saved: Path, loss: str) -> None:
    pending = oracle.start_dead_in_savedmodel(str(saved), loss)
    report = _checked(saved, loss)
    tensorflow = pending.result()
    assert len(report["variables"]) == len(tensorflow) == 40
    assert len(_dead(report)) == len(oracle.dead_names(tensorflow))


def test_target_networks_of_a_training_step_are_told_not_hidden(tmp_path: Path) -> None:
    script = TWINS / "ddpg_step.py"
    code, stdout, stderr = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, stderr
    critic, actor = json.loads(stdout)
    out = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], None, timeout=300)
    requests = json.loads(out.read_text())["requests"]
    assert [set(r["variables"]) for r in requests] == [
        {v["name"] for v in critic["variables"] if v["status"] == "ok"},
        {v["name"] for v in actor["variables"] if v["status"] == "ok"},
    ]
    # The target networks, which no request lists, hold the online networks' values: told as
    # copies (an info), not as variables forgotten by the variable lists (GC207, GC213).
    (copies,) = [f for f in critic["findings"] if f["code"] == "GC214"]
    assert copies["severity"] == "info"
    assert [f for f in critic["findings"] + actor["findings"] if f["severity"] != "info"] == []
    for copy, source in COPIES:
        assert f"{copy} (= {source})" in copies["message"], copies["message"]


COPIES = (
    ("target_actor/dense_4/kernel", "actor/dense/kernel"),
    ("target_actor/dense_5/bias", "actor/dense_1/bias"),
    ("critic/target_dense_2/kernel", "critic/dense_2/kernel"),
    ("critic/target_dense_3/bias", "critic/dense_3/bias"),
)


def test_watch_tells_the_same_copies_in_the_users_own_process() -> None:
    run = f"import runpy, sys; sys.path.insert(0, {str(TWINS)!r}); runpy.run_path(" + (
        f"{str(TWINS / 'ddpg_watched.py')!r}, run_name='__main__')"
    )
    code, stderr = forked_python.run(["-c", run], {**os.environ, "NO_COLOR": "1"})
    assert code == 0, stderr
    assert "GC214" in stderr, stderr
    told = " ".join(stderr.split())
    for copy, source in COPIES:
        assert f"{copy} (= {source})" in told, stderr


def test_a_variable_left_out_is_named_as_every_list_of_the_check_names_it() -> None:
    # Two variables a library made share TensorFlow's name with the script's own: GC009 tells
    # each by the name the check gives it everywhere (numbered by creation), not by the name
    # they share.
    import tensorflow as tf

    from gradcheck_cli.graph.model import CreationNames, SourceLocation
    from gradcheck_cli.tracing.keras_weights import (
        DISCARDED,
        MADE_BY_A_LIBRARY,
        left_out_of_candidates,
    )

    own, clone, slot = (tf.Variable(1.0, name="w") for _ in range(3))
    counter = tf.Variable(0, name="w")  # an integer never trains: not told
    names = CreationNames([own, clone, slot, counter], lambda v: v.name[:-2], lambda _: True)
    assert names.name(own) == "w"
    made = SourceLocation("/project/train.py", 7)
    told = left_out_of_candidates([slot, counter, clone], {id(clone)}, names, {id(slot): made})
    assert told == [
        ("w_2", f"{MADE_BY_A_LIBRARY}; made by the call at train.py:7"),
        ("w_1", DISCARDED),
    ]

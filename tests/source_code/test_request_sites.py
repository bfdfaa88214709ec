"""The gradient requests a script holds that a run stopped before: source facts, read once."""

from __future__ import annotations

import linecache
from pathlib import Path

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.request_sites import request_spans, unreached_requests

STEPS = """\
def critic_step(real):
    with tf.GradientTape() as tape:
        loss = critic(generator(noise)) - critic(real)
    grads = tape.gradient(
        loss, critic.trainable_variables
    )
    optimizer.apply_gradients(zip(grads, critic.trainable_variables))


def generator_step():
    with tf.GradientTape() as tape:
        loss = -critic(generator(noise))
    grads = tape.gradient(loss, generator.trainable_variables)
    g_optimizer.apply_gradients(zip(grads, generator.trainable_variables))


model.fit(x, y)
gradients = tf.gradients(loss, weights)
gradient = tape.watch(x)  # neither a request nor a call of one
"""


def test_each_call_of_a_request_method_spans_its_lines() -> None:
    assert sorted(request_spans(STEPS)) == [(4, 6), (13, 13), (17, 17), (18, 18)]
    assert request_spans("def broken(:\n") == []


def test_the_requests_a_run_did_not_reach_are_the_ones_no_request_location_falls_in(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(STEPS)
    # The run stopped at the critic's update: its request was seen at line 5 (a line inside
    # the call, as Python reports a call that spans lines), called from line 20.
    caller = SourceLocation(str(script), 20)
    reached = SourceLocation(str(script), 5, "critic_step", callers=(caller,))
    assert unreached_requests([reached, None]) == (
        SourceLocation(str(script), 13),
        SourceLocation(str(script), 17),
        SourceLocation(str(script), 18),
    )
    # Every request seen: nothing left.
    seen = [SourceLocation(str(script), line) for line in (4, 13, 17, 18)]
    assert unreached_requests(seen) == ()
    # A library's file is not the user's: not read.
    library = SourceLocation("/usr/lib/python3/dist-packages/keras/trainer.py", 1)
    assert unreached_requests([library]) == ()


def test_a_cell_is_read_from_what_its_runner_left_in_linecache_never_from_disk(
    tmp_path: Path,
) -> None:
    cell = "<gradcheck-test-cell-7>"
    lines = [line + "\n" for line in STEPS.splitlines()]
    linecache.cache[cell] = (len(STEPS), None, lines, cell)
    try:
        assert len(unreached_requests([SourceLocation(cell, 4)])) == 3
    finally:
        del linecache.cache[cell]
    # A file that is not Python, not in linecache: not read.
    other = tmp_path / "steps.txt"
    other.write_text(STEPS)
    assert unreached_requests([SourceLocation(str(other), 4)]) == ()

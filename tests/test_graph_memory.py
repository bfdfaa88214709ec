"""The cyclic collector pauses while a graph is built or walked, and comes back as it was; loading
leaves no cycle for it to find."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from gradcheck_cli.graph.memory import without_cyclic_gc


def test_the_collector_pauses_in_the_block_and_runs_again_after_it() -> None:
    assert gc.isenabled()
    with without_cyclic_gc():
        assert not gc.isenabled()
        with without_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer one's pause alone
    assert gc.isenabled()


def test_an_error_in_the_block_still_restarts_the_collector() -> None:
    with pytest.raises(ValueError), without_cyclic_gc():
        raise ValueError("a malformed graph")
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with without_cyclic_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_loading_a_saved_model_leaves_no_cycle_that_holds_part_of_it(saved: Path) -> None:
    """A part of the parsed SavedModel caught in a reference cycle keeps the whole message (as
    large as saved_model.pb) alive until the collector runs, which it does not while the graph
    is walked: on a million ops, a fifth of the peak."""
    from google.protobuf.message import Message

    from gradcheck_cli.savedmodel.loading import load_saved_model

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        program, _ = load_saved_model(saved, "loss", sum_loss=False)
        gc.collect()
        held = [type(o).__name__ for o in gc.garbage if isinstance(o, Message)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert program.variables, "the model was loaded"
    assert held == []

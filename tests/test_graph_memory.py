"""The cyclic collector pauses while a graph is built or walked, and comes back as it was."""

from __future__ import annotations

import gc

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

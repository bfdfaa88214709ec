"""The model's map of a real script: the seed's MLP, its dead layer and the three cuts."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradcheck_cli
from gradcheck_cli.analysis.model_map import LOSS_ID, MapEdge, MapStatus

SEED = Path(__file__).parents[2] / "sample_models" / "faulty_weights_tf1.py"


@pytest.mark.heavy
def test_the_seed_s_map_shows_hidden1_blocked_with_its_three_cuts() -> None:
    report = gradcheck_cli.check(str(SEED), loss="loss", model_map=True)
    drawn = report.model_map
    assert drawn is not None
    ids = {node.label: node.id for node in drawn.nodes}
    status = {node.label: node.status for node in drawn.nodes}
    assert status["hidden1"] is MapStatus.BLOCKED
    assert status["softmax_linear"] is MapStatus.OK
    assert MapEdge(ids["images"], ids["hidden1"]) in drawn.edges
    assert MapEdge(ids["hidden1"], ids["softmax_linear"]) in drawn.edges
    assert any(edge.target == LOSS_ID for edge in drawn.edges)
    cuts = {(cut.op_type, cut.code, cut.location.line) for cut in drawn.cuts if cut.location}
    assert cuts == {
        ("Cast", "GC102", 40),
        ("BitwiseXor", "GC103", 42),
        ("StopGradient", "GC101", 46),
    }
    assert {cut.node for cut in drawn.cuts} == {ids["hidden1"]}
    assert all(cut.variables == ("hidden1/weights_i",) for cut in drawn.cuts)
    allowed = gradcheck_cli.check(str(SEED), loss="loss", allow_dead=["*weights_i"], model_map=True)
    assert allowed.model_map is not None
    assert {n.label: n.status for n in allowed.model_map.nodes}["hidden1"] is MapStatus.ALLOWED
    # Drawn only when asked for: no other report pays for it.
    assert gradcheck_cli.check(str(SEED), loss="loss").model_map is None

"""The OpDefs a graph is built with: the model's own first, gradcheck's snapshot for the rest."""

from __future__ import annotations

from gradcheck_cli.protos.op_defs import merged_op_defs, snapshot_op_defs
from gradcheck_cli.protos.tf_protos import protos


def test_the_models_own_op_defs_win_and_the_snapshot_fills_in_the_rest() -> None:
    own = protos().op_def_pb2.OpDef(name="MatMul")  # no attributes: not the snapshot's MatMul
    merged = merged_op_defs([own])
    assert merged.get("MatMul") is own and merged["MatMul"] is own
    assert merged.get("Relu") is snapshot_op_defs()["Relu"]
    assert merged.get("NotAnOp") is None and "NotAnOp" not in merged
    assert list(merged) == [*snapshot_op_defs()]  # MatMul's place is the snapshot's
    assert len(merged) == len(snapshot_op_defs())


def test_the_snapshot_is_read_only_for_an_op_the_models_list_lacks() -> None:
    own = protos().op_def_pb2.OpDef(name="MatMul")
    snapshot_op_defs.cache_clear()
    merged = merged_op_defs([own])
    assert merged.get("MatMul") is own
    assert snapshot_op_defs.cache_info().currsize == 0
    assert merged.get("Relu") is not None
    assert snapshot_op_defs.cache_info().currsize == 1

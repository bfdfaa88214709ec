"""The ops whose gradient TensorFlow takes through the functions they run: calls, conditionals
and loops. Another op that runs a function (a tf.data reduction or map, a batched call) is an op
like any other to the gradient: its registered gradient decides, or it has none."""

from __future__ import annotations

from gradcheck_cli.graph.model import Node

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})
# A Python function run by TensorFlow (tf.py_func / tf.numpy_function, tf.py_function's eager
# form): no gradient unless one is given.
PYTHON_FUNCTIONS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def runs_its_functions(node: Node) -> bool:
    """Whether the gradient through `node` is its functions' (a direct library call is a node
    whose op type is the name of the function it runs)."""
    if node.op_type in IF_OPS | CASE_OPS | WHILE_OPS:
        return True
    called = node.calls.get("f")
    return bool(called) and (node.op_type in CALL_OPS or node.op_type == called[0])


# tf.data's ops by the API that makes them, where users know them by it.
_DATASET_APIS = {
    "ReduceDataset": "Dataset.reduce",
    "MapDataset": "Dataset.map",
    "ParallelMapDataset": "Dataset.map",
    "ParallelMapDatasetV2": "Dataset.map",
    "ScanDataset": "Dataset.scan",
    "FilterDataset": "Dataset.filter",
    "FlatMapDataset": "Dataset.flat_map",
    "DatasetToSingleElement": "Dataset.get_single_element",
}


def is_dataset_op(op_type: str) -> bool:
    """Whether `op_type` is one of tf.data's ops (each names itself a Dataset)."""
    return "Dataset" in op_type


def dataset_api(op_type: str) -> str:
    """The tf.data call that makes an op of `op_type`, as users write it."""
    return _DATASET_APIS.get(op_type, f"the tf.data op {op_type}")

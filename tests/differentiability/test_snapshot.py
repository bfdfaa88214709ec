"""The shipped differentiability snapshot matches the installed TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gradcheck_cli.differentiability.registry import load_registry
from gradcheck_cli.differentiability.snapshot import registry_differences


def test_snapshot_matches_installed_tensorflow() -> None:
    # A subprocess: the check imports TensorFlow and reads its global gradient registry.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    completed = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli.differentiability.snapshot", "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_registry_loads_the_expected_facts() -> None:
    registry = load_registry()
    assert registry.all_none == {
        "ArgMax",
        "ArgMin",
        "Ceil",
        "Floor",
        "FloorDiv",
        "LoopCond",
        "Rint",
        "Round",
        "TruncateDiv",
    }
    assert registry.not_differentiable.isdisjoint(registry.registered)
    assert {"StopGradient", "Equal", "Shape", "BitwiseXor"} <= registry.not_differentiable
    assert {"MatMul", "GatherV2", "Sign"} <= registry.registered
    assert registry.none_inputs["GatherV2"] == {1, 2}
    assert registry.none_inputs["Reshape"] == {1}
    assert set(registry.none_inputs) <= registry.registered
    assert not registry.has_entry("Unique")


def test_registry_differences_names_each_change() -> None:
    live = {
        "tensorflow_version": "2.21.0",
        "not_differentiable": ["Equal", "Shape"],
        "registered": ["MatMul"],
        "none_inputs": {"Reshape": [1]},
        "all_none": ["Round"],
    }
    stored = json.loads(json.dumps(live))
    assert registry_differences(stored, live) == []

    stored["not_differentiable"] = ["Equal", "Rank"]
    stored["none_inputs"] = {"Reshape": [0, 1]}
    assert registry_differences(stored, live) == [
        "not_differentiable: only in TensorFlow: Shape",
        "not_differentiable: only in snapshot: Rank",
        "none_inputs[Reshape]: snapshot [0, 1], installed [1]",
    ]

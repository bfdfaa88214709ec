"""A Keras model with its own train_step is checked through what that train_step differentiates."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.tf_oracle_inprocess import dead_names, tf_verdicts

SCRIPT = Path(__file__).parent / "scripts" / "custom_train_step.py"


def test_custom_train_step_agrees_with_tensorflow() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gradcheck_cli", str(SCRIPT), "--loss", "model", "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout)
    namespace = runpy.run_path(str(SCRIPT), run_name="oracle")
    model = namespace["model"]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4)).astype("float32")
    y = rng.normal(size=(4, 4)).astype("float32")
    verdicts = tf_verdicts(
        lambda: namespace["step_loss"](model, x, y), [w for w in model.weights if w.trainable]
    )
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == dead_names(verdicts)
    assert result.returncode == (1 if dead_names(verdicts) else 0)

"""gradcheck's Keras callback on Keras 2 (tf.keras under TF_USE_LEGACY_KERAS), in a plain script:
a clean fit trains after one line; a fit with a dead layer is reported and trains on, or is
stopped before its first weight change. TensorFlow's tape gives exactly the variables the report
calls dead a None gradient."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "watch" / "keras2_callback.py"


def test_the_keras_callback_on_keras_2() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "NO_COLOR": "1",
    }
    ran = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    facts = json.loads(ran.stdout.splitlines()[-1])
    assert facts["callback"].startswith("tf_keras.")  # Keras 2's Callback class
    clean, continued, stopped = ran.stderr.split("-- clean")[1].split("\n-- ")
    assert "gradcheck: no dead variables (2 ok, 0 blocked, 0 unused, 0 frozen); fit goes on" in (
        clean
    )
    assert facts["clean"] == {"epochs": 2, "same": [False, False]}
    assert "unused layer spare: kernel, bias" in continued
    assert "gradcheck: fit goes on" in continued
    assert facts["continue"] == {"epochs": 2, "same": [False, False, True, True]}
    assert "unused layer spare: kernel, bias" in stopped
    assert facts["stop"]["error"].startswith("gradcheck stopped training before its first weight")
    assert facts["stop"]["same"] == [True] * 4
    assert facts["stop"]["dead"] == facts["none"] == ["spare/bias", "spare/kernel"]
    assert facts["hooks_gone"]


def test_a_step_keras_2_aborts_is_reported_before_its_error(tmp_path: Path) -> None:
    """Keras 2 (tf_keras): the steps of the Keras 3 test, each refused by tf_keras's optimizer
    ("No gradients provided for any variable") or failing in its own code on a None gradient:
    gradcheck's report first, then the error the program gets without gradcheck."""
    from tests.aborted_steps import assert_reported_before_the_error, run_aborted_steps

    assert_reported_before_the_error(run_aborted_steps("2", tmp_path))

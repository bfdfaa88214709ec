"""What a run counts: a gradient request reached several times in one traced step (a critic's
d_steps loop) is one request, whatever its graph reads by the later passes; a strategy's own
variable and the components of mirrored weights are not variables no request trains (GC207)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gradcheck_cli.cli import run_command
from tests import forked_python
from tests.cli_runs import invoke

RUN_SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "run"
SCRIPT = RUN_SCRIPTS / "critic_loop.py"


def _agrees_with_tensorflow(script: Path, reports: list[dict[str, Any]], tmp_path: Path) -> None:
    """TensorFlow's own run of the script (tests.run_oracle, a request per call site) makes
    the same requests, and gives None to exactly the variables each report calls dead."""
    out = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out), str(script)], timeout=300)
    answer = json.loads(out.read_text())
    assert answer["error"] is None, answer["error"]
    requests = answer["requests"]
    assert [(r["location"] or {}).get("line") for r in requests] == [
        (report["source"]["request"]["location"] or {}).get("line") for report in reports
    ]
    for report, request in zip(reports, requests, strict=True):
        dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
        assert dead == set(request["none"])


def _line(text: str) -> int:
    return next(n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def test_a_critic_loop_is_one_request(tmp_path: Path) -> None:
    code, out, err = invoke(run_command, [str(SCRIPT), "-f", "json"])
    assert code == 0, err
    reports = json.loads(out)
    lines = [report["source"]["request"]["location"]["line"] for report in reports]
    assert lines == [
        _line("tape.gradient(d_loss, critic.trainable_variables)"),
        _line("tape.gradient(g_loss, generator.trainable_variables)"),
    ]
    critic = [v["name"] for v in reports[0]["variables"]]
    assert len(critic) == 4 and all(name.startswith("critic/") for name in critic)
    _agrees_with_tensorflow(SCRIPT, reports, tmp_path)


def test_a_mirrored_fit_has_no_variable_never_requested(tmp_path: Path) -> None:
    script = RUN_SCRIPTS / "mirrored_fit.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    assert not [f for f in report["findings"] if f["code"] == "GC207"], report["findings"]
    assert {v["status"] for v in report["variables"]} == {"ok"}
    _agrees_with_tensorflow(script, [report], tmp_path)


def test_a_model_frozen_after_compile_is_told_its_training_trains_nothing(
    tmp_path: Path,
) -> None:
    script = RUN_SCRIPTS / "frozen_discriminator.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    (idle,) = [f for f in report["findings"] if f["code"] == "GC212"]
    text = script.read_text().splitlines()
    call = next(n for n, line in enumerate(text, 1) if "discriminator.train_on_batch(" in line)
    assert idle["location"]["line"] == call
    assert idle["message"].startswith("discriminator.train_on_batch trains nothing")
    assert idle["severity"] == "warning"
    # TensorFlow: the script's only request is the combined model's; with the discriminator
    # made trainable for its own call, that call asks for and gets gradients for its weights.
    _agrees_with_tensorflow(script, [report], tmp_path)
    fixed = tmp_path / "fixed.py"
    fixed.write_text(
        script.read_text().replace(
            "    discriminator.train_on_batch(images, labels)\n",
            "    discriminator.trainable = True\n"
            "    discriminator.train_on_batch(images, labels)\n"
            "    discriminator.trainable = False\n",
        )
    )
    out_file = tmp_path / "oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out_file), str(fixed)], timeout=300)
    answer = json.loads(out_file.read_text())
    first = answer["requests"][0]
    assert first["location"]["line"] == call + 1
    assert first["variables"] == ["critic/dense_1/kernel", "critic/dense_1/bias"]
    assert first["none"] == []
    code, out, err = invoke(run_command, [str(fixed), "-f", "json"])
    assert "GC212" not in out, out


COLD_WATCH = """
import sys
import numpy as np
from gradcheck_cli.run_mode.keras_calls import KerasWatch, is_idle
seen = []
watch = KerasWatch(
    lambda model, method: seen.append((method, is_idle(model))),
    lambda layer, where, depth: seen.append(("call", where.line)),
)
watch.install()
assert "keras" not in sys.modules
from tensorflow import keras
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.train_on_batch(np.ones((2, 2)), np.ones((2, 1)))
model.trainable = False
model.train_on_batch(np.ones((2, 2)), np.ones((2, 1)))
model(np.ones((2, 2)))
watch.uninstall()
model.train_on_batch(np.ones((2, 2)), np.ones((2, 1)))
model(np.ones((2, 2)))
print(seen)
"""


def test_keras_training_is_watched_when_the_script_imports_keras_itself() -> None:
    # A cold worker: Keras is imported by the script, after the watch was installed.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", COLD_WATCH], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == (
        "[('train_on_batch', False), ('train_on_batch', True), ('call', 18)]"
    )


def test_a_run_whose_only_training_trains_nothing_says_why(tmp_path: Path) -> None:
    script = tmp_path / "frozen_only.py"
    script.write_text(
        (RUN_SCRIPTS / "frozen_discriminator.py")
        .read_text()
        .replace("    gan.train_on_batch(noise, np.ones((8, 1)))\n", "")
    )
    code, out, err = invoke(run_command, [str(script)])
    assert code == 2
    (line,) = [line for line in err.splitlines() if line.startswith("gradcheck:")]
    assert "without asking TensorFlow for gradients: discriminator.train_on_batch" in line
    assert "no trainable weight (discriminator.trainable is False" in line


def test_a_variable_the_loss_reads_but_no_request_lists_has_its_own_warning(
    tmp_path: Path,
) -> None:
    script = RUN_SCRIPTS / "unlisted_codebook.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 0, err
    report = json.loads(out)
    codes = {f["code"]: f for f in report["findings"]}
    assert "codebook" in codes["GC213"]["message"]
    assert "probe/" not in codes["GC213"]["message"]
    assert "codebook" not in codes["GC207"]["message"]
    assert "probe/dense_1/kernel" in codes["GC207"]["message"]
    _agrees_with_tensorflow(script, [report], tmp_path)
    # The codebook added to the request, as the hint says: TensorFlow gives it a gradient.
    fixed = tmp_path / "fixed.py"
    fixed.write_text(
        script.read_text().replace(
            "encoder.trainable_variables", "encoder.trainable_variables + [codebook]"
        )
    )
    out_file = tmp_path / "fixed_oracle.json"
    forked_python.run(["-m", "tests.run_oracle", str(out_file), str(fixed)], timeout=300)
    (request,) = json.loads(out_file.read_text())["requests"]
    assert "codebook" in request["variables"] and request["none"] == []
    code, out, err = invoke(run_command, [str(fixed), "-f", "json"])
    assert "GC213" not in out and code == 0, err

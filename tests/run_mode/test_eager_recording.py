"""An eager tape's step rebuilt from the ops TensorFlow ran: the cut op and its line, judged
against TensorFlow's own gradients of the same step computed here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

from gradcheck_cli.cli import run_command
from gradcheck_cli.run_mode import eager_recording
from gradcheck_cli.run_mode.eager_recording import OpRecorder, rebuild
from tests.cli_runs import invoke

SCRIPTS = Path(__file__).parent.parent / "scripts" / "eager_run"
REBUILT = "eager step: reconstructed from the ops TensorFlow ran"
VERDICT_ONLY = "eager step: TensorFlow's verdict only, no graph"


def _run(script: str) -> dict[str, Any]:
    code, out, err = invoke(run_command, [str(SCRIPTS / script), "-f", "json"])
    assert code == 1, err
    report: dict[str, Any] = json.loads(out)
    return report


def _tensorflow_dead(script: str) -> set[str]:
    """The variables TensorFlow's own tape gives no gradient or zeros, from the script's step
    run here."""
    name = f"eager_run_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = [name for name in vars(module) if name.startswith("w_")]
    gradients = module.gradients()
    return {
        name
        for name, gradient in zip(names, gradients)
        if gradient is None or not bool(tf.reduce_any(tf.not_equal(gradient, 0.0)))
    }


def _cuts(report: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    return {
        v["name"]: [(b["op_type"], b["location"]["line"]) for b in v["blockers"]]
        for v in report["variables"]
    }


@pytest.fixture(scope="module")
def cuts() -> dict[str, Any]:
    return _run("cuts.py")


def test_tf_ops_that_cut_an_eager_step_are_named_at_their_lines(cuts: dict[str, Any]) -> None:
    assert _cuts(cuts) == {
        "w_ok": [],
        "w_stop": [("StopGradient", 22)],
        "w_argmax": [("ArgMax", 23)],
        "w_model": [("Round", 16)],  # inside the tf.function the tape called
        "w_zero": [("Mul", 27)],  # `* 0.0`: the eager scalar is a constant of the rebuilt step
    }
    assert cuts["source"]["loss"].endswith(f"({REBUILT})")


def test_the_rebuilt_step_agrees_with_tensorflow(cuts: dict[str, Any]) -> None:
    dead = {v["name"] for v in cuts["variables"] if v["status"] != "ok"}
    assert dead == _tensorflow_dead("cuts.py") == {"w_stop", "w_argmax", "w_model", "w_zero"}


def test_a_value_through_numpy_keeps_the_eager_story() -> None:
    report = _run("through_numpy.py")
    assert _cuts(report) == {"w_ok": [], "w_numpy": [("LeavesTensorFlow", 13)]}  # .numpy()
    assert report["source"]["loss"].endswith(f"({VERDICT_ONLY})")
    assert _tensorflow_dead("through_numpy.py") == {"w_numpy"}


def _gradients_of(path: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"eager_run_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gradients: dict[str, Any] = module.gradients()
    return gradients


def test_a_model_built_inside_the_tape_is_rebuilt_with_its_cut(tmp_path: Path) -> None:
    # The model's variables are created by its first call, inside the tape: their handles are
    # made while the step is recorded, and stand for the variables all the same.
    script = SCRIPTS / "built_in_tape.py"
    report = _run("built_in_tape.py")
    assert report["source"]["loss"].endswith(f"({REBUILT})")
    line = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), 1)
        if "tf.stop_gradient(self.linear1(x))" in text
    )
    first = ["net/dense/kernel", "net/dense/bias"]
    assert _cuts(report) == {
        **dict.fromkeys(first, [("StopGradient", line)]),
        "net/dense_1/kernel": [],
        "net/dense_1/bias": [],
    }
    fixes = {v["name"]: v.get("fix", "") for v in report["variables"]}
    assert fixes[first[0]].startswith(f"remove the tf.stop_gradient at line {line}")
    # TensorFlow: the first layer gets None; without the stop_gradient, every variable trains.
    dead = {name for name, gradient in _gradients_of(script).items() if gradient is None}
    assert dead == {"linear1/kernel", "linear1/bias"}
    fixed = tmp_path / "fixed.py"
    fixed.write_text(
        script.read_text().replace("tf.stop_gradient(self.linear1(x))", "self.linear1(x)")
    )
    assert all(gradient is not None for gradient in _gradients_of(fixed).values())


def test_a_model_called_before_the_tape_is_told_so(tmp_path: Path) -> None:
    script = SCRIPTS / "called_before_tape.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 1, err
    report = json.loads(out)
    assert report["source"]["loss"].endswith(f"({REBUILT})")
    assert {v["status"] for v in report["variables"]} == {"unused"}
    call = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), 1)
        if text == "pred = model(x)"
    )
    (finding, *_) = [f for f in report["findings"] if f["code"] == "GC108"]
    assert "the tape never saw it read" in finding["message"]
    assert f"was called at called_before_tape.py:{call}, before the tape" in finding["message"]
    assert "built but never called" not in out
    fix = report["variables"][0]["fix"]
    assert fix.startswith(f"move the call at line {call} (`pred = model(x)`) into the `with")
    # TensorFlow: no weight gets a gradient; with the call moved inside the tape, all do.
    assert all(gradient is None for gradient in _gradients_of(script).values())
    fixed = tmp_path / "fixed.py"
    text = script.read_text().replace("pred = model(x)\n", "")
    fixed.write_text(
        text.replace(
            "loss = tf.reduce_mean(tf.square(pred - y))",
            "loss = tf.reduce_mean(tf.square(model(x) - y))",
        )
    )
    assert all(gradient is not None for gradient in _gradients_of(fixed).values())


def test_the_call_before_the_tape_is_quoted_as_a_statement(tmp_path: Path) -> None:
    # Column padding and a trailing comment are the script's layout, not the statement.
    script = tmp_path / "called_before_tape.py"
    text = (SCRIPTS / script.name).read_text()
    script.write_text(text.replace("pred = model(x)\n", "pred   = model(x)   # forward\n"))
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 1, err
    call = script.read_text().splitlines().index("pred   = model(x)   # forward") + 1
    for variable in json.loads(out)["variables"]:
        # Named as the report names the variable, never by the name bound to its model.
        assert variable["fix"].startswith(
            f"move the call at line {call} (`pred = model(x)`) into the `with "
        )
        assert f"the forward pass that reads {variable['name']};" in variable["fix"]


def test_a_layer_called_inside_the_tape_is_not_told_as_called_before_it() -> None:
    # Both twins are called before the tape; only the online one inside it. The target's story
    # is its own call before the tape (the model's line, not its inner layer's); the online
    # layer's unread heads are told as unread by a call in the forward pass.
    script = SCRIPTS / "twin_called_before_tape.py"
    report = _run(script.name)
    lines = script.read_text().splitlines()
    call = next(n for n, text in enumerate(lines, 1) if text == "target(x)")
    dead = {v["name"]: v for v in report["variables"] if v["status"] == "unused"}
    tensorflow = {path for path, g in _gradients_of(script).items() if g is None}
    assert len(dead) == len(tensorflow) == 5
    online = [v for name, v in dead.items() if not name.startswith("net_1/")]
    target = [v for name, v in dead.items() if name.startswith("net_1/")]
    assert len(online) == 2 and len(target) == 3
    messages = {f["variable"]: f["message"] for f in report["findings"] if f["code"] == "GC108"}
    for variable in target:
        assert f"was called at {script.name}:{call}, before the tape" in messages[variable["name"]]
        assert variable["fix"].startswith(f"move the call at line {call} (`target(x)`)")
    for variable in online:
        assert "before the tape" not in messages[variable["name"]]
        assert "move the call" not in variable["fix"]
        assert "in the layer's call()" in variable["fix"]


def test_the_recorder_rebuilds_only_what_it_kept_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    variable = tf.Variable([1.0, 2.0])
    recorder = OpRecorder(busy=lambda: False)
    mark = recorder.tape_entered()
    loss = tf.reduce_sum(tf.stop_gradient(variable * 2.0))
    recorder.tape_exited()
    not_recorded = tf.reduce_sum(variable)
    ops = recorder.ops_since(mark)
    assert ops is not None
    step = rebuild(ops, loss, {id(variable.handle): "v"}, {})
    assert step is not None
    nodes = {n.name: n for n in step.graph_def.node}
    assert sorted(n.op for n in nodes.values()) == [
        "Const",  # 2.0: a number of the step is a constant, so that a zero factor is seen
        "Const",  # the reduction axes
        "Mul",
        "Placeholder",  # the variable's handle
        "ReadVariableOp",
        "StopGradient",
        "Sum",
    ]
    assert nodes[step.loss_tensor.split(":")[0]].op == "Sum"
    assert nodes["v"].attr["dtype"].type == tf.resource.as_datatype_enum
    assert step.handle_nodes == {id(variable.handle): "v"}
    # A value no recorded op computed is a constant to the tape: the loss reads no variable.
    unrecorded = rebuild(ops, not_recorded, {id(variable.handle): "v"}, {})
    assert unrecorded is not None
    loss_node = {n.name: n for n in unrecorded.graph_def.node}[unrecorded.loss_tensor[:-2]]
    assert loss_node.op in ("Placeholder", "Const") and not loss_node.input

    monkeypatch.setattr(eager_recording, "MAX_OPS", 2)
    mark = recorder.tape_entered()
    tf.reduce_sum(variable * 2.0 + 1.0)
    recorder.tape_exited()
    assert recorder.ops_since(mark) is None


def test_tensorflow_judges_where_the_rebuilt_step_disagrees() -> None:
    import tensorflow as tf

    from gradcheck_cli.findings.build import Context
    from gradcheck_cli.findings.report import SourceInfo
    from gradcheck_cli.options import CheckOptions
    from gradcheck_cli.pipeline import report_from_result
    from gradcheck_cli.run_mode import gradient_requests

    @tf.custom_gradient
    def no_gradient(value: Any) -> Any:
        return tf.identity(value), lambda upstream: None

    kept = tf.Variable([1.0, 2.0], name="kept")
    hidden = tf.Variable([3.0], name="hidden")
    created = gradient_requests.CreatedVariables(variables=[kept, hidden])
    recorder = OpRecorder(busy=lambda: False)
    with tf.GradientTape() as tape:
        mark = recorder.tape_entered()
        loss = tf.reduce_sum(kept * 2.0) + tf.reduce_sum(no_gradient(hidden))
        recorder.tape_exited()
    gradients = tape.gradient(loss, [kept, hidden])
    assert gradients[1] is None  # the custom gradient is TensorFlow's, not the ops' own
    variables = [(0, kept), (1, hidden)]
    watched = {id(v) for v in tape.watched_variables()}
    eager = gradient_requests.eager_request(variables, gradients, watched, None, created, "step")
    ops = recorder.ops_since(mark)
    assert ops is not None
    rebuilt = gradient_requests.reconstructed_request(eager, ops, {}, loss, variables, created)
    assert not isinstance(rebuilt, type(eager))

    source = SourceInfo("train.py", "run", "step")
    options = CheckOptions(sum_loss=True)
    report = report_from_result(rebuilt, source, options, Context(requested=True))
    assert report.source.loss == f"step ({VERDICT_ONLY})"
    assert {v.name: v.status.value for v in report.variables} == {
        "kept": "ok",
        "hidden": "blocked",
    }


def test_python_max_on_tensors_is_told_at_its_line_with_the_tensorflow_op(tmp_path: Path) -> None:
    # Both variables are called "Variable" by TensorFlow: each keeps its own verdict.
    script = SCRIPTS / "python_max.py"
    report = _run("python_max.py")
    line = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), 1)
        if "loss = max(" in text
    )
    assert _cuts(report) == {"Variable": [("LeavesTensorFlow", line)], "Variable_1": []}
    (low,) = [v for v in report["variables"] if v["status"] != "ok"]
    (finding,) = [f for f in report["findings"] if f["code"] == "GC109"]
    assert finding["location"]["line"] == line
    assert low["fix"].startswith(f"Python's max(), min() or if at line {line} picks one tensor")
    assert "tf.maximum" in low["fix"] and "tf.reduce_logsumexp(tf.stack([x, y]))" in low["fix"]
    assert _tensorflow_dead("python_max.py") == {"w_low"}
    # The TensorFlow op gives w_low a (zero) gradient; the smooth maximum trains both.
    text = script.read_text()
    for advised, trained in (
        ("tf.maximum(w_low * x, w_high * x)", None),
        ("tf.reduce_logsumexp(tf.stack([w_low * x, w_high * x]))", True),
    ):
        fixed = tmp_path / f"fixed_{trained}.py"
        fixed.write_text(text.replace("max(w_low * x, w_high * x)", advised))
        gradients = _gradients_of(fixed)
        assert all(gradient is not None for gradient in gradients)
        if trained:
            assert all(bool(tf.reduce_any(tf.not_equal(g, 0.0))) for g in gradients)


def test_a_cost_computed_before_minimize_is_told_the_tape_never_saw_it(tmp_path: Path) -> None:
    script = SCRIPTS / "minimize_before.py"
    code, out, err = invoke(run_command, [str(script), "-f", "json"])
    assert code == 1, err
    report = json.loads(out)
    assert report["source"]["loss"].endswith(f"({REBUILT})")
    (variable,) = report["variables"]
    assert variable["status"] == "unused" and variable["blockers"] == []
    (finding,) = [f for f in report["findings"] if f["code"] == "GC108"]
    assert "the tape never saw it read" in finding["message"]
    assert "leaves TensorFlow" not in out
    assert "inside loss_fn" in variable["fix"]
    # TensorFlow: no gradient; with the cost computed inside the function, a gradient.
    assert _gradients_of(script) == [None]
    fixed = tmp_path / "fixed.py"
    fixed.write_text(script.read_text().replace("lambda: cost", "lambda: (w_cost * x - 1.0) ** 2"))
    (gradient,) = _gradients_of(fixed)
    assert gradient is not None


def test_variables_read_in_tensorflow_s_fast_path_are_rebuilt_with_their_cut(
    tmp_path: Path,
) -> None:
    script = SCRIPTS / "fast_path_reads.py"
    report = _run("fast_path_reads.py")
    assert report["source"]["loss"].endswith(f"({REBUILT})")
    line = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), 1)
        if "scaled = tf.matmul(x, w_ok) * tf.stop_gradient(w_stopped)" in text
    )
    assert _cuts(report) == {"w_ok": [], "w_stopped": [("StopGradient", line)]}
    fixes = {v["name"]: v.get("fix", "") for v in report["variables"]}
    assert fixes["w_stopped"].startswith(f"remove the tf.stop_gradient at line {line}")
    assert not [f for f in report["findings"] if f["code"] == "GC203"]  # it does stop w_stopped
    assert _tensorflow_dead("fast_path_reads.py") == {"w_stopped"}
    fixed = tmp_path / "fixed.py"
    fixed.write_text(script.read_text().replace("* tf.stop_gradient(w_stopped)", "* w_stopped"))
    assert all(gradient is not None for gradient in _gradients_of(fixed))

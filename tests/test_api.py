"""`check` on live objects in this process, `allow_dead`, `assert_no_dead_variables`, and the
one set of options every entry point takes."""

from __future__ import annotations

import inspect
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import gradcheck_cli
from gradcheck_cli import GradcheckError, assert_no_dead_variables, check, check_function
from gradcheck_cli.options import OPTION_NAMES, CheckOptions, check_options
from gradcheck_cli.pytest_plugin import Gradcheck


@pytest.fixture(scope="module")
def half_cut_model() -> Any:
    """A compiled Keras model whose second branch is behind tf.stop_gradient."""
    keras = pytest.importorskip("keras")
    tf = pytest.importorskip("tensorflow")
    base: Any = keras.Model

    class HalfCut(base):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(name="half_cut")
            self.kept = keras.layers.Dense(2, name="kept")
            self.cut = keras.layers.Dense(2, name="cut")

        def call(self, x: Any) -> Any:
            return self.kept(x) + tf.stop_gradient(self.cut(x))

    model = HalfCut()
    model(tf.zeros([1, 3]))
    model.compile(loss="mse", optimizer="sgd")
    return model


def test_a_live_keras_model_is_checked_on_its_own_objective(half_cut_model: Any) -> None:
    report = check(half_cut_model, verify=True)
    assert report.source.kind == "keras"
    assert sorted(v.name for v in report.dead) == ["half_cut/cut/bias", "half_cut/cut/kernel"]
    assert report.verification is not None and report.verification.agrees  # TensorFlow's word


def test_allow_dead_accepts_matching_variables(half_cut_model: Any) -> None:
    report = check(half_cut_model, allow_dead=["*/cut/*"])
    assert report.dead == ()
    assert sorted(report.allowed) == ["half_cut/cut/bias", "half_cut/cut/kernel"]
    assert any(f.code == "GC007" for f in report.findings)


def test_assert_no_dead_variables_fails_with_the_readable_report(half_cut_model: Any) -> None:
    with pytest.raises(AssertionError) as failure:
        assert_no_dead_variables(half_cut_model)
    message = str(failure.value)
    assert "blocked 2 variables by the same cut" in message  # kernel and bias, one story
    assert "half_cut/cut/kernel" in message and "half_cut/cut/bias" in message
    assert "StopGradient" in message
    assert "\x1b[" not in message  # no colour codes in a test failure
    report = assert_no_dead_variables(half_cut_model, allow_dead={"*/cut/*": "frozen on purpose"})
    assert report.dead == ()


def test_a_tf_function_and_a_plain_callable_are_checked_in_process() -> None:
    tf = pytest.importorskip("tensorflow")
    trained = tf.Variable(1.0, name="trained")
    cut = tf.Variable(2.0, name="cut")

    @tf.function(input_signature=[])
    def loss() -> Any:
        return trained * tf.stop_gradient(cut)

    def eager_loss() -> Any:
        return trained * tf.stop_gradient(cut)

    for function in (loss, eager_loss):
        report = check(function, verify=True)
        assert report.source.kind == "function"
        assert len(report.dead) == 1 and len(report.variables) == 2
        assert report.verification is not None and report.verification.agrees


def test_sum_loss_reaches_a_function_checked_in_process() -> None:
    tf = pytest.importorskip("tensorflow")
    weights = tf.Variable([1.0, 2.0], name="weights")

    @tf.function(input_signature=[])
    def vector_loss() -> Any:
        return weights * 2.0

    with pytest.raises(GradcheckError, match="not a scalar"):
        check(vector_loss)
    assert [v.name for v in check(vector_loss, sum_loss=True).variables] == ["weights"]
    assert check_function(vector_loss, sum_loss=True).dead == ()


def test_a_function_takes_no_loss_name_and_other_objects_are_refused() -> None:
    with pytest.raises(GradcheckError, match="the loss itself"):
        check(lambda: 0.0, loss="loss")
    with pytest.raises(GradcheckError, match="cannot check a int"):
        check(3)


def test_the_assertion_is_exported() -> None:
    assert "assert_no_dead_variables" in gradcheck_cli.__all__


# --- one set of options for every entry point ---------------------------------------------------

SAMPLE_MODELS = Path(__file__).resolve().parents[1] / "sample_models"
BAD = Path(__file__).parent / "scripts" / "bad"


def _keywords(function: Any) -> dict[str, Any]:
    """Every argument `function` takes by keyword (after the model), with its default."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p.default for p in parameters if p.kind in keyword}


def test_every_entry_point_takes_every_option_with_its_default() -> None:
    fixture = Gradcheck()
    taken = _keywords(check)
    assert set(taken) == {item.name for item in fields(CheckOptions)} | {"variables"}
    defaults = CheckOptions()
    assert all(taken[name] == getattr(defaults, name) for name in OPTION_NAMES)
    for other in (assert_no_dead_variables, fixture.check, fixture.assert_no_dead_variables):
        assert _keywords(other) == taken, other
    # A function is the loss itself: every option but `loss`.
    assert _keywords(check_function) == {k: v for k, v in taken.items() if k != "loss"}
    for function in (check, assert_no_dead_variables, check_function, fixture.check):
        assert "timeout=None" in (function.__doc__ or ""), function  # help() says what it does


def test_an_unknown_option_is_a_type_error_that_lists_the_options() -> None:
    fixture = Gradcheck()
    calls = {
        "check": lambda: check("model_dir", timeuot=30),
        "assert_no_dead_variables": lambda: assert_no_dead_variables("model_dir", timeuot=30),
        "Gradcheck.check": lambda: fixture.check("model_dir", timeuot=30),
        "Gradcheck.assert_no_dead_variables": lambda: fixture.assert_no_dead_variables(
            "model_dir", timeuot=30
        ),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=rf"^{name}\(\) .* 'timeuot'; .*sum_loss, timeout"):
            call()
    with pytest.raises(TypeError, match=r"check_function\(\) .* 'loss'"):
        check_function(lambda: 0.0, loss="loss")
    with pytest.raises(TypeError, match="a list of glob patterns"):
        check("model_dir", allow_dead="*frozen*")


def test_allow_dead_is_normalised_from_globs_or_a_mapping() -> None:
    assert check_options("check", {"allow_dead": ["a*", "b*"]}).allow_dead == (
        ("a*", ""),
        ("b*", ""),
    )
    assert check_options("check", {"allow_dead": {"a*": "why"}}).allow_dead == (("a*", "why"),)


def test_assert_no_dead_variables_takes_the_worker_options() -> None:
    report = assert_no_dead_variables(
        SAMPLE_MODELS / "faulty_weights_fixed.py", loss="loss", timeout=30
    )
    assert report.dead == () and "hidden1/weights_i" in [v.name for v in report.variables]
    with pytest.raises(GradcheckError, match="did not finish within 2 s"):
        assert_no_dead_variables(BAD / "endless.py", timeout=2)
    with pytest.raises(GradcheckError, match="not a scalar"):
        check(BAD / "vector_loss.py", loss="loss")
    assert check(BAD / "vector_loss.py", loss="loss", sum_loss=True).dead == ()


def test_debug_reaches_the_worker_with_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradcheck_cli.worker import process
    from gradcheck_cli.worker.protocol import WorkerRequest

    seen: list[WorkerRequest] = []

    def run_worker(request: WorkerRequest) -> Any:
        seen.append(request)
        raise GradcheckError("stopped before TensorFlow")

    monkeypatch.delenv("GRADCHECK_DEBUG", raising=False)
    monkeypatch.setattr(process, "run_worker", run_worker)
    script = SAMPLE_MODELS / "faulty_weights_fixed.py"
    for debug in (True, False):
        with pytest.raises(GradcheckError, match="stopped"):
            check(script, loss="loss", debug=debug, cache=False)
    on, off = seen
    assert on.options.debug is True and off.options.debug is False
    assert "GRADCHECK_DEBUG" not in os.environ  # the request carries it, not the environment

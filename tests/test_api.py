"""`check` on live objects in this process, `allow_dead`, and `assert_no_dead_variables`."""

from __future__ import annotations

from typing import Any

import pytest

import gradcheck_cli
from gradcheck_cli import GradcheckError, assert_no_dead_variables, check


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
    assert "blocked half_cut/cut/kernel" in message
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


def test_a_function_takes_no_loss_name_and_other_objects_are_refused() -> None:
    with pytest.raises(GradcheckError, match="the loss itself"):
        check(lambda: 0.0, loss="loss")
    with pytest.raises(GradcheckError, match="cannot check a int"):
        check(3)


def test_the_assertion_is_exported() -> None:
    assert "assert_no_dead_variables" in gradcheck_cli.__all__

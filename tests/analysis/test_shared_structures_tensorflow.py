"""Functions of one structure share what the analysis learns from their numbers (their
`Structure`): verdicts still follow each function's own constants, ops and callees. TensorFlow
judges a SavedModel whose helpers differ from their twins only in a constant (2.0 or 0.0), a
stop_gradient or the function they call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradcheck_cli import check
from gradcheck_cli.analysis.control_flow import ProgramIndex
from gradcheck_cli.savedmodel.loading import load_saved_model
from tests.tf_oracle_inprocess import dead_names, tf_verdicts


def _helpers() -> Any:
    import tensorflow as tf

    def scaled(scale: float) -> Any:
        @tf.function
        def helper(v: Any) -> Any:
            return tf.reduce_sum(tf.tanh(v * scale))

        return helper

    def stopped() -> Any:
        @tf.function
        def helper(v: Any) -> Any:
            return tf.reduce_sum(tf.tanh(tf.stop_gradient(v) * 2.0))

        return helper

    def calling(inner: Any) -> Any:
        @tf.function
        def helper(v: Any) -> Any:
            return inner(v) * 3.0

        return helper

    return scaled, stopped, calling


class _Alike:
    """A module of twin helpers, each reading one variable."""

    def __new__(cls) -> Any:
        import tensorflow as tf

        scaled, stopped, calling = _helpers()

        class Alike(tf.Module):
            def __init__(self) -> None:
                super().__init__()
                # The loss's body is walked from its last op back: the twins are met first,
                # so a structure they share is kept before their unlike neighbours are met.
                names = (
                    "calls_stopped", "calls_live", "stopped", "times_zero",
                    "twin_a", "twin_b", "twin_c",
                )  # fmt: skip
                self.weights = [tf.Variable(tf.ones([3]) * 0.5, name=name) for name in names]
                self.helpers = [
                    calling(stopped()),
                    calling(scaled(2.0)),
                    stopped(),
                    scaled(0.0),
                    scaled(2.0),
                    scaled(2.0),
                    scaled(2.0),
                ]

            @tf.function(input_signature=[])
            def loss(self) -> Any:
                return tf.add_n([h(w) for h, w in zip(self.helpers, self.weights)])

        return Alike()


def test_twin_functions_keep_their_own_verdicts(tmp_path: Path) -> None:
    import tensorflow as tf

    module = _Alike()
    directory = tmp_path / "alike"
    tf.saved_model.save(module, str(directory))
    verdicts = tf_verdicts(module.loss, module.weights)
    assert dead_names(verdicts) == {"times_zero", "stopped", "calls_stopped"}
    report = check(directory, loss="loss")
    assert {v.name: v.dead for v in report.variables} == {
        name: name in dead_names(verdicts) for name in verdicts
    }
    reasons = {v.name: {b.reason.value for b in v.blockers} for v in report.variables if v.dead}
    assert reasons == {
        "times_zero": {"zero_gradient"},
        "stopped": {"stop_gradient"},
        "calls_stopped": {"stop_gradient"},
    }
    # The twins did share: the analysis above read shared numbers, not each body its own.
    program, _ = load_saved_model(directory, "loss")
    index = ProgramIndex(program)
    structures = [index.of(body).arrays.structure for body in program.bodies.values()]
    assert len({id(s) for s in structures}) < len(structures)

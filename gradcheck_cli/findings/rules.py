"""Every rule gradcheck reports, with its stable code and its documentation, in one place."""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck_cli.findings.finding import Severity


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str
    what_it_does: str
    why_bad: str
    example: str
    use_instead: str


_ALL = (
    Rule(
        code="GC001",
        name="graph-not-fully-modelled",
        severity=Severity.WARNING,
        summary="Part of the graph could not be modelled exactly",
        what_it_does=(
            "Reports what the loader could not model: an op type this TensorFlow does not know, "
            "a function body missing from the model, a custom gradient whose function was not "
            "saved. gradcheck assumes gradient flows there, so it never calls a variable dead "
            "because of something it could not read."
        ),
        why_bad="A verdict that rests on an assumption may miss a dead variable.",
        example="A SavedModel written by a newer TensorFlow with a new op type.",
        use_instead="Run gradcheck with the TensorFlow version that wrote the model, or --verify.",
    ),
    Rule(
        code="GC002",
        name="verification-disagrees",
        severity=Severity.ERROR,
        summary="--verify: TensorFlow's own gradients disagree with a verdict",
        what_it_does=(
            "With --verify, gradcheck also asks TensorFlow for the gradient of the loss with "
            "respect to every variable (None, all zeros, or a real gradient) and lists each "
            "variable where TensorFlow and gradcheck disagree."
        ),
        why_bad="A disagreement is a gradcheck bug: the static verdict is wrong for this model.",
        example="gradcheck model_dir --loss loss --verify",
        use_instead="Trust TensorFlow's verdict for the variables listed, and report the model.",
    ),
    Rule(
        code="GC003",
        name="verification-agrees",
        severity=Severity.INFO,
        summary="--verify: TensorFlow's own gradients agree with every verdict",
        what_it_does="Confirms that TensorFlow's gradients agree with every verdict.",
        why_bad="Nothing is wrong; this records that the check was made.",
        example="gradcheck model_dir --loss loss --verify",
        use_instead="Nothing to change.",
    ),
    Rule(
        code="GC004",
        name="verification-failed",
        severity=Severity.WARNING,
        summary="--verify: TensorFlow could not compute its own gradients",
        what_it_does=(
            "Reports why TensorFlow's gradients could not be computed for --verify (for "
            "example, a SavedModel whose variables/ folder was removed cannot be loaded)."
        ),
        why_bad="The static verdicts stand, but were not confirmed.",
        example="gradcheck stripped_model_dir --verify",
        use_instead="Verify on a complete SavedModel or on the script that builds the model.",
    ),
    Rule(
        code="GC101",
        name="variable-gradient-blocked",
        severity=Severity.ERROR,
        summary="A trainable variable reaches the loss, but every path is cut",
        what_it_does=(
            "Finds trainable variables whose every forward path to the loss crosses an op that "
            "passes no gradient back: tf.stop_gradient, a cast to an integer dtype, argmax, "
            "round, a bitwise op, an index or shape input, a custom gradient that returns None."
        ),
        why_bad=(
            "The optimizer never changes the variable: TensorFlow's gradient for it is None "
            '("Gradients do not exist for variables ...") or always zero.'
        ),
        example=(
            "w_int = tf.cast(w * 2**28, tf.int32)      # integer tensors carry no gradient\n"
            "y = tf.matmul(x, tf.cast(w_int, tf.float32) / 2**28)"
        ),
        use_instead=(
            "A straight-through estimator keeps the transformed value forward and passes the "
            "gradient to w unchanged backward:\n"
            "w_q = w + tf.stop_gradient(\n"
            "    tf.cast(tf.cast(w * 2**28, tf.int32), tf.float32) / 2**28 - w)\n"
            "If the cut is intended, create the variable with trainable=False."
        ),
    ),
    Rule(
        code="GC102",
        name="variable-never-reaches-loss",
        severity=Severity.ERROR,
        summary="A trainable variable has no data path to the loss at all",
        what_it_does=(
            "Finds trainable variables that nothing the loss computes depends on: a layer built "
            "but never called, a variable read only by an assignment, a result nobody uses."
        ),
        why_bad="The optimizer never changes the variable; it only costs memory and checkpoints.",
        example="self.proj = layers.Dense(32)   # built in __init__, never called in call()",
        use_instead="Call the layer in the forward pass, or delete it; if it is meant to stay "
        "untrained, create it with trainable=False.",
    ),
    Rule(
        code="GC103",
        name="value-leaves-tensorflow",
        severity=Severity.ERROR,
        summary="The loss leaves TensorFlow (.numpy(), float(), NumPy), so gradient cannot follow",
        what_it_does=(
            "When the loss function cannot be traced because it converts a tensor to a Python "
            "or NumPy value, gradcheck runs it eagerly under tf.GradientTape and reports the "
            "line where the value left TensorFlow."
        ),
        why_bad="A value computed outside TensorFlow is a constant to the gradient tape.",
        example="loss = tf.constant(np.mean(pred.numpy() - y))",
        use_instead="Compute the loss with TensorFlow ops: loss = tf.reduce_mean(pred - y)",
    ),
    Rule(
        code="GC104",
        name="loss-independent-of-variables",
        severity=Severity.ERROR,
        summary="The loss does not depend on any trainable variable",
        what_it_does="Reports a loss through which no trainable variable can receive gradient.",
        why_bad='Training on it changes nothing ("No gradients provided for any variable").',
        example="loss = tf.reduce_mean(tf.square(y_true - tf.stop_gradient(model(x))))",
        use_instead="Compute the loss from the model's output without cutting it.",
    ),
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _ALL}

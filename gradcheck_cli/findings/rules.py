"""Every rule gradcheck reports, with its stable code, documentation and message, in one place."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from gradcheck_cli.analysis.verdicts import Concern, ConcernKind, Unreached, VariableVerdict
from gradcheck_cli.differentiability.function_ops import dataset_api
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.finding import Finding, Severity
from gradcheck_cli.findings.source import assignment
from gradcheck_cli.graph.model import SourceLocation

SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")


@dataclass(frozen=True)
class Rule:
    """One rule. Codes are forever: never renumbered, never reused.

    `message` words a finding from the data the rule names (its keyword arguments).
    `what_it_does` and `why_bad` are prose (paragraphs separated by a blank line, code in
    backticks); `example` shows the mistake and `use_instead` the fix, both as code. A snippet
    that starts with `$ ` is a shell session, anything else is Python.
    """

    code: str
    name: str
    severity: Severity
    summary: str
    message: Callable[..., str]
    what_it_does: str
    why_bad: str
    example: str
    use_instead: str
    # The cut that makes a variable dead by this rule, or the concern this rule reports.
    reason: Reason | None = None
    concern: ConcernKind | None = None
    # About the loss as a whole: it stands only while some dead variable is not accepted.
    whole_loss: bool = False
    # The terminal tells it in the dead variable's own story, not in the list of findings.
    told_in_story: bool = False
    # An info finding the terminal lists even without --verbose.
    listed_without_verbose: bool = False

    @property
    def sections(self) -> tuple[tuple[str, str, str | None], ...]:
        """The documentation as (heading, body, language): language None for prose, else
        `console` for a shell session or `python`."""
        return (
            (SECTIONS[0], self.what_it_does, None),
            (SECTIONS[1], self.why_bad, None),
            (SECTIONS[2], self.example, _language(self.example)),
            (SECTIONS[3], self.use_instead, _language(self.use_instead)),
        )

    def finding(
        self,
        *,
        hint: str | None = None,
        variable: str | None = None,
        op: str | None = None,
        location: SourceLocation | None = None,
        **data: object,
    ) -> Finding:
        """A finding of this rule, its message worded from `data`."""
        return Finding(
            code=self.code,
            rule=self.name,
            severity=self.severity,
            message=self.message(**data),
            hint=hint,
            variable=variable,
            op=op,
            location=location,
        )


# 0xx: what gradcheck could not load, model or verify.
GRAPH_NOT_FULLY_MODELLED = Rule(
    code="GC001",
    name="graph-not-fully-modelled",
    severity=Severity.WARNING,
    message="{note}".format,
    summary="Part of the graph could not be modelled; gradcheck assumes gradient flows there",
    what_it_does=(
        "Reports each part of the graph that the loader could not model exactly: an op type "
        "the installed TensorFlow does not know (a SavedModel written by a newer TensorFlow, "
        "or a custom op whose library was not loaded with `tf.load_op_library`), a function "
        "body missing from the model's function library, or a `tf.custom_gradient` whose "
        "gradient function was not saved.\n\n"
        "gradcheck assumes that gradient flows through such an op into every input, so it "
        "never calls a variable dead because of something it could not read."
    ),
    why_bad=(
        "The verdicts of variables whose paths cross the unmodelled op rest on that "
        "assumption, and may be too optimistic: a variable reported `ok` could still get no "
        "gradient there. Nothing is necessarily wrong with the model."
    ),
    example=(
        "@tf.custom_gradient\n"
        "def clip_gradient(x):\n"
        "    def grad(dy):\n"
        "        return tf.clip_by_norm(dy, 1.0)\n"
        "    return tf.identity(x), grad\n"
        "\n"
        "# The gradient function is left out of the SavedModel:\n"
        "tf.saved_model.save(\n"
        "    module,\n"
        '    "export/",\n'
        "    options=tf.saved_model.SaveOptions(experimental_custom_gradients=False),\n"
        ")"
    ),
    use_instead=(
        "tf.saved_model.save(\n"
        "    module,\n"
        '    "export/",\n'
        "    options=tf.saved_model.SaveOptions(experimental_custom_gradients=True),\n"
        ")\n"
        "# For an unknown op: run gradcheck with the TensorFlow version (and the custom op\n"
        "# libraries) that wrote the model, or add --verify to ask TensorFlow itself."
    ),
)

VERIFICATION_DISAGREES = Rule(
    code="GC002",
    name="verification-disagrees",
    severity=Severity.ERROR,
    message="TensorFlow says {tensorflow!r} for {name}, gradcheck says {gradcheck!r}".format,
    summary="--verify: TensorFlow's own gradient disagrees with gradcheck's verdict",
    what_it_does=(
        "With `--verify`, gradcheck also asks TensorFlow for the gradient of the loss with "
        "respect to every trainable variable (`tf.gradients` in the traced graph, or "
        "`tf.GradientTape`) and sorts each into `None`, all zeros, or a real gradient. This "
        "rule reports every variable where TensorFlow and gradcheck's static verdict "
        "disagree."
    ),
    why_bad=(
        "TensorFlow is the judge: a disagreement means gradcheck's verdict is wrong for this "
        "model, in one direction or the other. It is a bug in gradcheck, not in your model."
    ),
    example=(
        "$ gradcheck export/ --loss loss --verify\n"
        "GC002 TensorFlow says 'none' for dense/kernel, gradcheck says 'ok'"
    ),
    use_instead=(
        "$ # Trust TensorFlow's verdict for the variables listed, and report the model:\n"
        "$ gradcheck export/ --loss loss --verify --format json > report.json"
    ),
)

VERIFICATION_DISAGREES_NEXT = (
    "TensorFlow is the judge: trust its verdict for these variables. This is a gradcheck bug: "
    "please report it with the command you ran, the model (or the code that builds it) if you "
    "can share it, and the output of the same command with --debug added."
)
"""What to do about a `--verify` disagreement: the hint of every GC002 finding."""

VERIFICATION_AGREES = Rule(
    code="GC003",
    name="verification-agrees",
    severity=Severity.INFO,
    message="TensorFlow's own gradients ({method}) agree with all {compared} verdicts".format,
    listed_without_verbose=True,
    summary="--verify: TensorFlow's own gradients agree with every verdict",
    what_it_does=(
        "With `--verify`, records that TensorFlow's own gradients (`None`, all zeros, or a "
        "real gradient) agree with gradcheck's verdict for every trainable variable."
    ),
    why_bad="Nothing is wrong: this finding records that the check was made, and how.",
    example="$ gradcheck export/ --loss loss --verify",
    use_instead="$ # Nothing to change: the static verdicts are confirmed by TensorFlow.",
)

VERIFICATION_FAILED = Rule(
    code="GC004",
    name="verification-failed",
    severity=Severity.WARNING,
    message="TensorFlow's own gradients could not be computed: {error}".format,
    summary="--verify: TensorFlow could not compute its own gradients",
    what_it_does=(
        "With `--verify`, reports why TensorFlow's own gradients could not be computed: for "
        "example a SavedModel whose `variables/` folder was removed cannot be loaded with "
        "`tf.saved_model.load`, or the loss function raised when called."
    ),
    why_bad=(
        "The static verdicts still stand, but they were not confirmed by TensorFlow this time."
    ),
    example=("$ rm -r export/variables\n$ gradcheck export/ --loss loss --verify"),
    use_instead=(
        "$ # Verify on a complete SavedModel, or on the script that builds the model:\n"
        "$ gradcheck build_model.py --loss loss --verify"
    ),
)

SAVED_MODEL_WITHOUT_SOURCE_LINES = Rule(
    code="GC005",
    name="saved-model-without-source-lines",
    severity=Severity.INFO,
    message=(
        "this SavedModel has no debug info, so cuts are located by op and name scope; "
        "save it with tf.saved_model.SaveOptions(save_debug_info=True) to get source lines"
    ).format,
    listed_without_verbose=True,
    summary="The SavedModel has no debug info: cuts are located by op and name scope only",
    what_it_does=(
        "Reports a SavedModel written without debug info "
        "(`debug/saved_model_debug_info.pb`), so gradcheck cannot tell which line of your "
        "code created an op. Cuts are then located by op name and name scope only, for "
        "example `functional_1/dense_1/Cast`, which usually still names the Keras layer."
    ),
    why_bad=(
        "Nothing is wrong with the model, but without a file and line you must find each cut "
        "by its op name, which is slow in a large model. `tf.saved_model.save` leaves debug "
        "info out unless asked."
    ),
    example='tf.saved_model.save(module, "export/")  # save_debug_info defaults to False',
    use_instead=(
        "tf.saved_model.save(\n"
        "    module,\n"
        '    "export/",\n'
        "    options=tf.saved_model.SaveOptions(save_debug_info=True),\n"
        ")"
    ),
)

# 1xx: dead trainable variables, by the reason their paths are cut.
ALLOWED_BY_BASELINE = "the baseline"


def allowed_by_pattern(pattern: str, reason: str) -> str:
    """Why a dead variable is accepted: the allow-dead pattern it matches, and why if given."""
    return f"allow-dead pattern {pattern!r}" + (f": {reason}" if reason else "")


def allowed_message(message: str) -> str:
    """The message of an accepted dead variable's finding, kept for the record."""
    return f"{message} (allowed)"


DEAD_VARIABLE_ALLOWED = Rule(
    code="GC007",
    name="dead-variable-allowed",
    severity=Severity.INFO,
    message="{name} is dead, but allowed by {why}".format,
    listed_without_verbose=True,
    summary="A dead variable is accepted by an allow-dead pattern or the baseline",
    what_it_does=(
        "Records each dead trainable variable that the configuration accepts: it matches an "
        "`allow-dead` glob in `[tool.gradcheck]`, or it was already dead when the baseline "
        "was written. Its own findings stay in the report, as information, and it no longer "
        "fails the run."
    ),
    why_bad=(
        "Nothing is wrong if the variable is dead on purpose (a pooler a fine-tuning head "
        "ignores); the record keeps the decision visible."
    ),
    example=(
        "# pyproject.toml\n"
        "[tool.gradcheck]\n"
        'allow-dead = { "*/pooler/*" = "the classification head ignores the pooler" }'
    ),
    use_instead="# Remove the pattern when the variable should train again.",
)


UNUSED_SUPPRESSION = Rule(
    code="GC008",
    name="unused-suppression",
    severity=Severity.WARNING,
    message="`# {comment}` suppresses nothing: no finding of this check is at its line".format,
    summary="A `# gradcheck: ignore` comment matches no finding",
    what_it_does=(
        "Reports each `# gradcheck: ignore` (or `# gradcheck: ignore[CODE]`) comment, in the "
        "files the report names, that suppresses no finding of this check: the variable it "
        "stood for trains now, or the comment names another code or another line. A finding is "
        "suppressed by a comment on its own line, on the line that creates its variable, or on "
        "the line of one of its cuts."
    ),
    why_bad=(
        "A stale suppression hides the next mistake made on that line, as ruff's unused-noqa "
        "rule warns."
    ),
    example=(
        "scale = tf.Variable(1.0)  # gradcheck: ignore[GC101]\n"
        "loss = tf.reduce_sum(x * scale)  # scale trains now"
    ),
    use_instead="scale = tf.Variable(1.0)",
)


def _left_out(names: tuple[str, ...], why: str) -> str:
    count = len(names)
    variables = "trainable variable is" if count == 1 else "trainable variables are"
    return f"{count} {variables} left out of the check: {_listed(names)}; {why}"


VARIABLES_LEFT_OUT = Rule(
    code="GC009",
    name="variables-left-out",
    severity=Severity.INFO,
    message=_left_out,
    summary="Trainable variables the script created that are not checked, and why",
    what_it_does=(
        "Lists, with `-v` and in JSON and SARIF, each trainable variable the script created "
        "that gradcheck does not check, with the fact that left it out. Only facts of "
        "TensorFlow's and of the objects do: a variable made by a layer that no object holds "
        "any more (a copy a library made and dropped, as TF-MOT's `quantize_model` drops its "
        "annotated clone), or made by a library (an optimizer's slot, a metric's total) "
        "outside every model, layer and module the script holds.\n\n"
        "Likeness never leaves a variable out: a target network, an EMA teacher or a second "
        "discriminator with the same names, shapes or values as a trained one is checked "
        "and reported with its own verdict."
    ),
    why_bad=(
        "Nothing is wrong: the record says why these variables are absent from the report, "
        "so an absence is never silent."
    ),
    example=(
        "base = make_model()\n"
        "model = tfmot.quantization.keras.quantize_model(base)\n"
        "# quantize_model makes an annotated clone of base and drops it"
    ),
    use_instead="# Nothing to change.",
)


def _language(snippet: str) -> str:
    return "console" if snippet.startswith("$ ") else "python"


def _through_cut(*, name: str, op_type: str, op_name: str, detail: str) -> str:
    # An op TensorFlow named after its type (`ArgMax`) is named once: "through ArgMax".
    op = op_type if op_name == op_type else f"{op_type} {op_name!r}"
    return f"{name} gets no gradient through {op}: {detail}"


def _cut_rule(**fields: Any) -> Rule:
    """A rule for the variables a kind of cut makes dead: an error, told in each dead
    variable's own story, and worded like every cut, `detail` being the cut's own explanation."""
    return Rule(
        severity=Severity.ERROR,
        message=_through_cut,
        told_in_story=True,
        **fields,
    )


STOP_GRADIENT_CUTS_VARIABLE = _cut_rule(
    code="GC101",
    name="stop-gradient-cuts-variable",
    reason=Reason.STOP_GRADIENT,
    summary="A tf.stop_gradient cuts every path from a trainable variable to the loss",
    what_it_does=(
        "Finds trainable variables whose every path to the loss crosses a `tf.stop_gradient` "
        "(a `StopGradient` op) or a `PreventGradient` op. The forward pass uses the "
        "variable's value, but the gradient tape treats the stopped tensor as a constant, so "
        "no gradient gets back to the variable.\n\n"
        "When the stop_gradient is removed and the variable would still be cut (by an integer "
        "cast, say), gradcheck says so too."
    ),
    why_bad=(
        "The optimizer never changes the variable. TensorFlow only warns "
        '"Gradients do not exist for variables [...] when minimizing the loss", or '
        "`tape.gradient` returns `None`, without naming the op that cut it.\n\n"
        "A common cause is wrapping a transformation of the weights in `tf.stop_gradient` "
        "to keep it out of the backward pass: that removes the weights from the backward "
        "pass too. One stop_gradient is enough to cut a path; wrapping every step in one "
        "changes nothing."
    ),
    example=(
        "def quantize(w):\n"
        "    return tf.round(w * 127.0) / 127.0\n"
        "\n"
        "# Meant: quantized weights forward, the gradient to w backward.\n"
        "w_q = tf.stop_gradient(quantize(w))\n"
        "y = tf.matmul(x, w_q)  # w never trains"
    ),
    use_instead=(
        "# Straight-through estimator: quantize(w) forward, the gradient reaches w unchanged.\n"
        "w_q = w + tf.stop_gradient(quantize(w) - w)\n"
        "y = tf.matmul(x, w_q)\n"
        "\n"
        "# If nothing needs the cut, remove the tf.stop_gradient. If w is meant to stay\n"
        "# fixed (a target network, a frozen embedding), say so:\n"
        "w = tf.Variable(initial_value, trainable=False)"
    ),
)

INTEGER_CAST_CUTS_VARIABLE = _cut_rule(
    code="GC102",
    name="integer-cast-cuts-variable",
    reason=Reason.INTEGER_DTYPE,
    summary="A trainable variable reaches the loss only through integer or bool tensors",
    what_it_does=(
        "Finds trainable variables whose every path to the loss passes through an integer or "
        "boolean tensor: a `tf.cast` to `tf.int32`, or a comparison such as `x > t` cast back "
        "to float to threshold. TensorFlow only carries gradient through floating-point and "
        "complex tensors; the gradient of a cast from an integer or a bool is `None`."
    ),
    why_bad=(
        "The cast looks harmless because the value is cast back to float a line later, but "
        "the path is cut at the integer tensor, so the variables before it never train."
    ),
    example=(
        "scale = tf.Variable(16.0)\n"
        "levels = tf.cast(features * scale, tf.int32)  # integer tensors carry no gradient\n"
        "recon = tf.cast(levels, tf.float32) / scale\n"
        "loss = tf.reduce_mean(tf.square(recon - features))\n"
        "\n"
        "mask = tf.cast(scores > threshold, tf.float32)  # a hard threshold: a bool tensor"
    ),
    use_instead=(
        "# Straight-through estimator: integer levels forward, identity gradient backward.\n"
        "scaled = features * scale\n"
        "levels = scaled + tf.stop_gradient(tf.floor(scaled) - scaled)\n"
        "recon = levels / scale\n"
        "\n"
        "# A soft threshold instead of a hard one:\n"
        "mask = tf.sigmoid((scores - threshold) / temperature)"
    ),
)

NON_DIFFERENTIABLE_OP_CUTS_VARIABLE = _cut_rule(
    code="GC103",
    name="non-differentiable-op-cuts-variable",
    reason=Reason.NON_DIFFERENTIABLE_OP,
    summary="An op with no gradient cuts every path from a trainable variable to the loss",
    what_it_does=(
        "Finds trainable variables whose every path to the loss crosses an op that TensorFlow "
        "registers as not differentiable, or whose registered gradient is always `None`: "
        "`tf.argmax` and `tf.argmin`, `tf.round`, `tf.floor`, `tf.math.ceil`, `tf.math.rint`, "
        "`tf.math.floordiv`, the bitwise ops (`tf.bitwise.bitwise_xor`, ...), comparisons "
        "(`tf.equal`, `tf.greater`, ...) and `tf.numpy_function`."
    ),
    why_bad=(
        "A piecewise-constant function has no useful derivative, so TensorFlow passes no "
        "gradient back through it, and every variable before it gets `None`. This often "
        "happens when a metric-like computation (a predicted class, a rounded count) is used "
        "as the loss."
    ),
    example=(
        "logits = model(x)\n"
        "pred = tf.cast(tf.argmax(logits, axis=-1), tf.float32)  # no gradient\n"
        "loss = tf.reduce_mean(tf.abs(pred - labels))\n"
        "\n"
        "count = tf.round(regressor(x))  # no gradient either\n"
        "\n"
        "y = tf.numpy_function(np.tanh, [h], tf.float32)  # NumPy is opaque to the tape"
    ),
    use_instead=(
        "# Soft-argmax: the expected class index under a softmax, differentiable.\n"
        "probs = tf.nn.softmax(logits / temperature, axis=-1)\n"
        "pred = tf.reduce_sum(probs * tf.range(num_classes, dtype=tf.float32), axis=-1)\n"
        "\n"
        "# Straight-through rounding: rounded forward, identity gradient backward.\n"
        "raw = regressor(x)\n"
        "count = raw + tf.stop_gradient(tf.round(raw) - raw)\n"
        "\n"
        "# tf.py_function is differentiable when its Python function runs TensorFlow ops.\n"
        "y = tf.py_function(tf.tanh, [h], tf.float32)"
    ),
)

INDEX_USE_CUTS_VARIABLE = _cut_rule(
    code="GC104",
    name="index-use-cuts-variable",
    reason=Reason.INDEX_OR_SHAPE_INPUT,
    summary="A trainable variable only selects or shapes, and never computes, the loss",
    what_it_does=(
        "Finds trainable variables that reach the loss only through inputs that select or "
        "shape rather than compute: the indices of `tf.gather` or `tf.gather_nd`, the shape "
        "of `tf.reshape` or `tf.fill`, `tf.shape(v)` or `tf.size(v)`, the predicate of a "
        "`tf.cond`, the condition of a `tf.while_loop`. The variable decides which elements, "
        "which branch or how many, and no gradient flows into such an input."
    ),
    why_bad=(
        "The loss is piecewise constant in the variable, so its gradient is `None` by "
        "construction. It is often a wiring mistake: the variable was meant to weight the "
        "computation, not to pick a piece of it."
    ),
    example=(
        "gate = tf.Variable(0.0)\n"
        "# gate only picks a branch: it never trains.\n"
        "out = tf.cond(gate > 0.0, lambda: expert_a(x), lambda: expert_b(x))"
    ),
    use_instead=(
        "# Mix the branches with a differentiable weight instead of picking one.\n"
        "weight = tf.sigmoid(gate)\n"
        "out = weight * expert_a(x) + (1.0 - weight) * expert_b(x)"
    ),
)

CUSTOM_GRADIENT_DROPS_VARIABLE = _cut_rule(
    code="GC105",
    name="custom-gradient-drops-variable",
    reason=Reason.CUSTOM_GRADIENT_NONE,
    summary="A tf.custom_gradient returns no gradient for a trainable variable",
    what_it_does=(
        "Finds trainable variables that reach the loss only through a `tf.custom_gradient` "
        "function whose gradient function returns `None` (or zeros) for the input or "
        "variable they arrive through. When the decorated function reads variables, the "
        "gradient function takes `variables=None` and must return "
        "`(input_gradients, variable_gradients)`, one entry per variable."
    ),
    why_bad=(
        "TensorFlow trusts a custom gradient completely: a `None` there is a cut, and zeros "
        "train nothing. Nothing warns that the gradient function forgot a variable."
    ),
    example=(
        "@tf.custom_gradient\n"
        "def dense(x):\n"
        "    y = tf.matmul(x, kernel)\n"
        "\n"
        "    def grad(dy, variables=None):\n"
        "        dx = tf.matmul(dy, kernel, transpose_b=True)\n"
        "        return dx, [None]  # kernel gets no gradient\n"
        "\n"
        "    return y, grad"
    ),
    use_instead=(
        "@tf.custom_gradient\n"
        "def dense(x):\n"
        "    y = tf.matmul(x, kernel)\n"
        "\n"
        "    def grad(dy, variables=None):\n"
        "        dx = tf.matmul(dy, kernel, transpose_b=True)\n"
        "        dkernel = tf.matmul(x, dy, transpose_a=True)\n"
        "        return dx, [dkernel]\n"
        "\n"
        "    return y, grad"
    ),
)

ZERO_GRADIENT_CUTS_VARIABLE = _cut_rule(
    code="GC106",
    name="zero-gradient-cuts-variable",
    reason=Reason.ZERO_GRADIENT,
    summary="A trainable variable's gradient exists but is always zero",
    what_it_does=(
        "Finds trainable variables whose gradient exists but is structurally zero on every "
        "path: through `tf.sign`, a multiplication by a constant 0 (`0.0 * v`, "
        "`tf.zeros_like(x) * v`), a `tf.where` whose constant condition never selects the "
        "variable, a `tf.stack` or `tf.concat` read only through constant slices or gathers "
        "that leave the variable's elements out, or a `tf.while_loop` whose body stops the "
        "gradient (a v2 `While` op returns zeros rather than `None` for a variable captured "
        "by such a body). Only constants written in the graph count."
    ),
    why_bad=(
        "This is the silent variant of a cut: TensorFlow returns a tensor of zeros, so no "
        '"Gradients do not exist" warning appears, the optimizer applies zero updates, and '
        "the variable stays at its initial value."
    ),
    example=(
        "threshold = tf.Variable(0.5)\n"
        "spikes = tf.sign(potential - threshold)  # d sign(x)/dx is 0 everywhere\n"
        "loss = tf.reduce_mean(tf.square(spikes - target))"
    ),
    use_instead=(
        "# A surrogate gradient: sign forward, identity gradient backward.\n"
        "z = potential - threshold\n"
        "spikes = z + tf.stop_gradient(tf.sign(z) - z)\n"
        "\n"
        "# Or a smooth approximation:\n"
        "spikes = tf.tanh(z / temperature)"
    ),
)

ASSIGNMENT_CUTS_VARIABLE = _cut_rule(
    code="GC107",
    name="assignment-cuts-variable",
    reason=Reason.ASSIGN,
    summary="A trainable variable reaches the loss only through a variable assignment",
    what_it_does=(
        "Finds trainable variables that reach the loss only through a variable assignment: "
        "`other.assign(f(w))`, `assign_add` or `assign_sub`, after which the loss reads "
        "`other`. An assignment writes state; the gradient does not flow from the variable "
        "that was written back into the value that was written."
    ),
    why_bad=(
        "The loss does depend on `w`, through the assigned variable, so this looks right, but "
        "`w` gets no gradient. It happens when weights are copied inside the loss function, "
        "or when state updated by assignment (moving statistics) is left trainable."
    ),
    example=(
        "@tf.function\n"
        "def loss_fn(x, y):\n"
        "    buffer.assign(w * 2.0)  # the loss reads buffer, not w\n"
        "    return tf.reduce_mean(tf.square(tf.matmul(x, buffer) - y))"
    ),
    use_instead=(
        "@tf.function\n"
        "def loss_fn(x, y):\n"
        "    scaled = w * 2.0  # keep the computation a tensor\n"
        "    return tf.reduce_mean(tf.square(tf.matmul(x, scaled) - y))\n"
        "\n"
        "# State updated by assignment (moving averages, copies) should not be trainable:\n"
        "moving_mean = tf.Variable(tf.zeros([units]), trainable=False)"
    ),
)

UNREACHED_WORDS = {
    Unreached.NEVER_READ: "the loss function never reads it",
    Unreached.RECEIVED_NOT_READ: "the loss function receives it but never reads it",
    Unreached.ONLY_ASSIGNED: "it is only used by an assignment, which feeds nothing the loss reads",
    Unreached.READ_NOT_REACHING: "it is read, but nothing computed from it reaches the loss",
    Unreached.FROZEN_BEFORE_TRACING: (
        "the loss function never reads it; it was read outside the loss, before tracing, and "
        "the value computed from it was frozen into the graph as a constant"
    ),
    Unreached.NOT_READ_BY_TAPE: (
        "the tape never saw it read: nothing between `with tf.GradientTape()` and the gradient "
        "request reads it, and a value computed from it before the tape opened is a constant "
        "to the tape"
    ),
    Unreached.CALLED_NOT_READ: (
        "its layer is called in the loss, but the call never reads it (a value computed from it "
        "outside call(), in build() or __init__, is computed once: a constant to the loss)"
    ),
    Unreached.ASSIGNED_AWAY: (
        "what is computed from it is only assigned to another variable, and an assignment "
        "passes no gradient to the value it stores"
    ),
    Unreached.READ_IN_DATASET: (
        "it is read only inside a tf.data pipeline, which runs outside the tape: what the "
        "dataset yields is data to the loss"
    ),
    Unreached.BEHIND_PYTHON_FUNCTION: (
        "the loss's graph reads no variable: the loss is computed from what a Python function "
        "(tf.numpy_function, tf.py_function) returns, and whatever Python computes there is "
        "outside the graph, a constant to the gradient"
    ),
    Unreached.CREATED_AGAIN: (
        "the line that created it ran again in a later call and made a new variable, which "
        "the loss reads in its place: this one is never read again"
    ),
}


def why_unreached(unreached: Unreached | None) -> str | None:
    """Why an unused variable never reaches the loss, in words."""
    return None if unreached is None else UNREACHED_WORDS[unreached]


def why_unused(verdict: VariableVerdict) -> str | None:
    """Why this unused variable never reaches the loss, with the line of a read before tracing."""
    if verdict.unreached is Unreached.ASSIGNED_AWAY and (
        verdict.assigned_to or verdict.assigned_at
    ):
        target = f" {verdict.assigned_to.name}" if verdict.assigned_to else " another variable"
        at = f" at {_file_line(verdict.assigned_at)}" if verdict.assigned_at else ""
        return (
            f"what is computed from it is only assigned to{target}{at}, and an assignment "
            "passes no gradient to the value it stores: the loss reads the copy, not it"
        )
    dataset = verdict.read_in_dataset
    if verdict.unreached is Unreached.READ_IN_DATASET and dataset is not None:
        at = f" at {_file_line(dataset[1])}" if dataset[1] is not None else ""
        return (
            f"it is read only inside tf.data: {dataset_api(dataset[0])}{at} computes with it in "
            "the dataset's own function, outside the tape, and what the dataset yields is data "
            "to the loss"
        )
    for unreached, attribute, words in _LOCATED_WORDS:
        where = getattr(verdict, attribute)
        if verdict.unreached is unreached and where is not None:
            return words.format(at=_file_line(where))
    return why_unreached(verdict.unreached)


# Why a variable never reaches the loss, told at the line where it was read or called:
# (the reason, the verdict's attribute that holds the line, the words).
_LOCATED_WORDS = (
    (
        Unreached.NOT_READ_BY_TAPE,
        "called_before_tape",
        "the tape never saw it read: its model or layer was called at {at}, before the tape "
        "opened, and the value computed there is a constant to the tape",
    ),
    (
        Unreached.BEHIND_PYTHON_FUNCTION,
        "read_at",
        "the loss's graph reads no variable: the loss is computed from what the Python "
        "function at {at} returns, and whatever Python computes there (a model called inside "
        "it included) is outside the graph, a constant to the gradient",
    ),
    (
        Unreached.NOT_READ_BY_TAPE,
        "read_before_tape",
        "the tape never saw it read: the value computed from it at {at}, before the tape "
        "opened, is a constant to the tape",
    ),
    (
        Unreached.FROZEN_BEFORE_TRACING,
        "read_before_tracing",
        "the loss function never reads it; it was read at {at}, outside the loss and before "
        "tracing, and the value computed there was frozen into the graph as a constant",
    ),
)


def _file_line(location: SourceLocation) -> str:
    return f"{PurePath(location.file).name}:{location.line}"


def _never_reaches(verdict: VariableVerdict) -> str:
    # The attribute that holds the variable (model.proj.kernel), when that says more than its name.
    name, path = verdict.name, verdict.path
    attribute = f" ({path})" if path and path != name else ""
    return f"{name}{attribute} never reaches the loss: {why_unused(verdict)}"


VARIABLE_NEVER_REACHES_LOSS = Rule(
    code="GC108",
    name="variable-never-reaches-loss",
    severity=Severity.ERROR,
    message=_never_reaches,
    told_in_story=True,
    summary="A trainable variable has no data path to the loss at all",
    what_it_does=(
        "Finds trainable variables that nothing the loss computes depends on: a Keras layer "
        "built but never called, or called but with its output unused; a variable read only "
        "by an assignment; a variable read only in another function."
    ),
    why_bad=(
        "The optimizer never changes the variable, Keras warns "
        '"Gradients do not exist for variables [...]" on every step, and the weights still '
        "cost memory and checkpoint space. It is usually a wiring bug: the layer was meant to "
        "be on the forward pass."
    ),
    example=(
        "class Classifier(keras.Model):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        '        self.hidden = keras.layers.Dense(64, activation="relu")\n'
        "        self.head = keras.layers.Dense(10)\n"
        "\n"
        "    def call(self, x):\n"
        "        h = self.hidden(x)\n"
        "        return self.head(x)  # h is unused: self.hidden never trains"
    ),
    use_instead=(
        "    def call(self, x):\n"
        "        h = self.hidden(x)\n"
        "        return self.head(h)\n"
        "\n"
        "# If the layer is meant to stay untrained, create it with trainable=False, delete\n"
        "# it, or add its variables to the allow-list."
    ),
)


def _leaves_tensorflow(reason: str, harmless: bool = False) -> str:
    if harmless:
        return (
            f"the loss cannot be traced into a graph ({reason}), but no variable loses its "
            "gradient there: TensorFlow's tape, run eagerly, finds that the value that leaves "
            "TensorFlow (a sampled index, a statistic) carries no gradient the loss needs"
        )
    return (
        f"the loss cannot be traced into a graph ({reason}): its value leaves TensorFlow here, "
        "and the gradient cannot follow it"
    )


HARMLESS_LEAVE_SEVERITY = Severity.INFO
"""GC109 where TensorFlow's tape says no variable dies of it: the verdicts are TensorFlow's own
and nothing needs fixing, so it informs (shown with --verbose and in every machine format,
failing no `--fail-on warning` run) instead of erring."""

VALUE_LEAVES_TENSORFLOW = Rule(
    code="GC109",
    name="value-leaves-tensorflow",
    severity=Severity.ERROR,
    message=_leaves_tensorflow,
    reason=Reason.LEFT_TENSORFLOW,
    whole_loss=True,
    summary="The loss leaves TensorFlow (.numpy(), float(), NumPy), so gradient cannot follow",
    what_it_does=(
        "Finds losses whose value leaves TensorFlow on the way: `.numpy()`, `float(t)` or "
        "`int(t)`, a NumPy function applied to a tensor. Such a function cannot be traced "
        "into a graph, so gradcheck runs it eagerly under `tf.GradientTape` and reports the "
        "line where the value left TensorFlow. It is an error only when a variable gets no "
        "gradient because of it; a value that leaves TensorFlow on a path that carries no "
        "gradient anyway (an action index sampled with NumPy from a policy's probabilities) "
        "is reported as an info."
    ),
    why_bad=(
        "A NumPy array or a Python float is a constant to the gradient tape. Every variable "
        "computed before that point gets `None`, and the optimizer reports "
        '"No gradients provided for any variable".'
    ),
    example=(
        "with tf.GradientTape() as tape:\n"
        "    pred = model(x)\n"
        "    loss = np.mean((pred.numpy() - y) ** 2)  # a NumPy float: the tape stops here\n"
        "grads = tape.gradient(loss, model.trainable_variables)  # every gradient is None"
    ),
    use_instead=(
        "loss = tf.reduce_mean(tf.square(pred - y))  # TensorFlow ops only, inside the tape"
    ),
)


def _independent_loss(loss_dtype: str | None) -> str:
    """GC110's message; `loss_dtype`: the loss's own dtype when it cannot carry gradient."""
    message = "no trainable variable can receive gradient from this loss"
    if loss_dtype is None:
        return message
    article = "an" if loss_dtype[:1] in "aeiou" else "a"
    return (
        f"{message}: it is {article} {loss_dtype} tensor, and TensorFlow's gradient of such a "
        "tensor is None for every variable (tape.gradient and tf.gradients return None; they "
        "do not raise)"
    )


LOSS_INDEPENDENT_OF_VARIABLES = Rule(
    code="GC110",
    name="loss-independent-of-variables",
    severity=Severity.ERROR,
    message=lambda loss_dtype=None: _independent_loss(loss_dtype),
    whole_loss=True,
    summary="The loss depends on no trainable variable",
    what_it_does=(
        "Reports a loss through which no trainable variable can receive gradient: every "
        "trainable variable is cut or never reaches it. Typical causes are a loss computed "
        "from the labels alone, a `tf.stop_gradient` around the model output, or a loss "
        "that ignores the prediction.\n\n"
        "A loss whose value is an integer, bool or string tensor (a rank from `tf.argsort`, a "
        "count, a `tf.cast` to `tf.int32`) is one too: TensorFlow returns None as the gradient "
        "of such a tensor for every variable. The message then names the loss's dtype, and "
        "each variable's story names the op where its value became one."
    ),
    why_bad=(
        "Training on this loss changes nothing; optimizers raise "
        '"No gradients provided for any variable".'
    ),
    example=(
        "def compute_loss(x, y):\n"
        "    pred = model(x, training=True)\n"
        "    return loss_object(y, y)  # compares the labels with themselves"
    ),
    use_instead=(
        "def compute_loss(x, y):\n"
        "    pred = model(x, training=True)\n"
        "    return loss_object(y, pred)"
    ),
)

OTHER_CUT = _cut_rule(
    code="GC111",
    name="other-cut",
    reason=Reason.OTHER,
    summary="Gradient cannot cross an op on every path from a trainable variable to the loss",
    what_it_does=(
        "Finds trainable variables whose every path to the loss crosses an op that passes no "
        "gradient for a reason the other 1xx rules do not cover; the message says which. "
        "Examples: an op type with no registered gradient function, for which `tf.gradients` "
        "raises `LookupError: No gradient defined for operation ...` (`tf.unique`), or the "
        "`mean` and `variance` inputs of `FusedBatchNormV3`, which never get a gradient."
    ),
    why_bad="The optimizer never changes the variable.",
    example=(
        "moving_mean = tf.Variable(tf.zeros([channels]))  # trainable by default\n"
        "moving_var = tf.Variable(tf.ones([channels]))\n"
        "y, _, _ = tf.compat.v1.nn.fused_batch_norm(\n"
        "    x, scale, offset, mean=moving_mean, variance=moving_var, is_training=False\n"
        ")"
    ),
    use_instead=(
        "moving_mean = tf.Variable(tf.zeros([channels]), trainable=False)\n"
        "moving_var = tf.Variable(tf.ones([channels]), trainable=False)\n"
        "\n"
        "# For an op with no gradient: give it one with @tf.custom_gradient, or compute the\n"
        "# same value with differentiable ops."
    ),
)


def _quantizer_message(name: str, estimator: str, **_: object) -> str:
    return (
        f"{name} gets no gradient: it is inside the quantized value of the straight-through "
        f"estimator {estimator}, which passes gradient to its input only"
    )


QUANTIZER_OUTSIDE_STRAIGHT_THROUGH = Rule(
    code="GC112",
    name="quantizer-outside-straight-through",
    severity=Severity.ERROR,
    message=_quantizer_message,
    told_in_story=True,
    summary="A variable inside the quantizer of a straight-through estimator has no loss term",
    what_it_does=(
        "Finds trainable variables cut by the `tf.stop_gradient` of a straight-through "
        "estimator, `x + tf.stop_gradient(q(x) - x)`, because they are inside `q`: a VQ-VAE "
        "codebook, the learned scale of a quantizer. The estimator uses `q(x)` forward and "
        "passes the gradient to `x` only, by design; nothing reaches the variables of `q`."
    ),
    why_bad=(
        "The codebook (or scale) never trains, and TensorFlow only says its gradient is "
        "`None`. A VQ-VAE needs a loss term of its own for the codebook, pulling the "
        "codebook vectors towards the encoder outputs; dropping it leaves the codebook at "
        "its initial values. Removing the stop_gradient would not help: the estimator "
        "would stop being one."
    ),
    example=(
        "nearest = tf.matmul(tf.one_hot(codes, k), codebook)\n"
        "quantized = z + tf.stop_gradient(nearest - z)  # codebook never trains\n"
        "loss = reconstruction_loss(decoder(quantized), x)"
    ),
    use_instead=(
        "quantized = z + tf.stop_gradient(nearest - z)\n"
        "codebook_loss = tf.reduce_mean((tf.stop_gradient(z) - nearest) ** 2)\n"
        "commitment_loss = tf.reduce_mean((z - tf.stop_gradient(nearest)) ** 2)\n"
        "loss = reconstruction_loss(decoder(quantized), x) + codebook_loss + beta * commitment_loss"
    ),
)


# 2xx: suspicious, but no variable is dead because of it.
def _about_variables(template: str, *, unnamed: str = "") -> Callable[..., str]:
    """A concern's message: `template` naming the concern's {variables} (`unnamed` when it knows
    none), the {op_type} it is about and its {detail}."""

    def message(concern: Concern, **_: object) -> str:
        return template.format(
            variables=", ".join(concern.variables) or unnamed,
            op_type=concern.op_type,
            detail=concern.detail,
        )

    return message


def _unused_stop(line: str | None, **_: object) -> str:
    """Name the unused result, and the unstopped tensor the code goes on with, from its line."""
    rewrite = assignment(line)
    if rewrite is None or rewrite[0] == rewrite[1]:
        return "this tf.stop_gradient has no effect: nothing uses its result"
    target, argument = rewrite
    if argument.isidentifier():
        return (
            f"this tf.stop_gradient has no effect: nothing uses its result {target} (the code "
            f"goes on with {argument} itself)"
        )
    return f"this tf.stop_gradient has no effect: nothing uses its result {target}"


STOP_GRADIENT_RESULT_UNUSED = Rule(
    code="GC201",
    name="stop-gradient-result-unused",
    severity=Severity.WARNING,
    message=_unused_stop,
    concern=ConcernKind.STOP_GRADIENT_UNUSED,
    summary="A tf.stop_gradient whose result nothing uses has no effect at all",
    what_it_does=(
        "Finds `tf.stop_gradient` calls whose result nothing uses. The code after them keeps "
        "using the unstopped tensor, usually because the two names differ by one letter."
    ),
    why_bad=(
        "The author believes the gradient is cut here, and it is not: the intent is silently "
        "lost, and the variables before it train through the unstopped tensor (or are cut "
        "somewhere else, for a different reason)."
    ),
    example=(
        "weights_fx_t = tf.multiply(268435456.0, weights_i)\n"
        "weight_fx_t = tf.stop_gradient(weights_fx_t)  # weight_fx_t is never used\n"
        "weights_fx = tf.cast(weights_fx_t, tf.int32)  # the unstopped tensor is"
    ),
    use_instead=(
        "# Use the result, or delete the line:\n"
        "weights_fx_t = tf.stop_gradient(tf.multiply(268435456.0, weights_i))\n"
        "weights_fx = tf.cast(weights_fx_t, tf.int32)"
    ),
)

STOP_GRADIENT_ON_CUT_PATH = Rule(
    code="GC202",
    name="stop-gradient-on-cut-path",
    severity=Severity.WARNING,
    message=(
        "this tf.stop_gradient is redundant: its input gets no gradient anyway, the path is "
        "already cut before it"
    ).format,
    concern=ConcernKind.STOP_GRADIENT_REDUNDANT,
    summary="A tf.stop_gradient on a path that is already cut before it is redundant",
    what_it_does=(
        "Finds `tf.stop_gradient` calls whose input gets no gradient anyway, because the path "
        "is already cut before them: by an integer cast, a non-differentiable op, or another "
        "`tf.stop_gradient`."
    ),
    why_bad=(
        "Redundant cuts hide the real one: removing the stop_gradient that looks responsible "
        "does not make the variable train. One `tf.stop_gradient` is enough to cut a path; "
        "you never need one after every step."
    ),
    example=(
        "weights_fx = tf.cast(weights_fx_t, tf.int32)\n"
        "weight_fx = tf.stop_gradient(weights_fx)  # redundant: int32 carries no gradient\n"
        "weights_fx_fault = tf.bitwise.bitwise_xor(weights_fx, fmap)\n"
        "weights_fl = tf.stop_gradient(tf.cast(weights_fx_fault, tf.float32))  # again"
    ),
    use_instead=(
        "def faulty(w):\n"
        "    fixed = tf.cast(w * 268435456.0, tf.int32)\n"
        "    return tf.cast(tf.bitwise.bitwise_xor(fixed, fmap), tf.float32) / 268435456.0\n"
        "\n"
        "# Straight-through estimator: faulty values forward, the gradient to weights_i.\n"
        "weights = weights_i + tf.stop_gradient(faulty(weights_i) - weights_i)"
    ),
)

STOP_GRADIENT_WITHOUT_TRAINABLE_INPUT = Rule(
    code="GC203",
    name="stop-gradient-without-trainable-input",
    severity=Severity.WARNING,
    message="this tf.stop_gradient has no effect: no trainable variable is upstream of it".format,
    concern=ConcernKind.STOP_GRADIENT_NO_EFFECT,
    summary="A tf.stop_gradient with no trainable variable upstream has no effect",
    what_it_does=(
        "Finds `tf.stop_gradient` calls with no trainable variable upstream: the input is "
        "computed only from constants, inputs, labels or non-trainable variables, so no "
        "gradient could flow through it anyway."
    ),
    why_bad=(
        "The result is the same with or without it, but the call suggests the author "
        "expected model output there: often the wrong tensor was wrapped (the labels rather "
        "than the target network's output)."
    ),
    example=(
        "target = tf.stop_gradient(labels * 0.9 + 0.05)  # labels carry no gradient anyway\n"
        "loss = tf.reduce_mean(tf.square(model(x) - target))"
    ),
    use_instead=(
        "target = labels * 0.9 + 0.05\nloss = tf.reduce_mean(tf.square(model(x) - target))"
    ),
)


VARIABLE_CUT_ON_SOME_PATHS = Rule(
    code="GC204",
    name="variable-cut-on-some-paths",
    severity=Severity.INFO,
    message=_about_variables(
        "{variables} trains through another path, but this {op_type} cuts one of its paths: "
        "{detail}"
    ),
    concern=ConcernKind.CUT_ON_SOME_PATHS,
    summary="A variable trains through one path while another of its paths is cut",
    what_it_does=(
        "Reports a trainable variable that gets gradient through at least one path while "
        "another of its paths to the loss is cut, for example a weight shared by two uses, "
        "one of them under `tf.stop_gradient`. Shown only with `--verbose`."
    ),
    why_bad=(
        "Usually intended (a target computed from the same weights, a momentum encoder), but "
        "sometimes a part of the model that the author believes trains the variable does "
        "not: the gradient comes only from the other path."
    ),
    example=(
        "queries = tf.gather(embedding, query_ids)\n"
        "keys = tf.stop_gradient(tf.gather(embedding, key_ids))  # this use passes nothing\n"
        "loss = contrastive_loss(queries, keys)"
    ),
    use_instead=(
        "# If both uses should train the embedding, drop the stop_gradient:\n"
        "keys = tf.gather(embedding, key_ids)\n"
        "# If the cut is intended, nothing needs to change."
    ),
)


LOSS_TERM_TRAINS_NOTHING = Rule(
    code="GC211",
    name="loss-term-trains-nothing",
    severity=Severity.WARNING,
    message=_about_variables(
        "this term of the loss trains nothing: the {op_type} cuts its gradient ({detail}), "
        "yet its value is added to the loss"
    ),
    concern=ConcernKind.DEAD_LOSS_TERM,
    summary="A term added to the loss passes no gradient: it changes the loss, never a weight",
    what_it_does=(
        "Finds a non-differentiable op (an argmax, a rounding, a comparison, a cast to an "
        "integer) that values of the model's trainable variables flow into, and whose result "
        "is then only scaled, summed, averaged or added to the other terms on its way to the "
        "loss. The variables train through the other terms, so no variable is dead, but this "
        "term's gradient is None: adding it to the loss changes the number reported, never a "
        "weight."
    ),
    why_bad=(
        "A penalty or an auxiliary objective written this way looks active: the loss curve "
        "moves with it, and nothing warns. The model trains as if the term were not there."
    ),
    example=(
        "ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))\n"
        "penalty = tf.reduce_mean(tf.cast(tf.argmax(logits, axis=-1), tf.float32))\n"
        "loss = ce + 0.1 * penalty  # the penalty trains nothing"
    ),
    use_instead=(
        "classes = tf.range(tf.shape(logits)[-1], dtype=tf.float32)\n"
        "soft_index = tf.reduce_sum(tf.nn.softmax(logits) * classes, axis=-1)\n"
        "loss = ce + 0.1 * tf.reduce_mean(soft_index)\n"
        "# A metric that should not train anything: compute it outside the loss."
    ),
)


CUT_IN_ONE_COND_BRANCH = Rule(
    code="GC205",
    name="cut-in-one-cond-branch",
    severity=Severity.WARNING,
    message=_about_variables("{variables}: {detail}", unnamed="an input"),
    concern=ConcernKind.CUT_IN_BRANCH,
    summary="A variable gets gradient only in some branches of a tf.cond or tf.switch_case",
    what_it_does=(
        "Finds trainable variables that get gradient in only some branches of a `tf.cond` or "
        "`tf.switch_case`: in the other branches their path is cut or absent. The variable "
        "trains only on the steps where the data takes the branches that use it."
    ),
    why_bad=(
        "A variable that trains only for some inputs is easy to miss: the loss goes down, no "
        "warning appears, and the variable lags behind (or never moves, if the branch that "
        "uses it is rare)."
    ),
    example=(
        "bias = tf.Variable(0.0)\n"
        "out = tf.cond(\n"
        "    tf.reduce_mean(x) > 0.0,\n"
        "    lambda: dense(x) + bias,\n"
        "    lambda: dense(x) + tf.stop_gradient(bias),  # no gradient on these batches\n"
        ")"
    ),
    use_instead=("out = dense(x) + bias  # the same differentiable computation in every branch"),
)


VARIABLE_TRAINED_ONLY_BY_REGULARIZER = Rule(
    code="GC206",
    name="variable-trained-only-by-regularizer",
    severity=Severity.WARNING,
    message=_about_variables(
        "{variables} is reached only through a regularizer: {detail}; the loss itself never "
        "trains it, training only decays it"
    ),
    concern=ConcernKind.TRAINED_ONLY_BY_REGULARIZER,
    summary="A variable gets gradient only from a regularizer or an add_loss term",
    what_it_does=(
        "Checks a Keras model's objective twice: as Keras trains it (compiled losses plus "
        "`model.losses`) and with the compiled losses alone. A variable that gets gradient "
        "from the first but not from the second is reached only through a kernel "
        "regularizer, an activity regularizer or an `add_loss` term. Not when such a term "
        "combines it with a variable the data trains other than by adding them up (a "
        "trainable prior in a KL term with its posterior, a head's output under an activity "
        "regularizer): its gradient then follows what the data teaches, it does not only decay."
    ),
    why_bad=(
        "TensorFlow does give the variable a gradient, so Keras prints no warning, but that "
        "gradient only pulls it towards the regularizer's optimum (zero, for L2): the "
        "variable decays, it never learns anything from the data."
    ),
    example=(
        "pooled = layers.Dense(16, kernel_regularizer=keras.regularizers.L2(0.01),\n"
        '                      name="pooler")(sequence[:, 0])\n'
        "logits = layers.Dense(vocabulary)(sequence)  # the loss never uses `pooled`\n"
        'model = keras.Model(tokens, {"logits": logits, "pooled": pooled})'
    ),
    use_instead=(
        "# Use the pooled output in a loss, or drop the pooler from the model:\n"
        "model = keras.Model(tokens, logits)"
    ),
)


def _listed(names: tuple[str, ...], shown: int = 8) -> str:
    more = len(names) - shown
    listed = ", ".join(names[:shown])
    return f"{listed} and {more} more" if more > 0 else listed


def _never_optimized(
    names: tuple[str, ...], unreached: tuple[SourceLocation, ...] = (), **_: object
) -> str:
    count = f"{len(names)} trainable variables are" if len(names) > 1 else "a trainable variable is"
    later = "a later step may: gradcheck stops the script before one"
    if unreached:
        where = _listed(tuple(_file_line(location) for location in unreached), shown=3)
        later = (
            f"a later step may: gradcheck stopped the script when its step came around, "
            f"before it reached the gradient request{'s' if len(unreached) > 1 else ''} at {where}"
        )
    return (
        f"{count} given to no gradient request of the step checked, while others are: "
        f"{_listed(names)}; this step does not train them ({later})"
    )


def _frozen_given(names: tuple[str, ...], **_: object) -> str:
    return (
        f"non-trainable variables are given to this gradient request: {_listed(names)}; "
        "they get no update from it"
    )


TRAINABLE_VARIABLE_NOT_IN_CHECKED_STEP = Rule(
    code="GC207",
    name="trainable-variable-not-in-checked-step",
    severity=Severity.INFO,
    message=_never_optimized,
    summary="A trainable variable is given to no gradient request of the step checked",
    what_it_does=(
        "In `gradcheck run` and `watch()`, lists the trainable variables the script created "
        "that no `GradientTape.gradient`, `tf.gradients`, `Optimizer.minimize` or `Model.fit` "
        "of the checked step differentiates, while other variables are trained (for a Keras "
        "model's `train_step` checked as a model, its weights that no tape of the step "
        "lists). Shown only with `--verbose`.\n\n"
        "It is an info, worded as what is known: `gradcheck run` stops the script before a "
        "weight changes once its step reached every gradient request the script holds (a "
        "GAN's generator step after its critic's update is checked too), or before its loop "
        "comes around (`watch()` and the Keras callback, in the program's own process, stop "
        "at the first weight change), so it cannot know whether a later phase trains these "
        "variables (a teacher "
        "trained by its own `fit` for many batches first, a model pruned and fine-tuned in a "
        "later loop). A target network, a teacher or a model built only to show a layer's "
        "output rightly stays untrained. A variable the step's loss reads and would train, "
        "left out of every request, is the mistake worth a warning: GC213, unless the script "
        "holds gradient requests the step did not reach: a later request may train it, so it "
        "is told here, with the lines of those requests."
    ),
    why_bad=(
        "Often nothing: the variables are trained later, or are meant to stay fixed. When a "
        "trainable variable is never handed to any optimizer by the whole script, nothing "
        "updates it, and a network meant to stay fixed says so best by being non-trainable."
    ),
    example=(
        "teacher = make_network()\n"
        "student = make_network()\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = distill(student(x), tf.stop_gradient(teacher(x)))\n"
        "grads = tape.gradient(loss, student.trainable_variables)"
    ),
    use_instead=(
        "teacher = make_network()\n"
        "teacher.trainable = False  # not trained by this script, and it says so"
    ),
)


FROZEN_VARIABLE_GIVEN_TO_OPTIMIZER = Rule(
    code="GC208",
    name="frozen-variable-given-to-optimizer",
    severity=Severity.WARNING,
    message=_frozen_given,
    summary="A non-trainable variable is passed to a gradient request",
    what_it_does=(
        "In `gradcheck run`, lists the variables marked non-trainable (`trainable=False`, or a "
        "frozen Keras layer) that the script nevertheless passes to `tape.gradient` or an "
        "optimizer."
    ),
    why_bad=(
        "The variable list and the variables' own flags disagree: either the variable was "
        "meant to train and its layer is frozen by mistake, or the list was built by hand and "
        "includes statistics (batch-norm moving averages, counters) that an optimizer must "
        "not touch."
    ),
    example=(
        "variables = model.variables  # includes the batch-norm moving averages\n"
        "grads = tape.gradient(loss, variables)"
    ),
    use_instead="grads = tape.gradient(loss, model.trainable_variables)",
)


def _read_not_requested(names: tuple[str, ...], **_: object) -> str:
    which = f"{len(names)} trainable variables" if len(names) > 1 else "a trainable variable"
    return (
        f"this loss reads {which} that its gradient request does not list, nor does any "
        f"other of the step checked: {_listed(names)}; the loss depends on "
        f"{'them' if len(names) > 1 else 'it'}, and this step does not train "
        f"{'them' if len(names) > 1 else 'it'}"
    )


def _copies(copies: tuple[tuple[str, str], ...], **_: object) -> str:
    pairs = tuple(f"{copy} (= {source})" for copy, source in copies)
    which = (
        f"{len(copies)} trainable variables hold"
        if len(copies) > 1
        else "a trainable variable holds"
    )
    return (
        f"{which} the same values as variables a gradient request trains, and no request "
        f"trains them: {_listed(pairs)}; copies, such as a target network or an EMA teacher, "
        "that this step does not train (if they should learn, give them to a request)"
    )


COPY_NEVER_TRAINED = Rule(
    code="GC214",
    name="copy-never-trained",
    severity=Severity.INFO,
    message=_copies,
    listed_without_verbose=True,
    summary="A trainable variable no request trains holds the values of one that a request trains",
    what_it_does=(
        "In `gradcheck run`, names the trainable variables that no gradient request lists and "
        "whose values, when the step asks for gradients and before any weight changes, equal "
        "those of a variable a request lists: a target network given the online network's "
        "weights (`set_weights`, `clone_model`), an EMA teacher. A constant value (a zero "
        "bias) counts only with a copied weight of the same layer.\n\n"
        "They are told, not hidden, and not as GC207 or GC213 warnings: the values say they "
        "were copied, and a copy is usually updated by assignment, not by gradient."
    ),
    why_bad=(
        "Nothing is wrong when the copy is a target network or a teacher. If it was meant to "
        "train (a second network built from the same seeded builder), give it to a request."
    ),
    example=(
        "target_actor = get_actor()\n"
        "target_actor.set_weights(actor.get_weights())\n"
        "with tf.GradientTape() as tape:\n"
        "    y = reward + gamma * target_critic([next_state, target_actor(next_state)])\n"
        "    critic_loss = tf.reduce_mean(tf.square(y - critic([state, action])))\n"
        "grads = tape.gradient(critic_loss, critic.trainable_variables)"
    ),
    use_instead="# Nothing to change: target_actor follows actor by soft updates.",
)


def unlisted_fix(names: tuple[str, ...]) -> str:
    """What to write for variables a loss reads that no gradient request lists."""
    listed = " + ".join(f"[{name.rpartition('/')[2]}]" for name in names[:2])
    return (
        "add it to the variables of the request (tape.gradient(loss, "
        f"model.trainable_variables + {listed}), and the same list to apply_gradients); if it "
        "is meant to stay fixed, create it with trainable=False"
    )


VARIABLE_READ_BUT_NOT_REQUESTED = Rule(
    code="GC213",
    name="variable-read-but-not-requested",
    severity=Severity.WARNING,
    message=_read_not_requested,
    summary="A loss reads a trainable variable that no gradient request lists",
    what_it_does=(
        "In `gradcheck run`, names the trainable variables that a request's loss reads, and "
        "would train if they were listed, but that neither this request nor any other lists "
        "among the variables it differentiates (told apart from GC207's variables, which no "
        "loss of the step reads or trains: a teacher under tf.stop_gradient stays GC207)."
    ),
    why_bad=(
        "The loss depends on the variable, so it was meant to learn from it: a codebook, a "
        "temperature or a bias created outside the `keras.Model` is left out of "
        "`model.trainable_variables`, and the request silently skips it."
    ),
    example=(
        "codebook = tf.Variable(tf.random.normal([512, 64]))\n"
        "with tf.GradientTape() as tape:\n"
        "    loss = vq_loss(encoder(x), codebook)\n"
        "grads = tape.gradient(loss, encoder.trainable_variables)"
    ),
    use_instead=(
        "variables = encoder.trainable_variables + [codebook]\n"
        "grads = tape.gradient(loss, variables)\n"
        "optimizer.apply_gradients(zip(grads, variables))"
    ),
)


def _idle_training(api: str, model: str, frozen: int, **_: object) -> str:
    weights = f"its {frozen} weights" if frozen > 1 else "its weight"
    return (
        f"{api} trains nothing: {model} is compiled, but none of {weights} is trainable when "
        "it runs, so Keras asks for no gradient; Keras 3 reads `trainable` at every training "
        "call, not at compile time (a model frozen after its compile, for a GAN's combined "
        "model, is frozen for its own training too)"
    )


def idle_training_fix(model: str) -> str:
    """What to write for a Keras model frozen before its own training call."""
    return (
        f"set {model}.trainable = True before {model}'s own training call, and back to False "
        "before the call that must not train it (the combined model's)"
    )


KERAS_TRAINING_TRAINS_NOTHING = Rule(
    code="GC212",
    name="keras-training-trains-nothing",
    severity=Severity.WARNING,
    message=_idle_training,
    summary="A Keras fit or train_on_batch runs on a model with no trainable weight",
    what_it_does=(
        "In `gradcheck run`, notes each `fit` or `train_on_batch` of a compiled Keras 3 model "
        "whose weights are all frozen when the call runs: Keras then computes no gradient and "
        "changes no weight."
    ),
    why_bad=(
        "Keras 2 fixed a model's trainable weights when it was compiled, so a GAN froze its "
        "discriminator after `discriminator.compile()` and before building the combined "
        "model. Keras 3 reads `trainable` at every call: the same code freezes the "
        "discriminator for its own `train_on_batch` too, and it never learns, with only "
        '"The model does not have any trainable weights" on the console.'
    ),
    example=(
        'discriminator.compile(optimizer="adam", loss="binary_crossentropy")\n'
        "discriminator.trainable = False\n"
        "gan = keras.Model(z, discriminator(generator(z)))\n"
        'gan.compile(optimizer="adam", loss="binary_crossentropy")\n'
        "discriminator.train_on_batch(images, labels)  # trains nothing"
    ),
    use_instead=(
        "discriminator.trainable = True\n"
        "discriminator.train_on_batch(images, labels)\n"
        "discriminator.trainable = False\n"
        "gan.train_on_batch(noise, ones)"
    ),
)


def _intended_message(name: str, reason: str, **_: object) -> str:
    return f"{name} is not trained by this loss; {reason}"


NETWORK_NOT_TRAINED_BY_THIS_LOSS = Rule(
    code="GC209",
    name="network-not-trained-by-this-loss",
    severity=Severity.WARNING,
    message=_intended_message,
    told_in_story=True,
    summary="A whole sub-model is under one tf.stop_gradient: it looks intended",
    what_it_does=(
        "Finds a `tf.stop_gradient` over the whole output of a sub-model whose variables "
        "feed nothing else: every variable upstream of the stopped value is cut by that one "
        "stop_gradient, and no variable that trains is upstream of it. A knowledge-"
        "distillation teacher, a DQN target network, an EMA or momentum encoder and a "
        "frozen feature extractor all look like this. The variables are reported as not "
        "trained by this loss, with a warning instead of a dead-variable error. In "
        "`gradcheck run` the gradient request's own variable list says what the script "
        "trains: a variable it lists stays a dead-variable error, and the fix says to leave "
        "the network out of the request or to make it non-trainable."
    ),
    why_bad=(
        "Nothing is wrong if the sub-model is meant to stay fixed under this loss. It still "
        "counts as trainable, though: an optimizer given its variables gets no gradient for "
        "them, and a checker cannot tell a forgotten stop_gradient from an intended one. "
        "Saying so in the code keeps the report clean."
    ),
    example=(
        'teacher = keras.Sequential([...], name="teacher")\n'
        "soft_targets = tf.nn.softmax(tf.stop_gradient(teacher(x)))\n"
        "loss = keras.losses.kl_divergence(soft_targets, tf.nn.softmax(student(x)))"
    ),
    use_instead=(
        "teacher.trainable = False  # the teacher is not trained by this loss\n"
        "\n"
        "# or, in pyproject.toml:\n"
        "# [tool.gradcheck]\n"
        '# allow-dead = ["teacher/*"]'
    ),
)

VARIABLE_TRAINED_BY_ANOTHER_LOSS = Rule(
    code="GC210",
    name="variable-trained-by-another-loss",
    severity=Severity.WARNING,
    message=_intended_message,
    told_in_story=True,
    summary="Retired: a variable a gradient request lists and cannot train is an error",
    what_it_does=(
        "No longer raised; the code stays reserved. `gradcheck run` used to tell variables "
        "that one gradient request of the script lists but cannot train, while another "
        "request trains them (a GAN discriminator under the generator's loss), as a warning. "
        "A variable the script lists in a request is one it asked to train: it is now a "
        "dead-variable error of that request, and the fix names the request that trains it."
    ),
    why_bad=(
        "The optimizer of the request that lists the variable gets a `None` gradient for it "
        'on every step (Keras warns "Gradients do not exist for variables"): the variable '
        "list is wider than the loss."
    ),
    example=(
        "with tf.GradientTape() as tape:\n"
        "    g_loss = feature_matching(generator(noise), real)\n"
        "variables = generator.trainable_variables + discriminator.trainable_variables\n"
        "grads = tape.gradient(g_loss, variables)  # the discriminator gets None"
    ),
    use_instead="grads = tape.gradient(g_loss, generator.trainable_variables)",
)

_ALL = (
    GRAPH_NOT_FULLY_MODELLED,
    VERIFICATION_DISAGREES,
    VERIFICATION_AGREES,
    VERIFICATION_FAILED,
    SAVED_MODEL_WITHOUT_SOURCE_LINES,
    DEAD_VARIABLE_ALLOWED,
    UNUSED_SUPPRESSION,
    VARIABLES_LEFT_OUT,
    COPY_NEVER_TRAINED,
    STOP_GRADIENT_CUTS_VARIABLE,
    INTEGER_CAST_CUTS_VARIABLE,
    NON_DIFFERENTIABLE_OP_CUTS_VARIABLE,
    INDEX_USE_CUTS_VARIABLE,
    CUSTOM_GRADIENT_DROPS_VARIABLE,
    ZERO_GRADIENT_CUTS_VARIABLE,
    ASSIGNMENT_CUTS_VARIABLE,
    VARIABLE_NEVER_REACHES_LOSS,
    VALUE_LEAVES_TENSORFLOW,
    LOSS_INDEPENDENT_OF_VARIABLES,
    OTHER_CUT,
    QUANTIZER_OUTSIDE_STRAIGHT_THROUGH,
    STOP_GRADIENT_RESULT_UNUSED,
    STOP_GRADIENT_ON_CUT_PATH,
    STOP_GRADIENT_WITHOUT_TRAINABLE_INPUT,
    VARIABLE_CUT_ON_SOME_PATHS,
    CUT_IN_ONE_COND_BRANCH,
    LOSS_TERM_TRAINS_NOTHING,
    VARIABLE_TRAINED_ONLY_BY_REGULARIZER,
    TRAINABLE_VARIABLE_NOT_IN_CHECKED_STEP,
    FROZEN_VARIABLE_GIVEN_TO_OPTIMIZER,
    KERAS_TRAINING_TRAINS_NOTHING,
    VARIABLE_READ_BUT_NOT_REQUESTED,
    NETWORK_NOT_TRAINED_BY_THIS_LOSS,
    VARIABLE_TRAINED_BY_ANOTHER_LOSS,
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _ALL}

_RULES_BY_KEY: dict[str, Rule] = {
    **{rule.code.lower(): rule for rule in _ALL},
    **{rule.name: rule for rule in _ALL},
}
"""Every rule by its code (lower case) and by its name, as `--explain` takes them."""

RULE_BY_REASON: dict[Reason, Rule] = {rule.reason: rule for rule in _ALL if rule.reason is not None}
"""The rule for a dead variable, by the `Reason` of the cut."""

RULE_BY_CONCERN: dict[ConcernKind, Rule] = {
    rule.concern: rule for rule in _ALL if rule.concern is not None
}
"""The rule for each kind of concern the analysis raises."""


def rule_for_code(code_or_name: str) -> Rule:
    """The rule with this code (`GC101`) or name (`stop-gradient-cuts-variable`), in any case;
    GradcheckError naming the closest codes and names if there is none."""
    wanted = code_or_name.strip().lower().replace("_", "-")
    rule = _RULES_BY_KEY.get(wanted)
    if rule is not None:
        return rule
    import difflib  # only for a code that does not exist

    close = difflib.get_close_matches(wanted, _RULES_BY_KEY, n=3)
    # A code and a name of one rule can both be close: name each rule once.
    codes = dict.fromkeys(_RULES_BY_KEY[key].code for key in close)
    if codes:
        guess = "did you mean " + ", ".join(f"{c} ({RULES[c].name})" for c in codes) + "?"
    else:
        guess = f"known codes: {known_codes()}"
    raise GradcheckError(
        f"unknown rule {code_or_name.strip()!r}; {guess} "
        "(--explain all lists every rule by code and name)"
    )


def known_codes() -> str:
    """Every code, contiguous runs shortened: `GC001-GC005, GC101-GC111, ...`."""
    runs: list[list[str]] = []
    for code in sorted(RULES):
        if runs and _number(code) == _number(runs[-1][-1]) + 1:
            runs[-1].append(code)
        else:
            runs.append([code])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _number(code: str) -> int:
    match = re.fullmatch(r"GC(\d{3})", code)
    assert match is not None, code
    return int(match.group(1))

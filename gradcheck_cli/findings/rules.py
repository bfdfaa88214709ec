"""Every rule gradcheck reports, with its stable code and its documentation, in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.finding import Severity


@dataclass(frozen=True)
class Rule:
    """One rule. Codes are forever: never renumbered, never reused.

    `what_it_does` and `why_bad` are prose (paragraphs separated by a blank line, code in
    backticks); `example` shows the mistake and `use_instead` the fix, both as code. A snippet
    that starts with `$ ` is a shell session, anything else is Python.
    """

    code: str
    name: str
    severity: Severity
    summary: str
    what_it_does: str
    why_bad: str
    example: str
    use_instead: str


_ALL = (
    # 0xx: what gradcheck could not load, model or verify.
    Rule(
        code="GC001",
        name="graph-not-fully-modelled",
        severity=Severity.WARNING,
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
    ),
    Rule(
        code="GC002",
        name="verification-disagrees",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC003",
        name="verification-agrees",
        severity=Severity.INFO,
        summary="--verify: TensorFlow's own gradients agree with every verdict",
        what_it_does=(
            "With `--verify`, records that TensorFlow's own gradients (`None`, all zeros, or a "
            "real gradient) agree with gradcheck's verdict for every trainable variable."
        ),
        why_bad="Nothing is wrong: this finding records that the check was made, and how.",
        example="$ gradcheck export/ --loss loss --verify",
        use_instead="$ # Nothing to change: the static verdicts are confirmed by TensorFlow.",
    ),
    Rule(
        code="GC004",
        name="verification-failed",
        severity=Severity.WARNING,
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
    ),
    Rule(
        code="GC005",
        name="saved-model-without-source-lines",
        severity=Severity.INFO,
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
    ),
    # 1xx: dead trainable variables, by the reason their paths are cut.
    Rule(
        code="GC007",
        name="dead-variable-allowed",
        severity=Severity.INFO,
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
    ),
    Rule(
        code="GC101",
        name="stop-gradient-cuts-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC102",
        name="integer-cast-cuts-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC103",
        name="non-differentiable-op-cuts-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC104",
        name="index-use-cuts-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC105",
        name="custom-gradient-drops-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC106",
        name="zero-gradient-cuts-variable",
        severity=Severity.ERROR,
        summary="A trainable variable's gradient exists but is always zero",
        what_it_does=(
            "Finds trainable variables whose gradient exists but is structurally zero on every "
            "path: through `tf.sign`, `tf.zeros_like`, a multiplication by a constant 0, or a "
            "`tf.while_loop` whose body stops the gradient (a v2 `While` op returns zeros rather "
            "than `None` for a variable captured by such a body)."
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
    ),
    Rule(
        code="GC107",
        name="assignment-cuts-variable",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC108",
        name="variable-never-reaches-loss",
        severity=Severity.ERROR,
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
    ),
    Rule(
        code="GC109",
        name="value-leaves-tensorflow",
        severity=Severity.ERROR,
        summary="The loss leaves TensorFlow (.numpy(), float(), NumPy), so gradient cannot follow",
        what_it_does=(
            "Finds losses whose value leaves TensorFlow on the way: `.numpy()`, `float(t)` or "
            "`int(t)`, a NumPy function applied to a tensor. Such a function cannot be traced "
            "into a graph, so gradcheck runs it eagerly under `tf.GradientTape` and reports the "
            "line where the value left TensorFlow."
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
    ),
    Rule(
        code="GC110",
        name="loss-independent-of-variables",
        severity=Severity.ERROR,
        summary="The loss depends on no trainable variable",
        what_it_does=(
            "Reports a loss through which no trainable variable can receive gradient: every "
            "trainable variable is cut or never reaches it. Typical causes are a loss computed "
            "from the labels alone, a `tf.stop_gradient` around the model output, or a loss "
            "that ignores the prediction."
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
    ),
    Rule(
        code="GC111",
        name="other-cut",
        severity=Severity.ERROR,
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
    ),
    # 2xx: suspicious, but no variable is dead because of it.
    Rule(
        code="GC201",
        name="stop-gradient-result-unused",
        severity=Severity.WARNING,
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
    ),
    Rule(
        code="GC202",
        name="stop-gradient-on-cut-path",
        severity=Severity.WARNING,
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
    ),
    Rule(
        code="GC203",
        name="stop-gradient-without-trainable-input",
        severity=Severity.WARNING,
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
    ),
    Rule(
        code="GC204",
        name="variable-cut-on-some-paths",
        severity=Severity.INFO,
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
    ),
    Rule(
        code="GC205",
        name="cut-in-one-cond-branch",
        severity=Severity.WARNING,
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
        use_instead=(
            "out = dense(x) + bias  # the same differentiable computation in every branch"
        ),
    ),
    Rule(
        code="GC206",
        name="variable-trained-only-by-regularizer",
        severity=Severity.WARNING,
        summary="A variable gets gradient only from a regularizer or an add_loss term",
        what_it_does=(
            "Checks a Keras model's objective twice: as Keras trains it (compiled losses plus "
            "`model.losses`) and with the compiled losses alone. A variable that gets gradient "
            "from the first but not from the second is reached only through a kernel "
            "regularizer, an activity regularizer or an `add_loss` term."
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
    ),
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _ALL}

DEAD_VARIABLE_CODE_BY_REASON: dict[str, str] = {
    Reason.STOP_GRADIENT.value: "GC101",
    Reason.INTEGER_DTYPE.value: "GC102",
    Reason.NON_DIFFERENTIABLE_OP.value: "GC103",
    Reason.INDEX_OR_SHAPE_INPUT.value: "GC104",
    Reason.CUSTOM_GRADIENT_NONE.value: "GC105",
    Reason.ZERO_GRADIENT.value: "GC106",
    Reason.ASSIGN.value: "GC107",
    Reason.LEFT_TENSORFLOW.value: "GC109",
    Reason.OTHER.value: "GC111",
}
"""The finding code for a dead variable, by the `Reason` of the cut (a `Reason` value)."""


def rule_for_code(code: str) -> Rule:
    """The rule with this code, in any case (`gc101`); GradcheckError if there is none."""
    rule = RULES.get(code.strip().upper())
    if rule is None:
        raise GradcheckError(f"unknown rule code {code}; known codes: {known_codes()}")
    return rule


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

"""The fix for each kind of cut, as code the user can paste, with their own names."""

from __future__ import annotations

from dataclasses import replace

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, Unreached, VariableVerdict
from gradcheck_cli.differentiability.function_ops import PYTHON_FUNCTIONS, is_dataset_op
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.advice.overwrites import unread_output_fix
from gradcheck_cli.findings.advice.role_fixes import (
    _COUNTING,
    _EQUALITIES,
    _INDEXINGS,
    _PICKS,
    _SAMPLES,
    _SELECTIONS,
    _SORT_POSITIONS,
    _TRANSFORMS,
    _at,
    _listed,
    behind_python_fix,
    dataset_fix,
    dtype_conversion_fix,
    keep_it_real,
    left_tensorflow_fix,
    library_conversion,
    non_float_loss_fix,
    python_function_fix,
    ranking_fix,
    read_in_dataset_fix,
    rounded_index_fix,
    rounded_probability_fix,
)
from gradcheck_cli.findings.advice.selection import selection_use
from gradcheck_cli.findings.advice.thresholds import THRESHOLDS, soft_threshold, threshold_fix
from gradcheck_cli.findings.advice.transform_source import (
    Rewrite,
    estimator_inside,
    straight_through_rewrite,
)
from gradcheck_cli.findings.source import SourceLines, created_name, quoted_code
from gradcheck_cli.graph.model import SourceLocation, is_trainable_dtype
from gradcheck_cli.protos.missed_overrides import MISSED_OVERRIDE, MissedOverride

# Ops that transform values (quantize, round, flip bits): the straight-through estimator keeps
# the transformed value forward and passes the gradient through unchanged backward.


def python_name(verdict: VariableVerdict, source: SourceLines) -> str:
    """The name the user's code gives the variable, or the last part of its TensorFlow name."""
    return created_name(source, verdict.location) or verdict.name.split("/")[-1]


def variable_fix(
    verdict: VariableVerdict, source: SourceLines, loss_dtype: str | None = None
) -> str | None:
    """What to write instead, for a dead variable as a whole. `loss_dtype`: the loss's own
    dtype, when known."""
    name = python_name(verdict, source)
    if not verdict.blockers:
        owner = verdict.name.split("/")[-2] if verdict.name.count("/") >= 1 else None
        read = verdict.read_before_tracing
        if verdict.unreached is Unreached.FROZEN_BEFORE_TRACING and read is not None:
            if read.function in ("build", "__init__"):
                return (
                    f"compute the value from {name} in the layer's call(), not once at line "
                    f"{read.line} in {read.function}(), so that every call reads {name} itself"
                )
            return (
                f"compute the value from {name} inside the loss function (move line "
                f"{read.line} into it), so that every call reads {name} itself"
            )
        called, before = verdict.called_before_tape, verdict.read_before_tape
        # The tape's stories name the variable as its report does: the name the creating line
        # binds is a layer's or a model's when the variable is one of its weights.
        read = verdict.name
        if verdict.unreached is Unreached.NOT_READ_BY_TAPE and called is not None:
            return (
                f"move the call at {_quoted(source, called)} into the "
                "`with tf.GradientTape() as tape:` block, so that the tape records the forward "
                f"pass that reads {read}; if it is not meant to train, leave it out of the "
                "gradient request"
            )
        if verdict.unreached is Unreached.NOT_READ_BY_TAPE and before is not None:
            return (
                f"compute the value at {_quoted(source, before)} inside the "
                "`with tf.GradientTape() as tape:` block, or, for optimizer.minimize(loss_fn), "
                f"inside loss_fn: computed before, it reads {read} where the tape cannot see it, "
                "and the tape takes it for a constant"
            )
        if verdict.unreached is Unreached.NOT_READ_BY_TAPE:
            return (
                f"run the forward pass that reads {read} (the call of its model or layer) "
                "inside the `with tf.GradientTape() as tape:` block, or, for "
                "optimizer.minimize(loss_fn), inside loss_fn (a lambda that returns a value "
                "computed before is a constant), so that the tape records it; if it is not "
                "meant to train, leave it out of the gradient request"
            )
        if verdict.unreached is Unreached.CALLED_NOT_READ:
            weight = verdict.path if verdict.path not in (None, verdict.name) else name
            return (
                f"read {weight} in the layer's call(): compute what is derived from it there "
                "(not in build() or __init__, where it is computed once), so that each call "
                f"reads {weight} and the gradient reaches it; if the layer does not need it, "
                "delete it"
            )
        python = verdict.read_at
        if verdict.unreached is Unreached.BEHIND_PYTHON_FUNCTION and python is not None:
            return behind_python_fix(python, name)
        dataset = verdict.read_in_dataset
        if verdict.unreached is Unreached.READ_IN_DATASET and dataset is not None:
            return read_in_dataset_fix(dataset, name)
        again = verdict.variable.created_again
        if verdict.unreached is Unreached.CREATED_AGAIN and again is not None:
            return (
                f"create {name} once, outside the forward pass (in __init__ or build(), or "
                f"guarded by `if ... is None:`), not at {_quoted(source, again)} at every "
                "call: each call then reads the one variable that the gradient request lists"
            )
        if verdict.unreached is Unreached.ASSIGNED_AWAY:
            stored = verdict.assigned_to
            target = (
                (created_name(source, stored.location) or stored.name)
                if stored is not None
                else "the variable it is assigned to"
            )
            at = f" at line {verdict.assigned_at.line}" if verdict.assigned_at else ""
            return (
                f"use the value assigned{at} in the loss itself: {target} holds a copy, and "
                f"the gradient cannot follow a copy back to {name} (keep the assignment if "
                f"{target} must hold the value too)"
            )
        unread = (
            unread_output_fix(source, verdict.read_at)
            if verdict.unreached is Unreached.READ_NOT_REACHING
            else None
        )
        if unread is not None:
            return unread
        if owner is not None and verdict.unreached is Unreached.READ_NOT_REACHING:
            return (
                f"nothing the loss uses depends on layer {owner}'s output: pass that output on "
                "to the computation the loss is made from, or give it a loss term of its own "
                "(for a compiled model's extra output, compile(loss={...})), or remove the "
                "layer; if it is meant to stay untrained, set its trainable attribute to False"
            )
        attribute = created_name(source, verdict.location)
        # A layer's weight: its path names the layer's attribute, or Keras recorded its layer.
        a_layer = verdict.path not in (None, verdict.name) or verdict.variable.layer is not None
        if owner is not None and attribute is not None and a_layer:
            return (
                f"call {attribute} in the forward pass, or delete it; if it is meant to stay "
                f"untrained, set {attribute}.trainable = False"
            )
        if owner is not None and attribute is None:
            return (
                f"call the layer {owner} in the forward pass, or delete it; if it is meant to "
                "stay untrained, set its trainable attribute to False"
            )
        return (
            f"use {name} in the computation of the loss, or delete it; if it is meant to stay "
            "untrained, create it with trainable=False"
        )
    if verdict.blockers[0].reason is Reason.LEFT_TENSORFLOW:
        return left_tensorflow_fix(verdict.blockers[0])
    if verdict.blockers[0].op_type == "NoGradient":  # TensorFlow's verdict, no cut seen: no fix
        return None
    datasets = [b for b in verdict.blockers if is_dataset_op(b.op_type)]
    if datasets:
        return dataset_fix(datasets[0], name, source.line(datasets[0].location))
    functions = [b for b in verdict.blockers if b.op_type in PYTHON_FUNCTIONS]
    if functions:
        return python_function_fix(functions[0], name)
    missed = missed_override_fix(verdict)
    if missed is not None:
        return missed
    types = {b.op_type for b in verdict.blockers}
    non_float = (
        loss_dtype if loss_dtype is not None and not is_trainable_dtype(loss_dtype) else None
    )
    positions = [
        b
        for b in verdict.blockers
        if b.op_type in _SORT_POSITIONS and b.reason is Reason.INTEGER_DTYPE
    ]
    if positions:
        return ranking_fix(positions[0], name)
    made = _made_the_loss(verdict) if non_float is not None else None
    if made is not None and len(verdict.blockers) == 1:
        return non_float_loss_fix(made, non_float)
    if types & _SAMPLES:
        return sample_fix(verdict, name, source)
    if types & _SELECTIONS:
        return selection_fix(verdict, name, source)
    if types & _EQUALITIES and types <= _COUNTING:
        return count_fix(verdict, name)
    conversion = library_conversion(verdict.blockers)
    if conversion is not None and types <= _TRANSFORMS:
        return dtype_conversion_fix(conversion, name)
    if types <= _TRANSFORMS:
        probabilities = rounded_probability_fix(verdict)
        if probabilities is not None:  # the hard values may be needed forward: an estimator
            return f"{probabilities}; otherwise, {straight_through(verdict, name, source, '')}"
        return straight_through(verdict, name, source)
    # A comparison that picks with tf.where or decides a tf.cond on its own line: the pick's
    # condition, the cond's predicate, is the same cut.
    lines = {b.location.line for b in verdict.blockers if b.op_type in THRESHOLDS and b.location}
    gates = {
        b.op_type
        for b in verdict.blockers
        if b.op_type in _PICKS
        or (b.reason is Reason.INDEX_OR_SHAPE_INPUT and b.location and b.location.line in lines)
    }
    if types <= THRESHOLDS | gates and types & THRESHOLDS:
        return threshold_fix(replace(verdict, blockers=_comparisons(verdict)), name, source)
    picked = [b for b in verdict.blockers if b.op_type in _INDEXINGS]
    if picked and types <= _TRANSFORMS | _INDEXINGS:
        return rounded_index_fix(picked[0], name)
    first = verdict.blockers[0]
    # Cuts of other kinds further on, at other lines, must change too: each is told, in the
    # path's order (a selection or a predicate the value only decides is the same cut's).
    rest = tuple(
        b
        for b in verdict.blockers[1:]
        if b.reason not in (first.reason, Reason.INDEX_OR_SHAPE_INPUT)
        and b.location != first.location
    )
    if not rest:
        return blocker_fix(first, name)
    further = variable_fix(replace(verdict, blockers=rest), source, loss_dtype)
    if further is None:
        return blocker_fix(first, name)
    return f"{blocker_fix(first, name)}; it is cut again further on: {further}"


def _comparisons(verdict: VariableVerdict) -> tuple[Blocker, ...]:
    return tuple(b for b in verdict.blockers if b.op_type in THRESHOLDS)


def _made_the_loss(verdict: VariableVerdict) -> PathStep | None:
    """The Cast where the variable's value became the non-float the loss is: the last cut on
    its path to the loss (a value that became a float again and then the loss's dtype would
    be cut again on the way)."""
    cuts = [step for step in verdict.route if step.cut is not None]
    last = cuts[-1] if cuts else None
    return last if last is not None and last.op_type == "Cast" else None


def _quoted(source: SourceLines, location: SourceLocation) -> str:
    """`line N (`code`)`: a line of the script, with its code when it can be read."""
    code = quoted_code(source.line(location) or "")
    return f"line {location.line} (`{code}`)" if code else f"line {location.line}"


def missed_override(
    verdict: VariableVerdict,
) -> tuple[PathStep | Blocker, MissedOverride] | None:
    """The first cut on the variable's route, else among its cuts, made under a
    gradient_override_map that does not key its op type, with that map (its items, file and
    line)."""
    for step in verdict.route:
        node = step.node
        # A stop_gradient under the map is meant to stop: the map is for the other cut.
        wanted = step.cut is not None and step.cut is not Reason.STOP_GRADIENT
        missed = node.attrs.get(MISSED_OVERRIDE) if node is not None and wanted else None
        if isinstance(missed, tuple):
            return step, missed
    for blocker in verdict.blockers:
        wanted = blocker.reason is not Reason.STOP_GRADIENT
        if wanted and isinstance(blocker.missed_override, tuple):
            return blocker, blocker.missed_override
    return None


def missed_override_fix(verdict: VariableVerdict) -> str | None:
    """A cut made under a gradient_override_map that does not key its op type (`"Floor"` over
    a tf.round): the map is the bug, and the key it needs is the op's type."""
    found = missed_override(verdict)
    if found is None:
        return None
    step, (mapping, _, line) = found
    where = f" at line {line}" if line else ""
    keys = ", ".join(f'"{key}": "{value}"' for key, value in mapping)
    values = {value for _, value in mapping}
    fix = (
        f"the gradient_override_map{where} keys {{{keys}}}, but the op that cuts is "
        f"{step.op_type}: TensorFlow looks a gradient up by the op's type, so the map never "
        f'applies to it; key it by "{step.op_type}"'
    )
    if len(values) == 1:
        fix += f' ({{"{step.op_type}": "{next(iter(values))}"}})'
    stops = [b for b in verdict.blockers if b.reason is Reason.STOP_GRADIENT]
    # A stop_gradient in series with the cut must go too; one on another path (a quantiser's
    # scale) is an alternative the map's key makes needless: left as it is.
    if stops and verdict.cuts_without_stop_gradient:
        fix += f", and remove the tf.stop_gradient{_at(stops[-1])}"
    elif stops:
        fix += f"; the tf.stop_gradient{_at(stops[-1])} on its other path can stay"
    return fix


def offered_rewrite(verdict: VariableVerdict, source: SourceLines) -> Rewrite | None:
    """The code rewrite that the fix of a dead variable offers, if any."""
    types = {b.op_type for b in verdict.blockers}
    if not types or verdict.blockers[0].reason is Reason.LEFT_TENSORFLOW:
        return None
    if types & _SELECTIONS:
        found = selection_use(verdict, source)
    elif types <= _TRANSFORMS:
        found = straight_through_rewrite(verdict, python_name(verdict, source), source)
    elif types <= THRESHOLDS:
        found = soft_threshold(verdict, source)
    else:
        return None
    return found if isinstance(found, Rewrite) else None


def straight_through(
    verdict: VariableVerdict, name: str, source: SourceLines, first: str | None = None
) -> str:
    """`w + tf.stop_gradient(transform(w) - w)` on the user's own expression, when it is sure
    to type-check; otherwise what to do, in words. `first`: what to say before it (by default,
    for a rounding, to keep the value real where the computation allows)."""
    first = keep_it_real(verdict) if first is None else first
    rewrite = straight_through_rewrite(verdict, name, source)
    stops = [b for b in verdict.blockers if b.reason is Reason.STOP_GRADIENT]
    only_stops = len(stops) == len(verdict.blockers)
    if isinstance(rewrite, str):
        estimator = estimator_inside(verdict)
        if estimator is not None:
            return (
                f"the straight-through estimator x + tf.stop_gradient(q(x) - x){estimator} "
                f"passes gradient to x only; {name}, inside q, needs a loss term of its own "
                "(for a codebook: the squared distance between tf.stop_gradient(x) and q(x))"
            )
        inside = _library_stop(stops)
        if only_stops and inside is not None:
            return library_stop_fix(inside, name)
        if only_stops:
            where = _at_lines(stops)
            return (
                f"remove the tf.stop_gradient{where} if {name} should learn from this loss; if "
                f"the cut is intended, make {name} non-trainable (trainable=False) or accept it "
                "with allow-dead"
            )
        lines = sorted({b.location.line for b in verdict.blockers if b.location is not None})
        # Cuts in several places (both branches of a tf.cond): each transform, by its line.
        transform = (
            f"each transform (lines {_listed([str(line) for line in lines])})"
            if len(lines) > 1 and any(b.function for b in verdict.blockers)
            else "the transform"
        )
        return first + (
            f"to use the transformed value forward and still train {name}, wrap {transform} "
            "in a straight-through estimator (the value forward, the identity gradient "
            f"backward); gradcheck writes no code for it, as {rewrite}"
        )
    line = rewrite.location.line
    where = f" (line {line})" if rewrite.target is not None else ""
    if only_stops:
        lead = (
            f"remove the tf.stop_gradient, or, to keep the transformed value in the forward "
            f"pass and still train {name}, use the straight-through estimator{where}"
        )
    else:
        lead = first + (
            f"to use the transformed value forward and still train {name}, use the "
            f"straight-through estimator{where}"
            + ("; no other tf.stop_gradient is needed" if stops else "")
        )
    if rewrite.target is not None:
        return f"{lead}:\n    {rewrite.target} = {rewrite.replacement}"
    return (
        f"{lead}: at line {line}, in place of {rewrite.original}, write\n    {rewrite.replacement}"
    )


def _at_lines(blockers: list[Blocker]) -> str:
    """ " at line N", or " at lines N and M" where the cuts sit on several lines (both branches
    of a tf.cond): every one must change."""
    lines = sorted({b.location.line for b in blockers if b.location is not None})
    if len(lines) > 1:
        return f" at lines {_listed([str(line) for line in lines])}"
    return _at(blockers[-1])


def count_fix(verdict: VariableVerdict, name: str) -> str:
    """Predictions rounded (or thresholded), then compared with the labels: the loss counts
    right answers, which has no gradient whatever is made soft."""
    equal = next(b for b in verdict.blockers if b.op_type in _EQUALITIES)
    return (
        f"the loss counts right answers (the {equal.op_type}{_at(equal)} compares rounded "
        "predictions with the labels), and a count has no gradient: train "
        f"{name} on a differentiable loss of the predictions themselves "
        "(tf.keras.losses.binary_crossentropy(labels, predictions) for 0/1 labels, a softmax "
        "cross-entropy for classes) and keep the count as a metric"
    )


def sample_fix(verdict: VariableVerdict, name: str, source: SourceLines) -> str:
    """A categorical sample: the index drawn has no gradient, whatever follows it. TensorFlow
    Probability's Categorical has its relaxed twin."""
    sample = next(b for b in verdict.blockers if b.op_type in _SAMPLES)
    code = source.line(sample.location) or ""
    if "Categorical(" in code and "tf.random" not in code:
        return (
            f"the Categorical sample{_at(sample)} draws an index, and a drawn index has no "
            f"gradient: to train {name} through the draw, sample "
            "tfd.RelaxedOneHotCategorical(temperature, logits=logits) (a one-hot that has a "
            "gradient) and weight the candidates with it (tf.linalg.matvec(table, soft, "
            "transpose_a=True) in place of tf.gather(table, index)); or keep the sample and "
            "train on a score-function (REINFORCE) loss, tf.stop_gradient(reward) * "
            "-distribution.log_prob(index)"
        )
    what = "tf.random.categorical" if "random.categorical" in code or not code else "sample"
    return (
        f"the {what}{_at(sample)} draws an index, and a drawn index has no "
        f"gradient: to train {name} through the draw, use a relaxed (Gumbel-softmax) sample, "
        "soft = tf.nn.softmax((logits - tf.math.log(-tf.math.log(tf.random.uniform(tf.shape("
        "logits))))) / temperature), and weight the candidates with it (tf.matmul(soft, "
        "table) in place of tf.gather(table, index)); or keep the sample and train on a "
        "score-function (REINFORCE) loss, tf.stop_gradient(reward) * "
        "-tf.nn.sparse_softmax_cross_entropy_with_logits(labels=index, logits=logits)"
    )


def selection_fix(verdict: VariableVerdict, name: str, source: SourceLines) -> str:
    """An argmax: a soft index only where its value is used as a number."""
    use = selection_use(verdict, source)
    if isinstance(use, Rewrite):
        return (
            f"to train {name}, use a differentiable soft-argmax in place of {use.original} "
            f"(line {use.location.line}); divide the scores by a temperature below 1 to "
            f"sharpen it:\n    {use.replacement}"
        )
    return use


def _library_stop(stops: list[Blocker]) -> Blocker | None:
    """The first stop_gradient a library made (the user's line only called it), if any."""
    return next((b for b in stops if b.location is not None and b.location.inside), None)


def library_stop_fix(stop: Blocker, name: str) -> str:
    """A stop_gradient inside a library's function or layer: not the user's to remove."""
    assert stop.location is not None and stop.location.inside is not None
    inside = stop.location.inside
    fix = (
        f"the tf.stop_gradient that cuts {name} is inside {inside}, called at line "
        f"{stop.location.line}: that code passes no gradient to this input, and it is not "
        f"yours to remove; compute this part of the loss with ops that pass gradient to "
        f"{name}"
    )
    if inside.endswith("softmax_cross_entropy_with_logits"):
        fix += " (tf.nn.softmax_cross_entropy_with_logits trains its labels, the v1 one does not)"
    return fix + f", or, if the cut is intended, create {name} with trainable=False"


def blocker_fix(blocker: Blocker, name: str) -> str:
    """What to do about one cut, in words: the code depends on the whole path."""
    where = f" at line {blocker.location.line}" if blocker.location else ""
    if blocker.reason is Reason.STOP_GRADIENT and _library_stop([blocker]) is not None:
        return library_stop_fix(blocker, name)
    fixes = {
        Reason.STOP_GRADIENT: f"remove the tf.stop_gradient{where}, or create {name} with "
        "trainable=False if the cut is intended",
        Reason.INTEGER_DTYPE: f"keep {name}'s path in floating point; for a threshold use a soft "
        "one (a sigmoid of the distance to the threshold), for quantization the straight-through "
        "estimator",
        Reason.NON_DIFFERENTIABLE_OP: f"replace the {blocker.op_type}{where} with a differentiable "
        "op, or use the straight-through estimator around it",
        Reason.INDEX_OR_SHAPE_INPUT: f"{name} only selects or shapes values{where}; if it must "
        "learn, let it weight values instead of picking them, else create it with trainable=False",
        Reason.CUSTOM_GRADIENT_NONE: f"return a gradient for {name} from the gradient function of "
        f"the tf.custom_gradient{where}",
        Reason.ZERO_GRADIENT: _zero_gradient_fix(blocker, name, where),
        Reason.ASSIGN: f"{name} reaches the loss only through an assignment{where}; read the "
        "variable in the loss instead of copying it",
        Reason.OTHER: f"{blocker.message}",
    }
    return fixes[blocker.reason]


def _zero_gradient_fix(blocker: Blocker, name: str, where: str) -> str:
    """A gradient that is zero by construction: the fix depends on what makes it zero."""
    if blocker.message.startswith("it is multiplied by a constant zero"):
        return (
            f"the term with {name} is multiplied by a constant zero{where}: give it a weight "
            f"that is not zero, or remove the term if it is not meant to train {name}"
        )
    if blocker.message.startswith("the condition of this tf.where"):
        return f"the tf.where{where} never selects {name}'s value: check its condition"
    if "constant slices or gathers" in blocker.message:
        return f"the slices of the stacked tensor{where} leave out {name}'s part: read it"
    return (
        f"the {blocker.op_type}{where} has a zero gradient everywhere; use a smooth stand-in (a "
        "tanh over a temperature for tf.sign) or the straight-through estimator"
    )

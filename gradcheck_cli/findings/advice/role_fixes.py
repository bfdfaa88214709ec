"""Fixes chosen by the role of one cut: a rank's positions, a rounded index, a value that left
TensorFlow, a loss that is not a float, a loss term that trains nothing."""

from __future__ import annotations

import re

from gradcheck_cli.analysis.verdicts import Blocker, PathStep, VariableVerdict
from gradcheck_cli.differentiability.function_ops import dataset_api
from gradcheck_cli.differentiability.reasons import LEAVE_WORDS, Reason
from gradcheck_cli.findings.advice.thresholds import THRESHOLDS
from gradcheck_cli.findings.advice.transform_source import ROUNDINGS
from gradcheck_cli.graph.model import SourceLocation

_TRANSFORMS = frozenset(
    {
        "Cast",
        "Round",
        "Floor",
        "Ceil",
        "Rint",
        "FloorDiv",
        "TruncateDiv",
        "BitwiseXor",
        "BitwiseAnd",
        "BitwiseOr",
        "Invert",
        "LeftShift",
        "RightShift",
        "StopGradient",
        "FakeQuantWithMinMaxArgs",
        "Sign",
    }
)
_SELECTIONS = frozenset({"ArgMax", "ArgMin"})
# tf.where's pick: no gradient to its condition (a comparison's result).
_PICKS = frozenset({"Select", "SelectV2"})
# A pick by position: its indices have no gradient.
_INDEXINGS = frozenset({"GatherV2", "GatherNd", "ResourceGather", "ResourceGatherNd", "OneHot"})
# A sort's or top_k's positions (tf.argsort, tf.math.top_k(...).indices): cut by their dtype,
# as their values output has a gradient.
_SORT_POSITIONS = frozenset({"TopKV2", "TopK"})
# A categorical sample (tf.random.categorical, its stateless form).
_SAMPLES = frozenset({"Multinomial", "StatelessMultinomial"})
# A count of right answers: predictions rounded or thresholded, then compared with the labels.
_EQUALITIES = frozenset({"Equal", "NotEqual"})
_COUNTING = _EQUALITIES | THRESHOLDS | {"Round", "Rint", "Floor", "Ceil", "Cast", "Sign"}


def rounded_index_fix(blocker: Blocker, name: str) -> str:
    """A value rounded or cast to an integer to pick by position (a gather, a one-hot): a
    position has no gradient, and a straight-through estimator cannot give it one."""
    return (
        f"the value made an integer picks by position{_at(blocker)}, and a position has no "
        f"gradient (nor does a straight-through estimator give it one): to train {name}, read the "
        "values with weights that depend on the real-valued position, interpolating between "
        "its neighbours (bilinear weights from the fractional part, as a spatial transformer "
        "samples) or with soft attention over the positions"
    )


def python_function_fix(blocker: Blocker, name: str) -> str:
    """A Python function has no gradient TensorFlow knows: its derivative must be given, or the
    function written with TensorFlow's ops; a straight-through estimator fits only an identity."""
    return (
        f"the Python function{_at(blocker)} runs outside TensorFlow's gradient: to train "
        f"{name}, write it with TensorFlow ops, or give it its real derivative (in TensorFlow 2, "
        "tf.custom_gradient around the call; in a TF1 graph, a gradient registered with "
        'tf.RegisterGradient and mapped to the op with graph.gradient_override_map({"PyFunc": '
        "name})); a straight-through estimator is right only where the function is an identity"
    )


def behind_python_fix(function: SourceLocation, name: str) -> str:
    """The loss computed from a Python function's results while its graph reads no variable:
    a model run inside the function is outside the graph and the tape."""
    return (
        f"the loss is computed from what the Python function at line {function.line} returns "
        "(a tf.numpy_function or tf.py_function has no gradient): if the model or layer that "
        f"holds {name} runs inside it, return only the data from that function and call the "
        "model on it inside the `with tf.GradientTape() as tape:` block; otherwise call that "
        "layer in the forward pass"
    )


def ranking_fix(blocker: Blocker, name: str) -> str:
    """The positions of a sort (a rank) have no gradient: a differentiable surrogate of the
    ranking trains the scores."""
    return (
        f"the indices of the sort or top_k{_at(blocker)} are positions, and a position has no "
        f"gradient: to train {name}, compute the loss from the scores with a differentiable "
        "surrogate of the ranking, such as a pairwise ranking loss (tf.nn.softplus(s_j - s_i) "
        "for each pair where item i should rank above item j) or a soft rank (the rank of item "
        "i as 1 plus the sum over the other items j of tf.sigmoid((s_j - s_i) / temperature)); "
        "keep the exact rank as a metric"
    )


def non_float_loss_fix(cast: PathStep, loss_dtype: str) -> str:
    """A loss cast to an integer (or bool) at its end: the cast is the whole problem."""
    at = f" at line {cast.location.line}" if cast.location else ""
    return (
        f"the tf.cast{at} makes the loss {_article(loss_dtype)} {loss_dtype} tensor, and no "
        "gradient comes out of one: return the loss as a float (leave the cast out, or cast to "
        "tf.float32); a rounded value for logging is a metric, computed beside the loss"
    )


def library_conversion(blockers: tuple[Blocker, ...]) -> Blocker | None:
    """The first cast to an integer dtype that a library's function made (the user's line only
    called it: a dtype conversion such as tf.image.convert_image_dtype's), if any."""
    return next(
        (
            b
            for b in blockers
            if b.op_type == "Cast"
            and b.reason is Reason.INTEGER_DTYPE
            and b.location is not None
            and b.location.inside is not None
        ),
        None,
    )


def dtype_conversion_fix(cast: Blocker, name: str) -> str:
    """A library call that converts the values to an integer dtype: the conversion is its
    purpose, so no estimator around it fits; the loss keeps the floating-point values."""
    assert cast.location is not None
    target = re.search(r"the Cast to (\w+) ", cast.message)
    dtype = target.group(1) if target else "an integer dtype"
    return (
        f"the cast to {dtype} is made inside {cast.location.inside}, called at line "
        f"{cast.location.line}: that call converts the values to integers, and integers carry "
        f"no gradient; to train {name}, compute the loss on floating-point values (convert to "
        f"tf.float32, or leave the conversion out of the loss), and convert to {dtype} only "
        "where integers are needed, beside the loss (to save or show the values)"
    )


def dataset_fix(blocker: Blocker, name: str, code: str | None) -> str:
    """A value computed inside tf.data (Dataset.reduce, a `for` loop over a dataset in a
    tf.function, a map that reads the variable): no gradient comes out of a dataset. `code`:
    the blamed line's code, when readable."""
    loop = _FOR_LOOP.match(code or "")
    if loop is not None:
        target, dataset = loop.group(1), loop.group(2)
        return (
            f"the tf.function runs the `for` loop over a dataset{_at(blocker)} inside tf.data "
            f"(as Dataset.reduce), and TensorFlow takes no gradient through a dataset: to train "
            f"{name}, loop over the dataset's iterator instead, `for {target} in iter({dataset}):`,"
            " which the tf.function runs as a tf.while_loop that the gradient goes through (or "
            "iterate outside the tf.function and pass each batch in as an argument)"
        )
    return (
        f"{dataset_api(blocker.op_type)}{_at(blocker)} computes with {name} inside tf.data, "
        f"and TensorFlow takes no gradient through a dataset: to train {name}, compute the loss "
        "from the dataset's elements with TensorFlow ops where the gradient is taken: iterate "
        "the dataset (in a tf.function, `for x in iter(ds):`) and add up each element's loss "
        "on tensors, or take a batch with ds.batch(n) and compute on the whole batch; keep "
        "tf.data for producing the data"
    )


# `for TARGET in DATASET:`, as the blamed line of a loop over a dataset reads.
_FOR_LOOP = re.compile(r"\s*for\s+(.+?)\s+in\s+(.+?)\s*:\s*(?:#.*)?$")


def read_in_dataset_fix(dataset: tuple[str, SourceLocation | None], name: str) -> str:
    """A variable that only a tf.data op reads (a Dataset.map function): the dataset's values
    are data to the loss, whatever they were computed from."""
    op_type, where = dataset
    at = f" at line {where.line}" if where is not None else ""
    return (
        f"{dataset_api(op_type)}{at} computes with {name} inside tf.data, and what a dataset "
        f"yields is data to the loss, not a value the gradient can follow back to {name}: to "
        f"train {name}, apply the computation that uses it to each batch inside the training "
        "step (within the `with tf.GradientTape() as tape:` block, or the model's call), and "
        "keep the dataset's transformations to what does not train"
    )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def left_tensorflow_fix(blocker: Blocker) -> str:
    """A value turned into a Python one: a truth value picks in Python, anything else is a
    number or an array the tape cannot follow."""
    if LEAVE_WORDS["__bool__"] in blocker.message:
        return (
            f"Python's max(), min() or if{_at(blocker)} picks one tensor by its value, and what "
            "it does not pick is not part of the loss, so its variables get no gradient: pick "
            "with TensorFlow ops (tf.maximum, tf.minimum, tf.where(condition, x, y) for an if), "
            "which give the other side a zero gradient; to train both sides, use a smooth "
            "maximum, tf.reduce_logsumexp(tf.stack([x, y]))"
        )
    if LEAVE_WORDS["predict"] in blocker.message:
        return (
            f"call the model itself, model(x), in place of model.predict(x){_at(blocker)}: "
            "predict() runs outside the tape and returns NumPy arrays, which the gradient "
            "cannot follow"
        )
    return "compute the loss with TensorFlow ops only: no .numpy(), float() or NumPy on tensors"


def _at(blocker: Blocker | PathStep) -> str:
    return f" at line {blocker.location.line}" if blocker.location else ""


_PROBABILITIES = frozenset({"Sigmoid", "Softmax"})


def rounded(verdict: VariableVerdict) -> tuple[PathStep, PathStep | None] | None:
    """The rounding that cuts the variable's route and the op that made what it rounds, when
    every cut is a rounding."""
    if not verdict.blockers or any(b.op_type not in ROUNDINGS for b in verdict.blockers):
        return None
    for index, step in enumerate(verdict.route):
        if step.cut is not None:
            producer = verdict.route[index - 1] if index else None
            return (step, producer) if step.op_type in ROUNDINGS else None
    return None


def rounded_probability_fix(verdict: VariableVerdict) -> str | None:
    """A probability (a sigmoid's, a softmax's) rounded to a hard 0 or 1 before the loss: the
    loss on the probabilities trains; the hard value is a metric."""
    found = rounded(verdict)
    if found is None or found[1] is None or found[1].op_type not in _PROBABILITIES:
        return None
    cut, producer = found
    api = ROUNDINGS[cut.op_type]
    return (
        f"the {api}{_at(cut)} makes hard values of probabilities (the {producer.op_type}"
        f"{_at(producer)}), and a hard value has no gradient: compute the loss on the "
        f"probabilities themselves, and keep the {api} of them as a metric outside the loss, "
        "if the loss can do without the hard values"
    )


def keep_it_real(verdict: VariableVerdict) -> str:
    """`if the loss can use the real value, remove the rounding; otherwise, `: the first choice
    where a rounding cuts, before a straight-through estimator that keeps it forward."""
    found = rounded(verdict)
    if found is None:
        return ""
    api = ROUNDINGS[found[0].op_type]
    return (
        f"if the computation after it can take the real value (a position, a scale), remove "
        f"the {api}{_at(found[0])} and keep the value real; otherwise, "
    )


_AS_METRIC = "; if it is a metric, compute it outside the loss"


def dead_term_fix(op_type: str) -> str:
    """What to write for a term of the loss that a non-differentiable op cuts, by what it does."""
    if op_type in _SELECTIONS:
        return (
            "if the term should train the model, compute it from the scores with a softmax (a "
            "soft index: tf.reduce_sum(tf.nn.softmax(scores) * tf.range(n, dtype=tf.float32), "
            f"axis=-1) in place of the argmax cast to a float){_AS_METRIC}"
        )
    if op_type in THRESHOLDS:
        return (
            "if the term should train the model, use a soft threshold (tf.sigmoid((a - b) / "
            f"0.1) in place of tf.cast(a > b, tf.float32)){_AS_METRIC}"
        )
    if op_type in ("Equal", "NotEqual"):
        return (
            "a count of right answers has no gradient: keep it as a metric outside the loss, "
            "and train on a differentiable loss of the scores (a cross-entropy)"
        )
    if op_type in _TRANSFORMS:
        return (
            "if the term should train the model, pass the gradient straight through the "
            f"{op_type} (x + tf.stop_gradient(q(x) - x), q being the transform){_AS_METRIC}"
        )
    return f"if the term should train the model, write it with differentiable ops{_AS_METRIC}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

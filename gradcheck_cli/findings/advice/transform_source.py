"""The user's own transform expression around a cut, and the straight-through rewrite of it."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from gradcheck_cli.analysis.verdicts import PathStep, VariableVerdict
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.op_expressions import called_name, creates, statement_at

# Ops that run a function: a cut inside is not on the top graph's route.
_CALLS = frozenset(
    {"If", "StatelessIf", "While", "StatelessWhile", "Case", "PartitionedCall"}
    | {"StatefulPartitionedCall"}
)
# Operands that `x - w` and `w + x` leave intact without parentheses.
_TIGHT = (ast.Call, ast.Name, ast.Attribute, ast.Subscript, ast.Constant)
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.MatMult, ast.Pow)


# What a rewrite does (the words `--fix` reports it with).
STRAIGHT_THROUGH = "the straight-through estimator"
SOFT_ARGMAX = "a soft-argmax"
SOFT_THRESHOLD = "a soft threshold"
STOP_REMOVED = "the tf.stop_gradient removed"


@dataclass(frozen=True)
class Rewrite:
    """Write `replacement` in place of the expression `original`, which starts at `location`
    (at `column`, in UTF-8 bytes as `ast` counts, when known); `what` it does."""

    location: SourceLocation
    original: str
    replacement: str
    what: str
    target: str | None = None  # the assigned name, when `original` is a statement's whole value
    column: int | None = None


@dataclass(frozen=True)
class _Frame:
    file: str
    line: int
    function: str | None


def straight_through_rewrite(
    verdict: VariableVerdict, name: str, source: SourceLines
) -> Rewrite | str:
    """`name + tf.stop_gradient(transform - name)` in place of the user's transform, or why
    gradcheck cannot write it for sure.

    The transform runs from the variable read through the last cut, and on through ops whose
    other inputs are constants, while the value keeps the variable's shape and dtype. Where the
    call frames of its last op and of the op after it part is the user's line; the call into
    the frame below (e.g. `quantize(...)`), or the op's own expression, is the transform.
    """
    found = _route_rewrite(verdict, name, source)
    if isinstance(found, Rewrite):
        return found
    return (
        _elementwise_rewrite(verdict, name, source) or _rounding_rewrite(verdict, source) or found
    )


# Roundings a straight-through expression can wrap on their own argument, as
# `x + tf.stop_gradient(tf.round(x) - x)`: the rounded value forward, x's gradient backward.
ROUNDINGS = {"Round": "tf.round", "Floor": "tf.floor", "Ceil": "tf.math.ceil"}
ROUNDINGS["Rint"] = "tf.math.rint"  # each rounding op by the API that makes it
# Arguments that can be written twice without computing anything twice.
_PLAIN = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant)


def _rounding_rewrite(verdict: VariableVerdict, source: SourceLines) -> Rewrite | None:
    """The straight-through rounding on the rounding's own argument, when one rounding op is
    every cut and its argument is a plain name (`probs`, `self.scores[0]`): the same code for
    every variable behind it."""
    ops = {b.op for b in verdict.blockers}
    step = next((s for s in verdict.route if s.cut is not None), None)
    if len(ops) != 1 or step is None or step.op_type not in ROUNDINGS or step.op not in ops:
        return None
    if step.location is None or step.function is not None:
        return None
    expression = expression_at(source, step.location, step.op_type)
    call = expression[0] if expression is not None else None
    if not isinstance(call, ast.Call) or len(call.args) != 1 or call.keywords:
        return None
    argument = call.args[0]
    if not all(isinstance(n, (*_PLAIN, ast.Load, ast.expr_context)) for n in ast.walk(argument)):
        return None
    text = source.segment(step.location.file, argument)
    if text is None or expression is None:
        return None
    rewrite = _rewrite(source, step.location.file, text, expression)
    return rewrite if isinstance(rewrite, Rewrite) else None


def _route_rewrite(verdict: VariableVerdict, name: str, source: SourceLines) -> Rewrite | str:
    route = verdict.route
    cuts = [index for index, step in enumerate(route) if step.cut is not None]
    shape = verdict.shape
    if not cuts or shape is None or None in shape:
        return f"{name}'s path to the loss or its shape is not known"
    end = cuts[-1]
    if route[end].op_type in _CALLS:
        where = _at(route[end].location)
        return f"the cut is inside a function (a tf.cond branch, a loop body) called{where}"
    while end + 2 < len(route) and _extends(route[end], route[end + 1], verdict):
        end += 1
    mixed = [b for a, b in zip(route, route[1 : end + 1], strict=False) if not _alone(a, b)]
    if mixed:
        return f"the transform mixes {name} with other tensors ({mixed[0].op_type})"
    last, after = route[end], route[min(end + 1, len(route) - 1)]
    if last.node is None or not last.node.output_shapes:
        return "the shapes along its path are not known"
    if not _keeps(last, verdict):
        return f"the cut value is not of {name}'s shape {list(shape)} and dtype {verdict.dtype}"
    if last is after or last.location is None or after.location is None:
        return "the source lines of the transform are not known"
    line, callee = _parting(_frames(last.location), _frames(after.location))
    expression = _expression(source, line, callee, last.op_type)
    if expression is None:
        what = f"the call to {callee}" if callee else f"its {last.op_type}"
        return f"{what} is not found unambiguously on line {line.line}"
    node, parent, statement = expression
    if not _in_scope(verdict, name, line, node):
        return f"{name} is not known by that name at line {line.line}"
    return _rewrite(source, line.file, name, expression)


# Elementwise ops that keep their input's shape and dtype.
_ELEMENTWISE = frozenset({"Round", "Floor", "Ceil", "Rint", "Sign"})


def _elementwise_rewrite(
    verdict: VariableVerdict, name: str, source: SourceLines
) -> Rewrite | None:
    """The rewrite of the one cut when it is an elementwise op written on the variable itself
    (`tf.round(threshold)`), wherever it is (a tf.cond branch, a loop body)."""
    if len(verdict.blockers) != 1:
        return None
    blocker = verdict.blockers[0]
    where = blocker.location
    if blocker.op_type not in _ELEMENTWISE or where is None:
        return None
    line = _Frame(where.file, where.line, where.function)
    expression = _expression(source, line, None, blocker.op_type)
    if expression is None or not isinstance(expression[0], ast.Call):
        return None
    call = expression[0]
    if len(call.args) != 1 or call.keywords or ast.unparse(call.args[0]) != name:
        return None
    rewrite = _rewrite(source, where.file, name, expression)
    return rewrite if isinstance(rewrite, Rewrite) else None


def _rewrite(
    source: SourceLines, file: str, name: str, expression: tuple[ast.expr, ast.AST, ast.stmt]
) -> Rewrite | str:
    node, parent, statement = expression
    inner = node
    if isinstance(node, ast.Call) and called_name(node.func) == "stop_gradient" and node.args:
        inner = node.args[0]
    original = source.segment(file, node)
    transform = _text(source, file, inner)
    if original is None or transform is None:
        return f"the source of line {node.lineno} is not readable"
    if not isinstance(inner, _TIGHT) and not (
        isinstance(inner, ast.BinOp) and isinstance(inner.op, _ARITHMETIC)
    ):
        transform = f"({transform})"
    replacement = f"{name} + tf.stop_gradient({transform} - {name})"
    target = None
    whole = isinstance(statement, ast.Assign) and statement.value is node
    if whole and isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = source.segment(file, statement.targets[0])
    elif not isinstance(parent, (ast.Call, ast.keyword, ast.Assign, ast.Return, ast.Tuple)):
        replacement = f"({replacement})"
    return Rewrite(
        SourceLocation(file, node.lineno), original, replacement, STRAIGHT_THROUGH, target
    )


def _keeps(step: PathStep, verdict: VariableVerdict) -> bool:
    """True if the step's value has the variable's shape and dtype."""
    node = step.node
    if node is None or not node.output_shapes or not node.output_dtypes:
        return False
    return (
        node.output_shapes[0] == tuple(verdict.shape or ())
        and node.output_dtypes[0] == verdict.dtype
    )


def _extends(step: PathStep, following: PathStep, verdict: VariableVerdict) -> bool:
    """True if `following` goes on transforming `step`'s value with constants only (past the
    last cut, a product with data would change the gradient the estimator passes)."""
    return (
        following.cut is None
        and _keeps(following, verdict)
        and _alone(step, following, constants_only=True)
    )


def _alone(step: PathStep, following: PathStep, *, constants_only: bool = False) -> bool:
    """True if `following` reads nothing but `step`'s value and values no trainable variable
    reaches (constants and, unless `constants_only`, placeholders, data): wrapping it takes no
    gradient from anything."""
    node = following.node
    if node is None or len(node.constant_inputs) != len(node.inputs):
        return False
    untrained = following.untrained_inputs
    if constants_only or len(untrained) != len(node.inputs):
        untrained = (False,) * len(node.inputs)
    return all(
        constant or free
        for ref, constant, free in zip(node.inputs, node.constant_inputs, untrained, strict=True)
        if ref.node != step.op
    )


def _frames(location: SourceLocation) -> list[_Frame]:
    every = [*location.callers, location]
    return [_Frame(f.file, f.line, f.function) for f in every]


def _parting(transform: list[_Frame], following: list[_Frame]) -> tuple[_Frame, str | None]:
    """The user's line where the transform's frames and the next op's part, and the function
    called there when the transform runs deeper (None: the op is on that line itself)."""
    shared = 0
    for mine, theirs in zip(transform, following, strict=False):
        if mine != theirs:
            break
        shared += 1
    if shared == len(transform):
        return transform[-1], None
    if shared == len(following):
        return following[-1], transform[shared].function
    below = transform[shared + 1].function if len(transform) > shared + 1 else None
    return transform[shared], below


def expression_at(
    source: SourceLines, location: SourceLocation, op_type: str
) -> tuple[ast.expr, ast.AST, ast.stmt] | None:
    """The one expression that creates an op of `op_type` on the statement at `location`, with
    its parent node and the statement."""
    return _expression(
        source, _Frame(location.file, location.line, location.function), None, op_type
    )


def _expression(
    source: SourceLines, line: _Frame, callee: str | None, op_type: str
) -> tuple[ast.expr, ast.AST, ast.stmt] | None:
    """The one expression on the statement at `line` that calls `callee` (or creates the op),
    with its parent node and the statement."""
    tree = source.tree(line.file)
    statement = statement_at(tree, line.line) if tree is not None else None
    if statement is None or callee == "<lambda>":
        return None
    parents = {
        child: parent for parent in ast.walk(statement) for child in ast.iter_child_nodes(parent)
    }
    if callee is not None:
        found = [
            node
            for node in ast.walk(statement)
            if isinstance(node, ast.Call) and called_name(node.func) == callee
        ]
    else:
        found = [node for node in ast.walk(statement) if creates(node, op_type)]
    on_line = [node for node in found if node.lineno <= line.line <= (node.end_lineno or 0)]
    if len(found) > 1 and len(on_line) == 1:
        found = on_line
    if len(found) != 1 or not isinstance(found[0], ast.expr):
        return None
    return found[0], parents[found[0]], statement


def _in_scope(verdict: VariableVerdict, name: str, line: _Frame, expression: ast.expr) -> bool:
    """True if `name` means the variable at `line`: the expression reads it, or it was created
    in the same function or at the top of the same file."""
    read = (node for node in ast.walk(expression) if isinstance(node, (ast.Name, ast.Attribute)))
    if any(ast.unparse(node) == name for node in read):
        return True
    created = verdict.location
    if created is None or created.file != line.file:
        return False
    return created.function in (line.function, "<module>")


def _text(source: SourceLines, file: str, node: ast.expr) -> str | None:
    text = source.segment(file, node)
    return ast.unparse(node) if text is not None and "\n" in text else text


def _at(location: SourceLocation | None) -> str:
    return f" at line {location.line}" if location is not None else ""


def estimator_inside(verdict: VariableVerdict) -> str | None:
    """ " at line N" when the variable is cut by the stop_gradient of a straight-through
    estimator `x + tf.stop_gradient(q(x) - x)`, else None: a Sub into the stop_gradient whose
    subtrahend is the other addend of the Add after it (the rule of
    analysis/stop_gradients.py, here for the cuts inside functions that it does not walk)."""
    route = verdict.route
    for before, step, after in zip(route, route[1:], route[2:], strict=False):
        if (
            step.op_type == "StopGradient"
            and before.op_type == "Sub"
            and after.op_type in ("AddV2", "Add")
            and _adds_back_subtrahend(before, after)
        ):
            return _at(step.location)
    return None


def _adds_back_subtrahend(difference: PathStep, total: PathStep) -> bool:
    if difference.node is None or total.node is None or len(difference.node.inputs) != 2:
        return False
    return difference.node.inputs[1] in total.node.inputs

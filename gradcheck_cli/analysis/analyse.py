"""Decide each variable's status from the two reachability passes, and find the cuts of the dead."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable

from gradcheck_cli.analysis.concerns import find_concerns
from gradcheck_cli.analysis.control_flow import ProgramIndex
from gradcheck_cli.analysis.cuts import CalledLayers, CutFinder
from gradcheck_cli.analysis.folded_shapes import unfold_shape_reads
from gradcheck_cli.analysis.reachability import Reachability
from gradcheck_cli.analysis.stop_gradients import stop_gradient_shapes
from gradcheck_cli.analysis.verdicts import (
    Analysis,
    Blocker,
    Concern,
    ConcernKind,
    Edge,
    NestedCall,
    PathStep,
    Reason,
    Status,
    SubgraphOp,
    Unreached,
    VariableVerdict,
)
from gradcheck_cli.differentiability.function_ops import PYTHON_FUNCTIONS
from gradcheck_cli.differentiability.rules import SHAPE_OPS, is_assign_op
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.arrays import BodyArrays
from gradcheck_cli.graph.flat_nodes import FlatNodes
from gradcheck_cli.graph.memory import without_cyclic_gc
from gradcheck_cli.graph.model import Node, Program, SourceLocation, TensorRef, Variable
from gradcheck_cli.graph.progress import Progress, silent


def analyse(
    program: Program, *, cuts_of_live: bool = False, progress: Progress = silent
) -> Analysis:
    """One verdict per candidate variable, in the program's variable order, and the concerns.

    `cuts_of_live`: also walk forward from every live variable to name the cuts on its other
    paths (GC204); one walk per variable, so only when asked for (`--verbose`). `progress`
    hears each pass.
    """
    # Function summaries recurse once per level of nesting (calls, conds, loops): deep models
    # need more than Python's default limit, and a crafted one must not reach the C stack's.
    depth = nesting_depth(program)
    if depth > MAX_NESTING:
        raise GradcheckError(
            f"malformed SavedModel or graph: its functions call each other {depth} levels deep; "
            "gradcheck "
            f"analyses at most {MAX_NESTING} levels of nested functions, conds and loops"
        )
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 50 * depth + 1000))
    with without_cyclic_gc():
        if depth <= _MAIN_THREAD_NESTING:
            return _analyse(program, cuts_of_live=cuts_of_live, progress=progress)
        return _on_a_deep_stack(
            lambda: _analyse(program, cuts_of_live=cuts_of_live, progress=progress)
        )


def _on_a_deep_stack(work: Callable[[], Analysis]) -> Analysis:
    """`work()` in a thread whose C stack has room for MAX_NESTING levels of the analysis's
    recursion (reserved, not used: the pages a thread never touches cost no memory)."""
    import threading

    done: list[Analysis] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as error:  # handed to the caller's thread as it is
            failed.append(error)

    previous = threading.stack_size(DEEP_STACK_BYTES)
    try:
        thread = threading.Thread(target=run, name="gradcheck-deep-analysis")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


def _analyse(program: Program, *, cuts_of_live: bool, progress: Progress) -> Analysis:
    progress("analysing: the paths that carry gradient to the loss")
    program = unfold_shape_reads(program)
    index = ProgramIndex(program)
    gradient_pass = Reachability(program, gradient=True, index=index)
    gradient = gradient_pass.top_masks()
    # Every path to the loss, gradient or not, tells a blocked variable from an unused one:
    # walked only when a variable gets no gradient (`top_masks` keeps what it walked).
    structural_pass = Reachability(program, gradient=False, index=index, like=gradient_pass)
    progress("analysing: each variable's verdict")
    finder = CutFinder(program, structural_pass)
    called_layers = CalledLayers(program)
    # Keras layers the loss function calls, as Keras records them: a weight of theirs is read.
    read_layers = {v.layer for v in program.variables if v.source is not None} - {None}
    python_function = _python_function_behind_the_loss(program, structural_pass)
    without_stop_gradient: dict[TensorRef, int] | None = None
    feeders: bytearray | None = None  # what an assignment may store (`_assign_feeders`)
    verdicts = []
    partly_cut: list[Concern] = []
    for number, variable in enumerate(program.variables, 1):
        progress("analysing: each variable's verdict", f"{number:,} of {len(program.variables):,}")
        source = variable.source
        unreached = None
        blockers: tuple[Blocker, ...] = ()
        route: tuple[PathStep, ...] = ()
        subgraph: tuple[Edge, ...] = ()
        nested: tuple[NestedCall, ...] = ()
        subgraph_ops: tuple[SubgraphOp, ...] = ()
        left_out = 0
        remaining: tuple[Blocker, ...] = ()
        side_cuts: tuple[Blocker, ...] = ()
        read_at = None
        assigned_to, assigned_at = None, None
        if not variable.trainable:
            status = Status.FROZEN
        elif source is None:
            status = Status.UNUSED
            if variable.created_again is not None:
                unreached = Unreached.CREATED_AGAIN
            elif variable.read_in_dataset is not None:
                unreached = Unreached.READ_IN_DATASET
            elif variable.read_before_tracing is not None:
                unreached = Unreached.FROZEN_BEFORE_TRACING
            elif variable.unread_by_tape:
                unreached = Unreached.NOT_READ_BY_TAPE
            elif variable.layer in read_layers or (
                variable.layer_called is not False and called_layers.called(variable.name)
            ):  # Keras's own record of the layer, else the name scopes of the calls
                unreached = Unreached.CALLED_NOT_READ
            elif python_function is not None:
                unreached, read_at = Unreached.BEHIND_PYTHON_FUNCTION, python_function.location
            else:
                unreached = Unreached.NEVER_READ
        elif gradient.get(source, 0):
            status = Status.OK
            if cuts_of_live:
                partly_cut += [
                    Concern(
                        kind=ConcernKind.CUT_ON_SOME_PATHS,
                        op=cut.op,
                        op_type=cut.op_type,
                        function=cut.function,
                        location=cut.location,
                        variables=(variable.name,),
                        detail=cut.message,
                    )
                    for cut in finder.cuts(source)
                    if cut.op_type not in SHAPE_OPS  # a shape read carries no gradient to cut
                ]
        elif structural_pass.top_masks().get(source, 0):
            status = Status.BLOCKED
            explanation = finder.explain(source)
            route, subgraph = explanation.route, explanation.edges
            nested, subgraph_ops = explanation.nested, explanation.ops
            left_out = explanation.left_out
            blockers, side_cuts = tuple(explanation.cuts), tuple(explanation.side_cuts)
            if any(b.reason is Reason.STOP_GRADIENT for b in blockers):
                if without_stop_gradient is None:
                    without_stop_gradient = Reachability(
                        program,
                        gradient=True,
                        ignore=frozenset({Reason.STOP_GRADIENT}),
                        index=index,
                        like=gradient_pass,
                    ).top_masks()
                if not without_stop_gradient.get(source, 0):
                    remaining = tuple(b for b in blockers if b.reason is not Reason.STOP_GRADIENT)
                else:
                    # A path that only stop_gradients cut: the other cuts (a comparison that
                    # feeds a tf.where condition) are not why the variable gets no gradient,
                    # but for a cut made under a gradient_override_map that misses its type:
                    # the map was meant to open that path.
                    blockers = tuple(
                        b
                        for b in blockers
                        if b.reason is Reason.STOP_GRADIENT or b.missed_override is not None
                    )
        else:
            status = Status.UNUSED
            unreached, read_at = _why_unused(program, source, index)
            if unreached is Unreached.READ_NOT_REACHING:
                if feeders is None:
                    feeders = _assign_feeders(structural_pass.index.of(program.top_body).arrays)
                stored = _assigned_away(program, source, structural_pass, feeders)
                if stored is not None:
                    unreached = Unreached.ASSIGNED_AWAY
                    assigned_to, assigned_at = stored
        verdicts.append(
            VariableVerdict(
                variable,
                status,
                blockers=blockers,
                unreached=unreached,
                route=route,
                subgraph=subgraph,
                nested=nested,
                subgraph_ops=subgraph_ops,
                subgraph_left_out=left_out,
                cuts_without_stop_gradient=remaining,
                side_cuts=side_cuts,
                read_at=read_at,
                assigned_to=assigned_to,
                assigned_at=assigned_at,
            )
        )
    judged = tuple(verdicts)
    progress("analysing: patterns that train less than intended")
    concerns = find_concerns(program, gradient_pass, structural_pass, judged)
    # A dead term is told once, not as a cut on some paths of each variable behind it.
    told = {c.op for c in concerns if c.kind is ConcernKind.DEAD_LOSS_TERM}
    concerns += tuple(c for c in partly_cut if c.op not in told)
    loss_dtype = program.top_body.input_dtype(program.loss)
    return Analysis(
        judged, concerns, stop_gradient_shapes(program, verdicts), loss_dtype=loss_dtype
    )


def _python_function_behind_the_loss(program: Program, paths: Reachability) -> Node | None:
    """The Python function op (tf.numpy_function) the loss is computed from, when the loss's
    graph reads no variable at all: what the loss depends on came out of Python."""
    if any(v.source is not None for v in program.variables):
        return None
    top = program.top_body
    masks = paths.top_masks()
    for n in top.nodes.numbers_of_types(PYTHON_FUNCTIONS):
        node = top.nodes.node(n)
        outputs = range(max(len(node.output_dtypes), 1))
        if any((masks.get(TensorRef(node.name, k), 0) or 0) & 1 for k in outputs):
            return node
    return None


def _why_unused(
    program: Program, source: TensorRef, index: ProgramIndex
) -> tuple[Unreached, SourceLocation | None]:
    """Why a variable the loss receives never reaches it, and where the loss first reads it."""
    readers = [node for node, _ in index.of(program.top_body).consumers.get(source, ())]
    # One entry per reading node, in the body's order (a node may read it twice).
    readers = list({node.name: node for node in readers}.values())
    if readers and all(is_assign_op(n.op_type) for n in readers):
        return Unreached.ONLY_ASSIGNED, None
    if readers:
        # Where it is read, not where it is assigned (a layer built by the step's first call
        # assigns its initial value there).
        reads = [n for n in readers if not is_assign_op(n.op_type)]
        located = [n.location for n in reads + readers if n.location is not None]
        return Unreached.READ_NOT_REACHING, located[0] if located else None
    return Unreached.RECEIVED_NOT_READ, None


MAX_NESTING = 10_000
"""Levels of nested functions (calls, cond branches, loop bodies) the analysis follows: real
models nest a few dozen at most; each level costs some frames of Python's stack. Past
_MAIN_THREAD_NESTING levels the analysis runs on a thread with a stack of DEEP_STACK_BYTES."""
_MAIN_THREAD_NESTING = 1000
DEEP_STACK_BYTES = 512 * 2**20


def nesting_depth(program: Program) -> int:
    """The longest chain of bodies calling one another from the top body, counted without
    recursion (a body that calls itself again counts once). Every function a node names
    counts, a loop's condition too: the structural pass walks into it as well."""
    callees = {name: body.nodes.functions_named() for name, body in program.bodies.items()}
    depth: dict[str, int] = {}
    stack = [(program.top, False)]
    on_path: set[str] = set()
    while stack:
        name, finished = stack.pop()
        if finished:
            on_path.discard(name)
            known = [depth[c] for c in callees.get(name, ()) if c in depth]
            depth[name] = 1 + max(known, default=0)
            continue
        if name in depth or name in on_path or name not in callees:
            continue
        on_path.add(name)
        stack.append((name, True))
        stack.extend((c, False) for c in callees[name] if c not in depth and c not in on_path)
    return depth.get(program.top, 1)


def _assign_types(flat: FlatNodes) -> set[int]:
    """The op type numbers of `flat` that assign to a variable."""
    return {n for n, op in enumerate(flat.op_table.values) if is_assign_op(op)}


def _assign_feeders(arrays: BodyArrays) -> bytearray:
    """Per tensor of the top body, 1 if `_assigned_away`'s walk from it can reach a value that
    an assignment stores: one backward pass for all the unused variables, so that a walk
    starts only where it can find something, and steps only onto tensors that lead there."""
    flat = arrays.flat
    assigns = _assign_types(flat)
    feeders = bytearray(arrays.tensor_count)
    if not assigns:
        return feeders
    dtypes = flat.signature_table.values
    op_types, signatures = flat.op_types, flat.signatures
    offsets, starts, tensors = arrays.offsets, arrays.input_start, arrays.input_tensors
    pending = []
    for n in range(len(flat)):
        if op_types[n] in assigns:
            for edge in range(starts[n] + 1, starts[n + 1]):  # the values, not the variable
                t = tensors[edge]
                if not feeders[t]:
                    feeders[t] = 1
                    pending.append(t)
    while pending:
        t = pending.pop()
        n = arrays.producer(t)
        # The walk goes on only past an op that assigns nothing, onto the outputs it declares.
        if n < 0 or op_types[n] in assigns or t - offsets[n] >= len(dtypes[signatures[n]]):
            continue
        for edge in range(starts[n], starts[n + 1]):
            t = tensors[edge]
            if not feeders[t]:
                feeders[t] = 1
                pending.append(t)
    return feeders


def _assigned_away(
    program: Program, source: TensorRef, structural: Reachability, feeders: bytearray
) -> tuple[Variable | None, SourceLocation | None] | None:
    """The variable that a value computed from `source` is stored into, and where: an
    assignment passes no gradient to the value it stores, so the loss that reads the target
    does not reach `source`. The first such assignment in the order of a breadth-first walk
    from `source`; `feeders` (`_assign_feeders`) keeps the walk on the tensors that can lead
    to one, which leaves that order as it is: a tensor that leads to one is found only from
    another."""
    body = program.top_body
    arrays = structural.index.of(body).arrays
    flat = arrays.flat
    start = arrays.tensor(source)
    if start is None or not feeders[start]:
        return None
    assigns = _assign_types(flat)
    dtypes = flat.signature_table.values
    offsets, starts, edge_nodes = arrays.offsets, arrays.input_start, arrays.edge_nodes
    reader_start, reader_edges = arrays.reader_start, arrays.reader_edges
    queue = deque([start])
    seen = bytearray(arrays.tensor_count)
    seen[start] = 1
    while queue:
        t = queue.popleft()
        for edge in reader_edges[reader_start[t] : reader_start[t + 1]]:
            n = edge_nodes[edge]
            if flat.op_types[n] in assigns:
                if edge > starts[n]:  # the value assigned, not the variable assigned to
                    node = flat.node(n)
                    targets = {v.source: v for v in program.variables if v.source is not None}
                    return targets.get(node.inputs[0]), node.location
                continue
            # Only the outputs the op declares: an undeclared one is read by no one.
            for out in range(offsets[n], offsets[n] + len(dtypes[flat.signatures[n]])):
                if feeders[out] and not seen[out]:
                    seen[out] = 1
                    queue.append(out)
    return None

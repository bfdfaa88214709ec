"""Import a user's script in the worker, recording its variables (stopped at its first gradient
step if it trains when imported), and trace the loss it names."""

from __future__ import annotations

import contextlib
import runpy
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.graph.model import CreationNames, SourceLocation
from gradcheck_cli.source_code.debug_info import made_by_a_library, with_call_column
from gradcheck_cli.tracing.eager_fallback import eager_fallback
from gradcheck_cli.tracing.function_tracing import (
    RUN_INSTEAD,
    concrete_function,
    run_hint,
    trace_loss,
)
from gradcheck_cli.tracing.keras_models import is_keras_model, trace_keras_model
from gradcheck_cli.tracing.keras_weights import (
    KerasWeights,
    discarded_layer_weights,
    keras_weights,
    layer_of,
    left_out_of_candidates,
    owned_variables,
    track_keras_weights,
)
from gradcheck_cli.tracing.leaving_tensorflow import mark_frozen_reads, recording_eager_reads
from gradcheck_cli.tracing.loss_finding import SCRIPT_RUN_NAME, find_loss, is_graph_tensor
from gradcheck_cli.tracing.override_maps import recording_override_maps
from gradcheck_cli.worker import progress
from gradcheck_cli.worker.protocol import EagerResult, Traced


def load_script(path: Path, loss: str | None, verify: bool) -> Traced | EagerResult:
    import tensorflow as tf

    from gradcheck_cli.tracing import traced
    from gradcheck_cli.tracing.tf_verification import verify_graph

    created: list[tuple[Any, SourceLocation | None]] = []
    in_order: list[Any] = []  # the variables of `created`, for their names
    by_libraries: set[int] = set()  # ids of the variables a library made (see below)

    def record(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        stack = traceback.extract_stack()[:-1]
        location = with_call_column(traced.user_location(stack), sys._getframe(1))
        created.append((variable, location))
        in_order.append(variable)
        if made_by_a_library(stack):
            by_libraries.add(id(variable))
        return variable

    sys.argv = [str(path)]
    sys.path.insert(0, str(path.parent.resolve()))
    tracked = track_keras_weights()
    with tf.variable_creator_scope(record), recording_override_maps():
        with recording_eager_reads() as reads, stopping_gradient_steps(path) as stops:
            namespace = _run(path, stops)
        name, value = find_loss(namespace, loss, path)
        progress.say(f"tracing {name}...")
        if is_graph_tensor(value):
            graph = traced.traced_graph(value.graph, value, name)
            if verify:
                graph.tensorflow = verify_graph(graph, value)
            return graph
        if isinstance(value, (tf.Tensor, tf.Variable)):
            raise GradcheckError(
                f"{name} in {display_path(path)} is an eager value, not a loss function: "
                "gradients cannot be traced from a computed number; pass the function that "
                "computes it"
                f"{run_hint(path, f', or {RUN_INSTEAD}')}"
            )
        keras = keras_weights(namespace, tracked)
        # The layer's line for a Keras weight, else the variable's own; the same dict goes on
        # filling in as tracing builds the layers the script did not call yet.
        created_at = keras.constructed_at
        for variable, location in created:
            created_at.setdefault(id(variable), location)
        # What a library made for its own bookkeeping (a Keras 2 model's step counters, an
        # optimizer's or a metric's variables, TFP's seed state, TF-MOT's discarded clones) is
        # no candidate, unless a model, layer or module the script holds owns it; captured by
        # the loss, it is one only if it could train (a float).
        discarded = discarded_layer_weights(keras)
        bookkeeping = by_libraries - owned_variables(namespace, keras, discarded)
        candidates = [
            v for v, _ in created if isinstance(v, tf.Variable) and id(v) not in bookkeeping
        ]
        left_out = {id(v) for v, _ in created if id(v) in bookkeeping and not v.dtype.is_floating}
        unchecked = [v for v, _ in created if id(v) in bookkeeping]
        names = _creation_names(in_order, keras, by_libraries)
        if is_keras_model(value):
            result = trace_keras_model(
                value, None, name, candidates, keras, created_at, verify, script=path, names=names
            )
            checked = {r.variable.name for r in result.variables}
            told = left_out_of_candidates(unchecked, discarded, names, created_at)
            result.left_out = [(n, why) for n, why in told if n not in checked]
            return result
        try:
            concrete = concrete_function(value, name, path)
        except GradcheckError:
            raise
        except Exception as error:
            # Tracing failed: the eager run decides whether the value left TensorFlow (the
            # loss runs) or the loss has a bug (it fails there too), whatever the error says.
            return eager_fallback(
                value, name, path, candidates, keras.info, created_at, error, verify, names
            )
        keras.settle()
        result = trace_loss(
            concrete,
            name,
            candidates,
            verify=verify,
            created_at=created_at,
            keras=keras,
            left_out=left_out,
            names=names,
        )
        variables = traced.candidate_variables(candidates, concrete, left_out)
        mark_frozen_reads(result, variables, concrete, reads)
        for record, variable in zip(result.variables, variables):  # Keras's record of its layer
            record.variable.layer, record.variable.layer_called = layer_of(keras, variable)
        checked = {id(v) for v in variables}
        unchecked = [v for v in unchecked if id(v) not in checked]
        result.left_out = left_out_of_candidates(unchecked, discarded, names, created_at)
        return result


def _creation_names(
    created: list[Any], keras: KerasWeights, by_libraries: set[int]
) -> CreationNames:
    """The names of the script's variables, told apart by creation as `gradcheck run` tells
    them: the Keras path or TensorFlow name, what a library made for itself (not a Keras
    layer's weight) numbered after the script's own."""
    from gradcheck_cli.tracing import traced

    def base_of(variable: Any) -> str:
        info = keras.info.get(id(variable))
        return info[0] if info is not None else traced.variable_name(variable)

    def in_order(variable: Any) -> bool:
        return id(variable) not in by_libraries or id(variable) in keras.info

    return CreationNames(created, base_of, in_order)


def _run(path: Path, stops: list[TrainsAtImport]) -> dict[str, Any]:
    """The script's namespace, imported; `stops`: where gradcheck stopped it meanwhile, at a
    gradient step (`stopping_gradient_steps`)."""
    try:
        return runpy.run_path(str(path), run_name=SCRIPT_RUN_NAME)
    except SystemExit as exit_:
        if stops:  # the script's own handler turned the stop into an exit
            raise GradcheckError(_stopped(path, stops[0])) from None
        arguments = " (does it parse required command-line arguments at import?)"
        raise GradcheckError(
            f"{display_path(path)} called sys.exit({exit_.code}) while gradcheck imported it"
            f"{arguments if exit_.code == 2 else ''}; put the training code under "
            '`if __name__ == "__main__":`'
        ) from None
    except BaseException as error:
        if stops:  # the stop itself, or what the script's own handlers made of it
            raise GradcheckError(_stopped(path, stops[0])) from None
        from gradcheck_cli.tracing.traced import exception_location

        where = exception_location(error)
        at = f" at {where}" if where else ""
        said = f": {error}" if str(error) else ""
        shown = display_path(path)
        told = f"{shown} raised {type(error).__name__}{at} while gradcheck imported it{said}"
        instead = _no_gradients(path, error)
        if instead:  # after a sentence of the script's own, a sentence of its own
            ended = told.endswith((".", "!", "?"))
            told += f" {instead[0].upper()}{instead[1:]}" if ended else f"; {instead}"
        raise GradcheckError(told) from None


def _no_gradients(path: Path, error: BaseException) -> str:
    """What to run instead when the script failed with the error an optimizer raises when no
    gradient came: TF1's `minimize` says so while the graph is built, before any step."""
    if isinstance(error, ValueError) and "No gradients provided" in str(error):
        return (
            "TensorFlow found no gradient for any variable; to see why, "
            f"{RUN_INSTEAD} `gradcheck run {display_path(path)}`"
        )
    return ""


class TrainsAtImport(BaseException):  # noqa: N818 - it stops the script, it reports no bug
    """Raised inside the script at its first gradient step; a BaseException, so that the
    script's own `except Exception` handlers let it through."""

    def __init__(self, trains: bool, asked: SourceLocation | None, ran: SourceLocation | None):
        super().__init__("gradcheck stopped the script at its first gradient step")
        self.trains = trains  # the request named a variable (a tensor-only one trains nothing)
        self.asked = asked  # where the script asked for gradients
        self.ran = ran  # TF1: the Session.run that would have run them


def _stopped(path: Path, stop: TrainsAtImport) -> str:
    """What the plain form says of a script it stopped at its first gradient step."""
    at = f" at {stop.asked}" if stop.asked is not None else ""
    if stop.ran is not None and stop.ran == stop.asked:
        what = f"trains when imported: it asks for gradients at {stop.ran} and runs them"
    elif stop.ran is not None:
        what = f"trains when imported: at {stop.ran} it runs the gradients it asks for{at}"
    elif stop.trains:
        what = f"trains when imported: it asks for gradients{at}"
    else:
        what = f"asks for gradients when imported{at}"
    return (
        f"{display_path(path)} {what}; gradcheck stopped it there, before any weight changed: "
        f"{RUN_INSTEAD} `gradcheck run {display_path(path)}`"
    )


@contextlib.contextmanager
def stopping_gradient_steps(path: Path) -> Iterator[list[TrainsAtImport]]:
    """While the script is imported, stop it at its first gradient step: a
    `GradientTape.gradient` (which Keras's `fit` calls, eagerly or while tracing its step), a
    `tf.gradients` inside a tf.function, or, in a TF1 graph where `tf.gradients` and `minimize`
    only build ops, the first `Session.run` that would run those ops. Yields the stops made,
    should the script swallow one."""
    import tensorflow as tf
    from tensorflow.python.client import session
    from tensorflow.python.ops import gradients_util

    script = str(path.resolve())
    stops: list[TrainsAtImport] = []
    graph_requests: dict[Any, SourceLocation | None] = {}  # TF1 gradient op -> where asked

    def stop(trains: bool, asked: SourceLocation | None, ran: SourceLocation | None = None) -> None:
        stops.append(TrainsAtImport(trains, asked, ran))
        raise stops[-1]

    def tape_gradient(
        original: Any, tape: Any, target: Any, sources: Any, *_: Any, **__: Any
    ) -> Any:
        stop(_names_a_variable(sources), _script_line(script))

    def graph_gradients(original: Any, *args: Any, **kwargs: Any) -> Any:
        # TensorFlow's own, for a function's gradient (a nested call passes it by position)
        if kwargs.get("src_graph", args[9] if len(args) > 9 else None) is not None:
            return original(*args, **kwargs)
        if tf.compat.v1.get_default_graph().building_function:  # a tf.function's step
            stop(True, _script_line(script))
        gradients = original(*args, **kwargs)
        asked = _script_line(script)
        for gradient in tf.nest.flatten(gradients, expand_composites=True):
            if gradient is not None:
                graph_requests.setdefault(gradient.op, asked)
        return gradients

    def session_run(original: Any, session_: Any, fetches: Any, *args: Any, **kwargs: Any) -> Any:
        elements = tf.nest.flatten(fetches, expand_composites=True)
        _stop_if_it_runs(session_.graph, elements, graph_requests, script, stop)
        return original(session_, fetches, *args, **kwargs)

    def make_callable(original: Any, session_: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        # Keras 2 in a TF1 graph runs its train function through a callable, not Session.run.
        names = [*options.fetch, *options.target]
        _stop_if_it_runs(session_.graph, names, graph_requests, script, stop)
        return original(session_, options, *args, **kwargs)

    patches = [
        (tf.GradientTape, "gradient", tape_gradient),
        (gradients_util, "_GradientsHelper", graph_gradients),
        (session.BaseSession, "run", session_run),
        (session.BaseSession, "_make_callable_from_options", make_callable),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for (owner, name, hook), (_, _, original) in zip(patches, originals):
            setattr(owner, name, _calling(hook, original))
        yield stops
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def _calling(hook: Callable[..., Any], original: Any) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    return wrapper


def _stop_if_it_runs(
    graph: Any,
    fetches: Iterable[Any],
    requests: dict[Any, SourceLocation | None],
    script: str,
    stop: Callable[..., None],
) -> None:
    """Stop the script if running `fetches` of `graph` computes a gradient it asked for."""
    if not requests:
        return
    todo = []
    for fetch in fetches:
        try:
            element = graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
        except Exception:  # noqa: BLE001 - what is no op of the graph runs no gradient
            continue
        todo.append(getattr(element, "op", element))
    seen: set[Any] = set()
    while todo:
        op = todo.pop()
        if op in requests:
            stop(True, requests[op], _script_line(script))
        if op in seen:
            continue
        seen.add(op)
        todo.extend(tensor.op for tensor in op.inputs)
        todo.extend(op.control_inputs)


def _names_a_variable(sources: Any) -> bool:
    """Whether a tape's sources hold a tf.Variable, or a Keras variable with one behind it."""
    import tensorflow as tf

    try:
        flat = tf.nest.flatten(sources)
    except Exception:  # noqa: BLE001 - the stop must not fail; "asks for gradients" stays true
        return False
    return any(
        isinstance(s, tf.Variable) or isinstance(getattr(s, "_value", None), tf.Variable)
        for s in flat
    )


def _script_line(script: str) -> SourceLocation | None:
    """The innermost line of the script's own code on the stack; TensorFlow's stack maps the
    code autograph generates for a tf.function back to the script's lines."""
    from tensorflow.python.util import tf_stack

    frames = [f for f in tf_stack.extract_stack() if f.filename == script]
    if not frames:
        frames = [f for f in traceback.extract_stack() if f.filename == script]
    return SourceLocation(script, frames[-1].lineno or 0) if frames else None

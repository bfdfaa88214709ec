"""Import a user's script in the worker, recording its variables, and trace the loss it names."""

from __future__ import annotations

import contextlib
import runpy
import sys
import traceback
from collections.abc import Iterator
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
        with recording_eager_reads() as reads, _recording_gradient_requests(path) as asked:
            namespace = _run(path, asked)
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


def _run(path: Path, asked: list[SourceLocation | None]) -> dict[str, Any]:
    """The script's namespace, imported; `asked`: where it asked for gradients meanwhile."""
    try:
        return runpy.run_path(str(path), run_name=SCRIPT_RUN_NAME)
    except SystemExit as exit_:
        arguments = " (does it parse required command-line arguments at import?)"
        raise GradcheckError(
            f"{display_path(path)} called sys.exit({exit_.code}) while gradcheck imported it"
            f"{arguments if exit_.code == 2 else ''}; put the training code under "
            '`if __name__ == "__main__":`'
        ) from None
    except BaseException as error:
        from gradcheck_cli.tracing.traced import exception_location

        where = exception_location(error)
        at = f" at {where}" if where else ""
        said = f": {error}" if str(error) else ""
        shown = display_path(path)
        told = f"{shown} raised {type(error).__name__}{at} while gradcheck imported it{said}"
        instead = _trains_at_import(path, asked, error)
        if instead:  # after a sentence of the script's own, a sentence of its own
            ended = told.endswith((".", "!", "?"))
            told += f" {instead[0].upper()}{instead[1:]}" if ended else f"; {instead}"
        raise GradcheckError(told) from None


def _trains_at_import(path: Path, asked: list[SourceLocation | None], error: BaseException) -> str:
    """What to run instead when the script failed while it trained at import: it asked for
    gradients, or the failure is the error an optimizer raises when none came."""
    command = f"{RUN_INSTEAD} `gradcheck run {display_path(path)}`"
    if asked:
        at = f" (it asks for gradients at {asked[0]})" if asked[0] is not None else ""
        return f"it trains when imported{at}: {command}"
    # TF1's `minimize` says so while the graph is built, before any step.
    if isinstance(error, ValueError) and "No gradients provided" in str(error):
        return f"TensorFlow found no gradient for any variable; to see why, {command}"
    return ""


@contextlib.contextmanager
def _recording_gradient_requests(path: Path) -> Iterator[list[SourceLocation | None]]:
    """Where the script asks for gradients while it is imported (`GradientTape.gradient`,
    which Keras's `fit` calls too): the line of the script's own code that started it."""
    import tensorflow as tf

    original = tf.GradientTape.gradient
    asked: list[SourceLocation | None] = []
    script = str(path.resolve())

    def gradient(tape: Any, *args: Any, **kwargs: Any) -> Any:
        if not asked:
            frames = [f for f in traceback.extract_stack() if f.filename == script]
            asked.append(SourceLocation(script, frames[0].lineno or 0) if frames else None)
        return original(tape, *args, **kwargs)

    tf.GradientTape.gradient = gradient
    try:
        yield asked
    finally:
        tf.GradientTape.gradient = original

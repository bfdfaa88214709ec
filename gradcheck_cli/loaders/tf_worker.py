"""The TensorFlow side of gradcheck, run in its own process: import a script, trace its loss, ask
TensorFlow for its own gradients. Whatever the user's code prints stays out of gradcheck's report.

Usage (by gradcheck itself): python -m gradcheck_cli.loaders.tf_worker REQUEST.json RESULT.pickle
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
import runpy
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.loaders.bundle import Bundle, EagerOutcome, VariableRecord
from gradcheck_cli.loaders.loss_names import looks_like_loss, resolve_loss_name
from gradcheck_cli.loaders.tf_verification import (
    call_with_random_inputs,
    gradient_verdicts,
    saved_model_verdicts,
    tape_verdicts,
    verify_graph,
)

_RUN_NAME = "__gradcheck__"


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    result_path = Path(argv[2])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:
        if request["mode"] == "script":
            bundle = load_script(Path(request["path"]), request.get("loss"), request["verify"])
        elif request["mode"] == "keras":
            bundle = load_keras_file(
                Path(request["path"]), request.get("loss"), request["verify"], request["unsafe"]
            )
        else:
            bundle = Bundle(kind="verify", loss_name=request["loss"])
            try:
                bundle.tf_verdicts = saved_model_verdicts(Path(request["path"]), request["loss"])
            except Exception as error:  # TensorFlow's own failure is a result of --verify
                bundle.verify_error = f"{type(error).__name__}: {error}"
    except GradcheckError as error:
        bundle = Bundle(kind="error", loss_name="", error=str(error))
    except Exception as error:  # a gradcheck bug: one line, the traceback only when debugging
        if os.environ.get("GRADCHECK_DEBUG"):
            traceback.print_exc()
        bundle = Bundle(
            kind="error",
            loss_name="",
            error=f"internal error while tracing: {type(error).__name__}: {error} "
            "(run with --debug for the traceback)",
        )
    with result_path.open("wb") as result:
        pickle.dump(bundle, result)
    sys.stdout.flush()
    # The user's script may have started threads or registered atexit hooks that hang.
    os._exit(0)


# -- scripts ------------------------------------------------------------------------------------


def load_script(path: Path, loss: str | None, verify: bool) -> Bundle:
    import tensorflow as tf

    from gradcheck_cli.loaders import traced

    created: list[tuple[Any, SourceLocation | None]] = []

    def record(next_creator: Any, **kwargs: Any) -> Any:
        variable = next_creator(**kwargs)
        created.append((variable, traced.user_location(traceback.extract_stack()[:-1])))
        return variable

    sys.argv = [str(path)]
    sys.path.insert(0, str(path.parent.resolve()))
    layer_sites = _track_layer_construction(path)
    with tf.variable_creator_scope(record):
        namespace = _run(path)
        name, value = _find_loss(namespace, loss, path)
        if _is_graph_tensor(value):
            bundle = traced.bundle_from_graph(value.graph, value, name)
            if verify:
                verify_graph(bundle, value)
            return bundle
        if isinstance(value, (tf.Tensor, tf.Variable)):
            raise GradcheckError(
                f"{name} in {path} is an eager value, not a loss function: gradients cannot be "
                "traced from a computed number; pass the function that computes it"
            )
        keras = _keras_weights(namespace, layer_sites)
        created_at = {id(v): location for v, location in created}
        created_at.update(keras.constructed_at)
        candidates = [v for v, _ in created if isinstance(v, tf.Variable)]
        if _is_keras_model(value):
            return _keras_bundle(value, None, name, candidates, keras, created_at, verify)
        try:
            concrete = concrete_function(value, name, path)
        except GradcheckError:
            raise
        except Exception as error:
            if not _left_tensorflow(error):
                where = traced.exception_location(error)
                at = f" at {where}" if where else ""
                raise GradcheckError(
                    f"{name} in {path} cannot be traced{at}: {traced.error_summary(error)}"
                ) from None
            bundle = _eager_fallback(value, name, path, candidates, keras.info, created_at, error)
            if verify:
                assert bundle.eager is not None
                bundle.tf_verdicts = dict(bundle.eager.verdicts)
            return bundle
        return _traced_bundle(concrete, name, candidates, keras, created_at, verify)


def _traced_bundle(
    concrete: Any,
    name: str,
    candidates: list[Any],
    keras: KerasWeights,
    created_at: dict[int, SourceLocation | None],
    verify: bool,
) -> Bundle:
    from gradcheck_cli.loaders import traced

    loss_output = loss_output_index(concrete, name)
    bundle = traced.bundle_from_concrete_function(
        concrete,
        name,
        loss_output,
        candidates,
        created_at=created_at,
        keras_info=keras.info,
        attributes=keras.attributes,
    )
    if verify:
        variables = traced.candidate_variables(candidates, concrete)
        bundle.tf_verdicts = tape_verdicts(
            lambda: flat_output(call_with_random_inputs(concrete, concrete), loss_output),
            variables,
            [r.name for r in bundle.variables],
        )
    return bundle


def _is_keras_model(value: Any) -> bool:
    if "keras" not in sys.modules:
        return False
    import keras

    return isinstance(value, keras.Model)


def _keras_bundle(
    model: Any,
    loss: str | None,
    name: str,
    candidates: list[Any],
    keras: KerasWeights,
    created_at: dict[int, SourceLocation | None],
    verify: bool,
) -> Bundle:
    """The model's own objective; with model.losses, also the data loss alone (for GC206)."""
    from gradcheck_cli.loaders.keras_objective import keras_objective

    # The optimizer's slots and the metrics' counters are Keras's bookkeeping, not the model's.
    bookkeeping = {id(getattr(v, "value", v)) for v in _bookkeeping_variables(model)}
    candidates = [v for v in candidates if id(v) not in bookkeeping]
    weights = [w.value for w in model.weights]
    for weight in model.weights:
        keras.info.setdefault(id(weight.value), (weight.path, bool(weight.trainable)))
    known = {id(v) for v in candidates}
    candidates = candidates + [v for v in weights if id(v) not in known]
    objective = keras_objective(model, loss, name)
    bundle = _traced_bundle(objective.full, name, candidates, keras, created_at, verify)
    if objective.data_only is not None:
        bundle.data_only = _traced_bundle(
            objective.data_only, name, candidates, keras, created_at, False
        )
    return bundle


def _bookkeeping_variables(model: Any) -> list[Any]:
    variables = list(getattr(model, "metrics_variables", []) or [])
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        variables += list(getattr(optimizer, "variables", []) or [])
    return variables


def load_keras_file(path: Path, loss: str | None, verify: bool, unsafe: bool) -> Bundle:
    """A `.keras` / `.h5` model, deserialized with Keras's safe mode unless told otherwise."""
    import keras

    try:
        model = keras.saving.load_model(str(path), safe_mode=not unsafe, compile=True)
    except Exception as error:
        from gradcheck_cli.loaders import traced

        hint = (
            "; it holds Python code (a Lambda layer?): if you trust it, pass "
            "--unsafe-deserialization"
            if "safe_mode" in str(error) or "unsafe" in str(error).lower()
            else ""
        )
        raise GradcheckError(
            f"{path} cannot be loaded by Keras: {traced.error_summary(error)}{hint}"
        ) from None
    return keras_model_bundle(model, loss, path.name, verify)


def keras_model_bundle(model: Any, loss: str | None, name: str, verify: bool) -> Bundle:
    """A live Keras model's own objective (a loaded file's, or one handed to the library)."""
    bundle = _keras_bundle(model, loss, name, [], KerasWeights(), {}, verify)
    bundle.loss_name = loss or "compiled loss + model.losses"
    return bundle


def _left_tensorflow(error: Exception) -> bool:
    """Whether tracing failed because the loss turns a tensor into a Python or NumPy value.

    TensorFlow names the graph tensor "symbolic" in each of these errors: `.numpy()`
    (AttributeError), NumPy on a tensor (NotImplementedError), `float()` (TypeError), `bool()`
    (OperatorNotAllowedInGraphError).
    """
    return "symbolic" in str(error).lower()


def _run(path: Path) -> dict[str, Any]:
    try:
        return runpy.run_path(str(path), run_name=_RUN_NAME)
    except SystemExit as exit_:
        arguments = " (does it parse required command-line arguments at import?)"
        raise GradcheckError(
            f"{path} called sys.exit({exit_.code}) while gradcheck imported it"
            f"{arguments if exit_.code == 2 else ''}; put the training code under "
            '`if __name__ == "__main__":`'
        ) from None
    except BaseException as error:
        from gradcheck_cli.loaders.traced import exception_location

        where = exception_location(error)
        at = f" at {where}" if where else ""
        raise GradcheckError(
            f"{path} raised {type(error).__name__}{at} while gradcheck imported it: {error}"
        ) from None


def _is_graph_tensor(value: Any) -> bool:
    import tensorflow as tf

    return isinstance(value, tf.Tensor) and tf.is_symbolic_tensor(value)


def _looks_callable_loss(value: Any) -> bool:
    if hasattr(value, "get_concrete_function") or type(value).__name__ == "ConcreteFunction":
        return True
    return (
        inspect.isfunction(value) and value.__module__ == _RUN_NAME and _takes_no_arguments(value)
    )


def _find_loss(namespace: dict[str, Any], loss: str | None, path: Path) -> tuple[str, Any]:
    candidates = {
        name: value
        for name, value in namespace.items()
        if not name.startswith("_") and (_is_graph_tensor(value) or _looks_callable_loss(value))
    }
    candidates.update(_module_methods(namespace))
    if loss is not None:
        value = _attribute_path(namespace, loss)
        if value is not None:
            return loss, value
        graph = next((v.graph for v in candidates.values() if _is_graph_tensor(v)), None)
        if graph is None:
            import tensorflow as tf

            default = tf.compat.v1.get_default_graph()
            graph = default if default.get_operations() else None
        if graph is not None:
            tensor = _graph_tensor(graph, loss)
            if tensor is not None:
                return loss, tensor
            suggestions = dict.fromkeys(op.name for op in graph.get_operations())
            resolve_loss_name(loss, {**suggestions, **candidates}, what=str(path))
    name = resolve_loss_name(loss, candidates, what=str(path))
    return name, candidates[name]


def _module_methods(namespace: dict[str, Any]) -> dict[str, Any]:
    """`model.loss` for every loss-like tf.function method of a module-level tf.Module."""
    import tensorflow as tf

    methods: dict[str, Any] = {}
    for name, value in namespace.items():
        if name.startswith("_") or not isinstance(value, tf.Module):
            continue
        for klass in type(value).__mro__:
            for attribute, member in vars(klass).items():
                if hasattr(member, "get_concrete_function") and looks_like_loss(attribute):
                    methods.setdefault(f"{name}.{attribute}", getattr(value, attribute))
    return methods


def _attribute_path(namespace: dict[str, Any], dotted: str) -> Any:
    head, *rest = dotted.split(".")
    if head not in namespace:
        return None
    value = namespace[head]
    for part in rest:
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _graph_tensor(graph: Any, name: str) -> Any:
    try:
        return graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
    except (KeyError, ValueError):
        return None


def concrete_function(value: Any, name: str, path: Path) -> Any:
    import tensorflow as tf

    if type(value).__name__ == "ConcreteFunction":
        return value
    if hasattr(value, "get_concrete_function"):
        if getattr(value, "input_signature", None) is None:
            function = getattr(value, "python_function", None)
            if function is not None and not _takes_no_arguments(function):
                raise GradcheckError(
                    f"{name} in {path} takes arguments but has no input_signature; give it "
                    "@tf.function(input_signature=[tf.TensorSpec(...)]) so gradcheck can trace it"
                )
        return value.get_concrete_function()
    # A plain function runs eagerly in the user's code: trace it without autograph, so that
    # float(), bool() and `if tensor:` fail here as they would cut the gradient there.
    return tf.function(value, autograph=False).get_concrete_function()


def _takes_no_arguments(function: Any) -> bool:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
        if p.name != "self"
    )


def loss_output_index(concrete: Any, name: str) -> int:
    import tensorflow as tf

    structure = concrete.structured_outputs
    flat = tf.nest.flatten(structure)
    if isinstance(structure, dict) and "loss" in structure:
        chosen = structure["loss"]
    elif len(flat) == 1:
        chosen = flat[0]
    else:
        raise GradcheckError(
            f"{name} returns {len(flat)} tensors; return the loss alone, or a dict with a "
            "'loss' key"
        )
    outputs = [id(t) for t in concrete.graph.outputs]
    if id(chosen) not in outputs:
        raise GradcheckError(f"{name} does not return a tensor gradcheck can follow")
    return outputs.index(id(chosen))


def flat_output(result: Any, index: int) -> Any:
    import tensorflow as tf

    return tf.nest.flatten(result, expand_composites=True)[index]


@dataclass
class KerasWeights:
    """What Keras knows about the weights of the layers bound in the script's namespace."""

    # id(backing tf.Variable) -> (Keras path, Keras trainable)
    info: dict[int, tuple[str, bool]] = field(default_factory=dict)
    # id(backing tf.Variable) -> attribute path ("model.proj.kernel")
    attributes: dict[int, str] = field(default_factory=dict)
    # id(backing tf.Variable) -> where the owning layer was constructed
    constructed_at: dict[int, SourceLocation] = field(default_factory=dict)


def _keras_weights(
    namespace: dict[str, Any], layer_sites: dict[int, SourceLocation | None]
) -> KerasWeights:
    """Keras paths, trainability, attribute paths and construction lines of every weight."""
    found = KerasWeights()
    if "keras" not in sys.modules:
        return found
    import keras

    pending = [(name, value) for name, value in namespace.items() if not name.startswith("_")]
    seen: set[int] = set()
    while pending:
        path, value = pending.pop(0)
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, keras.layers.Layer):
            site = layer_sites.get(id(value))
            for weight in value.weights:
                backing = getattr(weight, "value", None)
                if backing is None:
                    continue
                # Breadth first: a deeper layer that owns the weight overwrites its parents.
                found.info[id(backing)] = (weight.path, bool(weight.trainable))
                found.attributes[id(backing)] = f"{path}.{weight.name}"
                if site is not None:
                    found.constructed_at[id(backing)] = site
            for attribute, member in vars(value).items():
                if not attribute.startswith("_"):
                    pending.append((f"{path}.{attribute}", member))
        elif isinstance(value, (list, tuple)):
            pending.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, dict):
            pending.extend((f"{path}[{key!r}]", item) for key, item in value.items())
    return found


def _track_layer_construction(path: Path) -> dict[int, SourceLocation | None]:
    """Record the user's line that constructs each Keras layer (`self.proj = layers.Dense(32)`).

    Only for scripts that mention Keras: importing it costs a second.
    """
    sites: dict[int, SourceLocation | None] = {}
    try:
        if "keras" not in path.read_text(errors="replace"):
            return sites
    except OSError:
        return sites
    import keras

    from gradcheck_cli.loaders import traced

    original = keras.layers.Layer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if id(self) not in sites:
            sites[id(self)] = traced.user_location(traceback.extract_stack()[:-1])
        original(self, *args, **kwargs)

    keras.layers.Layer.__init__ = init  # type: ignore[method-assign]
    return sites


# -- the eager fallback --------------------------------------------------------------------------


def _eager_fallback(
    function: Any,
    name: str,
    path: Path,
    candidates: list[Any],
    keras_info: dict[int, tuple[str, bool]],
    created_at: dict[int, SourceLocation | None],
    trace_error: Exception,
) -> Bundle:
    """The loss cannot be traced: ask TensorFlow's tape which variables get no gradient."""
    import tensorflow as tf

    from gradcheck_cli.loaders import traced

    eager_function = getattr(function, "python_function", function)
    variables = [v for v in candidates]
    try:
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            for variable in variables:
                tape.watch(variable)
            with tf.GradientTape() as reads:
                result = eager_function()
    except Exception as error:
        where = traced.exception_location(error)
        at = f" at {where}" if where else ""
        raise GradcheckError(
            f"{name} in {path} cannot be traced ({type(trace_error).__name__}: {trace_error}) "
            f"and fails when run eagerly{at}: {type(error).__name__}: {error}"
        ) from None
    read_ids = {id(v) for v in reads.watched_variables()}
    verdicts: dict[str, str] = {}
    records = []
    gradients = gradient_verdicts(tape, result, variables)
    for variable, gradient in zip(variables, gradients):
        key_path, keras_trainable = keras_info.get(id(variable), (None, variable.trainable))
        record_name = key_path or traced.variable_name(variable)
        records.append(record_name)
        if keras_trainable:
            verdicts[record_name] = gradient if id(variable) in read_ids else "unread"
    bundle = Bundle(kind="eager", loss_name=name)
    bundle.variables = [
        VariableRecord(
            name=record_name,
            trainable=keras_info.get(id(v), (None, v.trainable))[1],
            dtype=v.dtype.base_dtype.name,
            shape=tuple(v.shape.as_list()) if v.shape.rank is not None else None,
            location=created_at.get(id(v)),
        )
        for record_name, v in zip(records, variables)
    ]
    bundle.eager = EagerOutcome(
        verdicts=verdicts,
        left_at=traced.exception_location(trace_error),
        reason=traced.error_summary(trace_error),
    )
    return bundle


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Keras's names, trainability, attribute paths and construction lines for a script's weights."""

from __future__ import annotations

import contextlib
import itertools
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from types import FrameType
from typing import Any

from gradcheck_cli.graph.model import CreationNames, SourceLocation
from gradcheck_cli.source_code.debug_info import call_column, is_user_file, library_entry
from gradcheck_cli.tracing.keras_operations import outside_keras, watch_operations


@dataclass
class KerasWeights:
    """What Keras knows about a script's weights; `track_keras_weights` fills it as layers add
    weights, also while the loss is traced, and `keras_weights` adds what the namespace tells."""

    # id(backing tf.Variable) -> (Keras path, Keras trainable)
    info: dict[int, tuple[str, bool]] = field(default_factory=dict)
    # id(backing tf.Variable) -> attribute path ("model.proj.kernel")
    attributes: dict[int, str] = field(default_factory=dict)
    # id(backing tf.Variable) -> where the user's code constructed the layer that owns it
    constructed_at: dict[int, SourceLocation | None] = field(default_factory=dict)
    # id(backing tf.Variable) -> the Keras variable that wraps it
    variables: dict[int, Any] = field(default_factory=dict)
    # id(backing tf.Variable) -> id of the layer whose add_weight created it
    owners: dict[int, int] = field(default_factory=dict)
    # id(backing tf.Variable) -> a weak reference to that layer: dead once no object holds it
    owner_refs: dict[int, weakref.ref[Any]] = field(default_factory=dict)
    # layer -> where the user's code constructed it (None: no user frame on the stack)
    layer_sites: weakref.WeakKeyDictionary[Any, SourceLocation | None] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # (Keras variable, its layer) whose tf.Variable Keras creates later: a subclassed model
    # without build() is built symbolically, its weights initialised at their first use.
    deferred: list[tuple[Any, Any]] = field(default_factory=list)
    # What undoes the tracking: the patches on Keras's Layer, the imports still awaited.
    undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def stop(self) -> None:
        """Stop tracking: Keras's Layer as it was, no import awaited (what was found stays)."""
        while self.undo:
            self.undo.pop()()

    def add_model(self, model: Any) -> None:
        """The weights of a model built before tracking began (a Keras callback's, at `fit`),
        each with the innermost layer that holds it."""
        flatten = getattr(model, "_flatten_layers", None)
        layers = list(flatten(include_self=True, recursive=True)) if flatten else [model]
        for layer in reversed(layers):  # parents come first: a weight goes to its own layer
            for weight in getattr(layer, "weights", ()):
                if id(backing_variable(weight)) not in self.owners:
                    self.add(weight, layer)

    def add(self, weight: Any, layer: Any) -> None:
        """A weight `layer` added (recorded once its tf.Variable exists)."""
        # Keras 2's weights are tf.Variables; Keras 3's wrap one, made at first use.
        backing = backing_variable(weight)
        if backing is None:
            self.deferred.append((weight, layer))
            return
        self.variables[id(backing)] = weight
        self.owners[id(backing)] = id(layer)
        with contextlib.suppress(TypeError):  # a layer class without weak references
            self.owner_refs[id(backing)] = weakref.ref(layer)
        self.info[id(backing)] = (weight_path(weight, layer), bool(weight.trainable))
        site = self.layer_sites.get(layer)
        if site is not None:
            self.constructed_at[id(backing)] = site

    def path(self, weight: Any) -> str:
        """The path gradcheck names `weight` by: the one recorded when its layer added it."""
        backing = weight if _is_tf_variable(weight) else getattr(weight, "_value", None)
        recorded = self.info.get(id(backing))
        return recorded[0] if recorded is not None else weight_path(weight)

    def settle(self) -> None:
        """Record the deferred weights that Keras has initialised since."""
        deferred, self.deferred = self.deferred, []
        for weight, layer in deferred:
            self.add(weight, layer)


def keras_weights(namespace: dict[str, Any], found: KerasWeights | None = None) -> KerasWeights:
    """`found` completed with the Keras path, trainability and attribute path of every weight
    of the layers bound in `namespace` (a weight is named by the layer that owns it)."""
    found = found if found is not None else KerasWeights()
    found.settle()
    for backing, weight in found.variables.items():
        if not _is_tf_variable(weight):  # a Keras 3 path is final once its layer is built
            found.info[backing] = (weight_path(weight), bool(weight.trainable))
    if "keras" not in sys.modules:
        return found
    import keras

    pending = [(name, value) for name, value in namespace.items() if not name.startswith("_")]
    # A functional or Sequential model holds its layers in `model.layers` only: a path through
    # it is taken when no attribute leads to the layer.
    by_layers_list: list[tuple[str, Any]] = []
    seen: set[int] = set()
    while pending or by_layers_list:
        path, value = pending.pop(0) if pending else by_layers_list.pop(0)
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, keras.layers.Layer):
            _name_weights(found, path, value)
            for attribute, member in vars(value).items():
                if not attribute.startswith("_"):
                    pending.append((f"{path}.{attribute}", member))
            if isinstance(value, keras.Model):
                by_layers_list.extend(
                    (f"{path}.layers[{i}]", layer) for i, layer in enumerate(value.layers)
                )
        elif isinstance(value, (list, tuple)):
            pending.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, dict):
            pending.extend((f"{path}[{key!r}]", item) for key, item in value.items())
    return found


def owned_variables(
    namespace: dict[str, Any], found: KerasWeights, discarded: set[int]
) -> set[int]:
    """ids of the tf.Variables that a model, layer or module bound in `namespace` owns (its
    weights), or that a layer still held by some object made (wherever it is held: a function's
    locals, a user's class, a closure). A layer no object holds any more (a clone a library made
    and dropped, as TF-MOT's quantize_model does) owns nothing: `discarded` are its weights
    (`discarded_layer_weights`)."""
    owned = set(found.variables) - discarded
    for variables in _bound_models(namespace).values():
        owned.update(variables)
    return owned


def smallest_holders(namespace: dict[str, Any], found: KerasWeights) -> dict[int, tuple[int, int]]:
    """{id of a tf.Variable: (id of the model that holds it and the fewest variables, the
    variable's position in that model's list)}. The models: every Keras model the script
    constructed that is still alive (wherever it is held: an agent's attributes, a function's
    locals), and every module bound in `namespace`. A target network and its source are two
    holders (`set_weights` copies by position); a GAN model holding both of its halves is not
    the one its generator's variables are told by."""
    models = [layer for layer in list(found.layer_sites.keys()) if _is_model(layer)]
    bound = {id(layer): _weight_ids(layer) for layer in models}
    bound.update(_bound_models(namespace))
    holders: dict[int, tuple[int, int, int]] = {}
    for holder, variables in bound.items():
        for position, variable in enumerate(variables):
            if variable not in holders or len(variables) < holders[variable][2]:
                holders[variable] = (holder, position, len(variables))
    return {variable: (holder, position) for variable, (holder, position, _) in holders.items()}


def _is_model(value: Any) -> bool:
    """Whether `value` is a Keras 3 or a Keras 2 model."""
    return any(isinstance(value, keras.Model) for keras in imported_kerases())


def _weight_ids(layer: Any) -> list[int]:
    """ids of the tf.Variables of a Keras layer's weights, in its own order."""
    try:
        return [id(getattr(w, "value", w)) for w in layer.weights]
    except Exception:  # a half-built layer may fail to list
        return []


def _bound_models(namespace: dict[str, Any]) -> dict[int, list[int]]:
    """{id of each model, layer or module bound in `namespace`: ids of its tf.Variables, in
    its own order}."""
    import tensorflow as tf

    found: dict[int, list[int]] = {}
    pending = [value for name, value in namespace.items() if not name.startswith("_")]
    seen: set[int] = set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, tf.Module):  # Keras 2 layers and models, Sonnet, tf.Module
            with contextlib.suppress(Exception):  # a half-built module may fail to list
                found[id(value)] = [id(v) for v in value.variables]
        elif _is_layer(value):  # a Keras 3 layer or model (no tf.Module)
            found[id(value)] = _weight_ids(value)
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
    return found


def layer_of(found: KerasWeights, variable: Any) -> tuple[int | None, bool | None]:
    """(a number for the Keras layer whose add_weight made `variable`, whether Keras records
    that layer as ever called: its own `_called`), or (None, None) when no layer made it."""
    owner = found.owners.get(id(variable))
    ref = found.owner_refs.get(id(variable))
    layer = ref() if ref is not None else None
    called = getattr(layer, "_called", None)
    return owner, called if isinstance(called, bool) else None


def discarded_layer_weights(found: KerasWeights) -> set[int]:
    """ids of the tf.Variables whose layer no object holds any more: garbage collected, once
    every reference cycle is collected."""
    import gc

    gc.collect()
    return {backing for backing, layer in found.owner_refs.items() if layer() is None}


DISCARDED = "made by a layer that is held by no object any more (a copy a library made and dropped)"
MADE_BY_A_LIBRARY = (
    "made by a library's call, outside every model, layer and module the script holds (such as "
    "an optimizer's or a metric's variables)"
)


def left_out_of_candidates(
    variables: Iterable[Any],
    discarded: set[int],
    names: CreationNames,
    at: Mapping[int, SourceLocation | None],
) -> list[tuple[str, str]]:
    """(name, why) for each trainable floating-point variable of `variables`, the ones a loader
    leaves out of the candidates: told with `-v` (GC009), never left out in silence, by the
    name `names` gives it in every list of the check (a discarded clone's weights share their
    source's Keras paths), with the user's line whose library call made it (`at`)."""
    told = []
    for variable in variables:
        if not (getattr(variable, "trainable", False) and variable.dtype.is_floating):
            continue
        why = DISCARDED if id(variable) in discarded else MADE_BY_A_LIBRARY
        where = at.get(id(variable))
        if where is not None:
            why += f"; made by the call at {PurePath(where.file).name}:{where.line}"
        told.append((names.name(variable), why))
    return told


def _name_weights(found: KerasWeights, path: str, layer: Any) -> None:
    site = found.layer_sites.get(layer)
    for weight in layer.weights:
        backing = getattr(weight, "value", None)
        if backing is None:
            continue
        found.info[id(backing)] = (weight_path(weight), bool(weight.trainable))
        owner = found.owners.get(id(backing))
        if owner is not None and owner != id(layer):
            continue
        # A weight no add_weight created (a keras.Variable set as an attribute): breadth first,
        # the deepest layer that holds it overwrites its parents.
        found.attributes[id(backing)] = f"{path}.{weight.name}"
        if owner is None and site is not None:
            found.constructed_at[id(backing)] = site


def track_keras_weights() -> KerasWeights:
    """Record, from now on, the user's line that constructs each Keras layer and, for every
    weight a layer adds, its Keras variable and that layer's line (all in the result), in
    Keras 3 and in Keras 2 (tf_keras), as soon as the script imports either.

    Neither is imported here (a script that asks for Keras 2 with TF_USE_LEGACY_KERAS never
    finds Keras 3 imported ahead of its own line), so this costs nothing to a script that uses
    no Keras, and a script whose helper module imports Keras is watched too.
    """
    from gradcheck_cli.cache.file_reads import after_import

    found = KerasWeights()
    for name in ("keras", "tf_keras"):
        found.undo.append(after_import(name, lambda module: _watch_layers(module, found)))
    return found


def _watch_layers(keras: Any, found: KerasWeights) -> None:
    """Patch `keras`'s Layer to record each layer's line and weights; a Keras 2 metric is a
    layer too, and its weights (totals, counts) are bookkeeping, not a model's."""
    layer_class = keras.layers.Layer
    metric_class = getattr(keras.metrics, "Metric", ())
    original_init = layer_class.__init__
    original_add_weight = layer_class.add_weight

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if self not in found.layer_sites:  # a subclass's __init__ may reach Layer's twice
            found.layer_sites[self] = _construction_site(self, sys._getframe(1), found)
        original_init(self, *args, **kwargs)

    def add_weight(self: Any, *args: Any, **kwargs: Any) -> Any:
        weight = original_add_weight(self, *args, **kwargs)
        if not isinstance(self, metric_class):
            found.add(weight, self)
        return weight

    own = vars(layer_class)
    saved = {name: own[name] for name in ("__init__", "add_weight") if name in own}

    def restore() -> None:
        for name in ("__init__", "add_weight"):
            if name in saved:
                setattr(layer_class, name, saved[name])
            else:
                delattr(layer_class, name)

    layer_class.__init__ = init
    layer_class.add_weight = add_weight
    found.undo.append(restore)
    built_at = lambda operation: _construction_site(operation, sys._getframe(1), found)  # noqa: E731
    found.undo.append(watch_operations(keras, built_at, _is_layer, found.layer_sites.get))


def _construction_site(
    layer: Any, frame: FrameType | None, found: KerasWeights
) -> SourceLocation | None:
    """The line of the user's code that constructs `layer`: the innermost user frame outside the
    layer's own constructors (`super().__init__()` is not it). A layer that a library layer
    builds for itself (the dense layers of a MultiHeadAttention) has its parent's line; one
    that a TensorFlow function builds on a symbolic tensor (Keras 2's op layers inside
    `tf.nn.moments`) says so (`inside`)."""
    inner: list[tuple[str, str]] = []  # the frames below the user's, innermost first
    while frame is not None:
        code = frame.f_code
        # A method's `self` is its first argument (locals of other frames are never read).
        is_method = code.co_argcount > 0 and code.co_varnames[0] == "self"
        owner = frame.f_locals.get("self") if is_method else None
        if owner is not layer:
            if is_user_file(code.co_filename):
                column = call_column(frame)
                inside = library_entry(_until_keras(reversed(inner)))
                return SourceLocation(
                    code.co_filename, frame.f_lineno, code.co_name, column=column, inside=inside
                )
            if owner is not None and _is_layer(owner) and owner in found.layer_sites:
                return found.layer_sites[owner]
        inner.append((code.co_filename, code.co_name))
        frame = frame.f_back
    return None


def _until_keras(frames: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (file, function) frames, outermost first, up to the first of Keras's own: the way
    the user's call reached Keras (through `tf.nn.moments`, or straight from `tf.stop_gradient`)."""
    return list(itertools.takewhile(lambda frame: outside_keras(frame[0]), frames))


def backing_variable(weight: Any) -> Any:
    """The tf.Variable of a Keras weight: Keras 2's weights are one; Keras 3's wrap one, made at
    first use (None before)."""
    return weight if _is_tf_variable(weight) else getattr(weight, "_value", None)


def _is_tf_variable(value: Any) -> bool:
    tensorflow = sys.modules.get("tensorflow")
    return tensorflow is not None and isinstance(value, tensorflow.Variable)


def imported_kerases() -> list[Any]:
    """Keras 3 (`keras`) and Keras 2 (`tf_keras`), those of them already imported: asking
    about a value never imports a Keras."""
    return [module for name in ("keras", "tf_keras") if (module := sys.modules.get(name))]


def _is_layer(value: Any) -> bool:
    """Whether `value` is a Keras 3 or a Keras 2 layer."""
    return any(isinstance(value, keras.layers.Layer) for keras in imported_kerases())


def weight_path(weight: Any, layer: Any = None) -> str:
    """A Keras weight's path: Keras 3's own (`dense/kernel`), Keras 2's variable name without
    its output suffix, under the name of the `layer` that added it when Keras 2 gave it none (a
    layer built outside any call: `kernel`, which names no layer)."""
    path = getattr(weight, "path", None)
    if path is not None:
        return str(path)
    name = str(weight.name).split(":")[0]
    if layer is not None and "/" not in name and getattr(layer, "name", None):
        return f"{layer.name}/{name}"
    return name

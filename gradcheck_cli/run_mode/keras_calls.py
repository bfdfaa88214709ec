"""What a script asks of Keras, seen from its own calls: training calls that train nothing
(`fit` or `train_on_batch` on a compiled Keras 3 model whose weights are all frozen when it
runs: Keras 3 reads `trainable` at every step, so the Keras 2 habit of freezing a GAN's
discriminator after its `compile` leaves its own `train_on_batch` without a gradient request),
the line where the script last called each layer or model (a model called before the tape
opened), and, when asked, the optimizers' calls that apply a step's gradients."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import linecache
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.debug_info import is_user_file

# Keras 3's TensorFlow trainer: the class whose methods a model's training calls run.
TRAINER_MODULE = "keras.src.backend.tensorflow.trainer"
TRAINER_CLASS = "TensorFlowTrainer"
TRAINING_METHODS = ("fit", "train_on_batch")
# Keras 3's layer: every layer's and model's call.
LAYER_MODULE = "keras.src.layers.layer"
LAYER_CLASS = "Layer"

# Where an optimizer applies a step's gradients, and refuses a step whose every gradient is None
# ("No gradients provided for any variable"): Keras 3's optimizers (`apply_gradients` calls
# `apply`), Keras 2's (tf_keras) and its legacy ones. (module, class, method)
OPTIMIZER_APPLIES = (
    ("keras.src.optimizers.base_optimizer", "BaseOptimizer", "apply"),
    ("tf_keras.src.optimizers.optimizer", "Optimizer", "apply_gradients"),
    ("tf_keras.src.optimizers.legacy.optimizer_v2", "OptimizerV2", "apply_gradients"),
)

# Where a model's predictions leave TensorFlow as NumPy arrays: Keras 3's trainer and Keras 2's
# model. (module, class, methods)
PREDICTIONS = (
    ("keras.src.backend.tensorflow.trainer", "TensorFlowTrainer", ("predict", "predict_on_batch")),
    ("tf_keras.src.engine.training", "Model", ("predict", "predict_on_batch")),
)

# (model, method name) -> None, called before each training call.
OnTraining = Callable[[Any, str], None]
# (layer, the script's line that called it) -> None, for calls made by the script's own code.
OnLayerCall = Callable[[Any, SourceLocation, int], None]  # (layer, line, calls it runs inside)
# (the optimizer's own method, its arguments...) -> what the method returns: run in its place.
AroundApply = Callable[..., Any]
# (the script's line that called it, "predict") -> None, for a model's predict calls.
OnPredict = Callable[[SourceLocation, str], None]


def is_idle(model: Any) -> bool:
    """A compiled model with no trainable weight: all frozen, or none tracked at all."""
    return bool(getattr(model, "compiled", False) and not getattr(model, "trainable_weights", None))


def called_name(location: SourceLocation | None, method: str) -> str | None:
    """The name the script's line calls `method` on (`discriminator` in
    `discriminator.train_on_batch(...)`), if the line says it plainly."""
    if location is None:
        return None
    line = linecache.getline(location.file, location.line)
    found = re.search(rf"([A-Za-z_][\w.]*)\.{method}\s*\(", line)
    return found.group(1) if found else None


@dataclass
class LayerCalls:
    """The script's own calls of Keras layers: each layer's last, numbered in order, with the
    number of layer calls it ran inside (a model's call of its own layers is inside one)."""

    count: int = 0
    # id(layer) -> (the layer, the line of its last call, that call's number, its depth)
    last: dict[int, tuple[Any, SourceLocation, int, int]] = field(default_factory=dict)

    def called(self, layer: Any, where: SourceLocation, depth: int) -> None:
        self.count += 1
        self.last[id(layer)] = (layer, where, self.count, depth)

    def before(self, variable: Any, opened: int) -> tuple[SourceLocation | None, bool]:
        """(the line of the script's last outermost call of a layer or model that owns
        `variable`, when every call of those layers came before the tape opened (call number
        `opened`); whether one of them was called with the tape open, when its call before is
        not why the tape never saw the variable read)."""
        calls = []
        for layer, where, number, depth in self.last.values():
            try:
                weights = layer.weights
            except Exception:  # a layer that cannot list its weights owns none we know of
                continue
            if any(getattr(w, "value", w) is variable for w in weights):
                calls.append((depth, -number, where))
        if any(-negated > opened for _, negated, _ in calls):
            return None, True
        return (min(calls, key=lambda call: call[:2])[2] if calls else None), False


class KerasWatch:
    """Calls `on_training` before each Keras 3 training call, `on_layer_call` for each layer
    call the script's own code makes, and, if given, runs each optimizer's apply
    (OPTIMIZER_APPLIES) through `around_apply`, whether Keras is imported already (a warm
    worker) or later, by the script."""

    def __init__(
        self,
        on_training: OnTraining,
        on_layer_call: OnLayerCall,
        around_apply: AroundApply | None = None,
        on_predict: OnPredict | None = None,
    ) -> None:
        self._on_training = on_training
        self._on_layer_call = on_layer_call
        self._around_apply = around_apply
        self._on_predict = on_predict
        self._patched: list[tuple[Any, str, Any]] = []
        self._finders: list[_AfterImport] = []

    def install(self) -> None:
        patches: list[tuple[str, Callable[[ModuleType], None]]] = [
            (TRAINER_MODULE, self._patch_trainer),
            (LAYER_MODULE, self._patch_layer),
        ]
        if self._on_predict is not None:
            for module_name, owner, methods in PREDICTIONS:
                patches.append(
                    (module_name, functools.partial(self._patch_predict, owner, methods))
                )
        if self._around_apply is not None:
            for module_name, owner, method in OPTIMIZER_APPLIES:
                patches.append((module_name, functools.partial(self._patch_apply, owner, method)))
        for name, patch in patches:
            module = sys.modules.get(name)
            if module is not None:
                patch(module)
            else:
                finder = _AfterImport(name, patch)
                self._finders.append(finder)
                sys.meta_path.insert(0, finder)

    def uninstall(self) -> None:
        for finder in self._finders:
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        self._finders.clear()
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()

    def _patch_trainer(self, module: ModuleType) -> None:
        trainer = getattr(module, TRAINER_CLASS, None)
        for name in TRAINING_METHODS if trainer is not None else ():
            original = vars(trainer).get(name)
            if original is not None:
                self._patch(trainer, name, _before(original, name, self._on_training))

    def _patch_layer(self, module: ModuleType) -> None:
        layer = getattr(module, LAYER_CLASS, None)
        original = vars(layer).get("__call__") if layer is not None else None
        if original is None:
            return
        on_layer_call = self._on_layer_call

        depth = [0]  # the layer calls in progress: a call inside another is not the script's own

        def __call__(instance: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
            caller = sys._getframe(1)
            if is_user_file(caller.f_code.co_filename):
                where = SourceLocation(
                    caller.f_code.co_filename, caller.f_lineno, caller.f_code.co_name
                )
                on_layer_call(instance, where, depth[0])
            depth[0] += 1
            try:
                return original(instance, *args, **kwargs)
            finally:
                depth[0] -= 1

        __call__.__doc__ = original.__doc__
        self._patch(layer, "__call__", __call__)

    def _patch_predict(self, owner_name: str, methods: Sequence[str], module: ModuleType) -> None:
        owner = getattr(module, owner_name, None)
        on_predict = self._on_predict
        for method in methods:
            original = vars(owner).get(method) if owner is not None else None
            if original is None or on_predict is None:
                continue

            def predict(
                *args: Any, _original: Any = original, _method: str = method, **kw: Any
            ) -> Any:
                caller = sys._getframe(1)
                if is_user_file(caller.f_code.co_filename):
                    code = caller.f_code
                    on_predict(
                        SourceLocation(code.co_filename, caller.f_lineno, code.co_name), _method
                    )
                return _original(*args, **kw)

            functools.update_wrapper(predict, original)
            self._patch(owner, method, predict)

    def _patch_apply(self, owner_name: str, method: str, module: ModuleType) -> None:
        owner = getattr(module, owner_name, None)
        original = vars(owner).get(method) if owner is not None else None
        around = self._around_apply
        if original is None or around is None:
            return

        def apply(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # see Capture._wrap
            return around(original, *args, **kwargs)

        apply.__name__ = method
        apply.__doc__ = original.__doc__
        self._patch(owner, method, apply)

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._patched.append((owner, name, vars(owner)[name]))
        setattr(owner, name, replacement)


def _before(original: Any, name: str, hook: OnTraining) -> Any:
    def training(model: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # see Capture._wrap
        hook(model, name)
        return original(model, *args, **kwargs)

    training.__name__ = name
    training.__doc__ = original.__doc__
    return training


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` right after `name` is imported, once."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # the real finders find it; this one only waits for it
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module
        then = self.then

        def exec_module(module: ModuleType) -> None:
            execute(module)
            then(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec

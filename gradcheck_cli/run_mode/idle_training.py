"""Keras training calls that train nothing: `fit` or `train_on_batch` on a compiled model
whose weights are all frozen when it runs. Keras 3 reads `trainable` at every step, so the
Keras 2 habit of freezing a GAN's discriminator after its `compile` leaves its own
`train_on_batch` without a single gradient request, and only a warning says so."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import linecache
import re
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from gradcheck_cli.graph.model import SourceLocation

# Keras 3's TensorFlow trainer: the class whose methods a model's training calls run.
TRAINER_MODULE = "keras.src.backend.tensorflow.trainer"
TRAINER_CLASS = "TensorFlowTrainer"
TRAINING_METHODS = ("fit", "train_on_batch")

# (model, method name) -> None, called before each training call.
OnTraining = Callable[[Any, str], None]


def is_idle(model: Any) -> bool:
    """A compiled model with weights, none of them trainable."""
    return bool(
        getattr(model, "compiled", False)
        and getattr(model, "weights", None)
        and not getattr(model, "trainable_weights", None)
    )


def called_name(location: SourceLocation | None, method: str) -> str | None:
    """The name the script's line calls `method` on (`discriminator` in
    `discriminator.train_on_batch(...)`), if the line says it plainly."""
    if location is None:
        return None
    line = linecache.getline(location.file, location.line)
    found = re.search(rf"([A-Za-z_][\w.]*)\.{method}\s*\(", line)
    return found.group(1) if found else None


class TrainingWatch:
    """Calls `on_training` before each Keras 3 training call, whether Keras is imported
    already (a warm worker) or later, by the script."""

    def __init__(self, on_training: OnTraining) -> None:
        self._on_training = on_training
        self._patched: list[tuple[Any, str, Any]] = []
        self._finder: _AfterImport | None = None

    def install(self) -> None:
        module = sys.modules.get(TRAINER_MODULE)
        if module is not None:
            self._patch(module)
        else:
            self._finder = _AfterImport(TRAINER_MODULE, self._patch)
            sys.meta_path.insert(0, self._finder)

    def uninstall(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for owner, name, original in reversed(self._patched):
            setattr(owner, name, original)
        self._patched.clear()

    def _patch(self, module: ModuleType) -> None:
        trainer = getattr(module, TRAINER_CLASS, None)
        if trainer is None:
            return
        for name in TRAINING_METHODS:
            original = vars(trainer).get(name)
            if original is None:
                continue
            self._patched.append((trainer, name, original))
            setattr(trainer, name, self._wrapped(original, name))

    def _wrapped(self, original: Any, name: str) -> Any:
        on_training = self._on_training

        def training(model: Any, *args: Any, **kwargs: Any) -> Any:
            on_training(model, name)
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

"""Trace a Keras model's own objective: a script's model, a live model, a .keras / .h5 file."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gradcheck_cli.errors import GradcheckError, display_path
from gradcheck_cli.graph.model import CreationNames, SourceLocation
from gradcheck_cli.source_code import keras_archive
from gradcheck_cli.source_code.keras_archive import check_weight_datasets
from gradcheck_cli.tracing.function_tracing import trace_loss
from gradcheck_cli.tracing.keras_objective import Tape, backing_variable
from gradcheck_cli.tracing.keras_weights import KerasWeights
from gradcheck_cli.worker import progress
from gradcheck_cli.worker.protocol import TracedFunction


def is_keras_model(value: Any) -> bool:
    """Whether `value` is a Keras 3 or a Keras 2 (tf_keras) model; never imports Keras to find
    out."""
    from gradcheck_cli.tracing.keras_objective import keras_of

    return keras_of(value) is not None


def trace_keras_model(
    model: Any,
    loss: str | None,
    name: str,
    candidates: list[Any],
    keras: KerasWeights,
    created_at: dict[int, SourceLocation | None],
    verify: bool,
    script: Path | None = None,
    names: CreationNames | None = None,
) -> TracedFunction:
    """The model's own objective; with model.losses, also the data loss alone (for GC206).
    `script`: the script that holds the model as its attribute `name` (`--loss model`);
    `names`: the script's names for its variables."""
    from gradcheck_cli.tracing.keras_objective import keras_objective

    objective = keras_objective(model, loss, name, script)
    keras.settle()
    # The optimizer's slots and the metrics' counters are Keras's bookkeeping, not the model's
    # (Keras 2 builds its compiled loss's metrics while the objective is traced).
    bookkeeping = {id(backing_variable(v)) for v in _bookkeeping_variables(model)}
    candidates = [v for v in candidates if id(v) not in bookkeeping]
    weights = [backing_variable(w) for w in model.weights]
    for weight, backing in zip(model.weights, weights):
        keras.info.setdefault(id(backing), (keras.path(weight), bool(weight.trainable)))
    known = {id(v) for v in candidates}
    candidates = candidates + [v for v in weights if id(v) not in known]
    if objective.tapes:
        return _trace_tapes(objective.tapes, model, name, keras, created_at, verify, names)
    traced = {"created_at": created_at, "keras": keras, "left_out": bookkeeping, "names": names}
    result = trace_loss(objective.full, name, candidates, verify=verify, **traced)
    if objective.data_only is not None:
        result.data_only = trace_loss(objective.data_only, name, candidates, verify=False, **traced)
    return result


def _trace_tapes(
    tapes: list[Tape],
    model: Any,
    name: str,
    keras: KerasWeights,
    created_at: dict[int, SourceLocation | None],
    verify: bool,
    names: CreationNames | None = None,
) -> TracedFunction:
    """Each tape's target over the variables that tape differentiates; the first tape's result
    carries the others, and the trainable weights that no tape differentiates."""
    import tensorflow as tf

    results = []
    listed: set[int] = set()
    for tape in tapes:
        variables = []
        for source in tf.nest.flatten(tape.sources):
            backing = backing_variable(source)
            if backing is None:
                continue
            if backing is not source:
                keras.info.setdefault(id(backing), (keras.path(source), bool(source.trainable)))
            variables.append(backing)
        variables = list({id(v): v for v in variables}.values())
        listed |= {id(v) for v in variables}
        result = trace_loss(
            tape.target,
            name,
            variables,
            verify=verify,
            created_at=created_at,
            keras=keras,
            names=names,
        )
        # The candidates come first; the other variables the step reads are not this tape's.
        result.tape_variables = tuple(r.variable.name for r in result.variables[: len(variables)])
        results.append(result)
    first, *others = results
    first.other_tapes = others

    def named(weight: Any) -> str:
        path, backing = keras.path(weight), backing_variable(weight)
        return path if names is None or backing is None else names.name(backing, path)

    # Frozen weights are told once, as frozen, by the first tape.
    first.tape_variables = (first.tape_variables or ()) + tuple(
        named(w) for w in model.non_trainable_weights
    )
    first.untrained = tuple(
        named(w) for w in model.trainable_weights if id(backing_variable(w)) not in listed
    )
    if others:
        first.loss_name = f"{name}.train_step ({len(results)} GradientTape targets)"
    return first


def _bookkeeping_variables(model: Any) -> list[Any]:
    """The metrics' and the optimizer's variables (Keras 3 lists them as properties; Keras 2's
    legacy optimizers as a method), and a Keras 2 model's step counters."""
    variables = list(getattr(model, "metrics_variables", []) or [])
    compiled = getattr(model, "compiled_loss", None)  # Keras 2's loss container
    for metric in [*(getattr(model, "metrics", []) or []), *getattr(compiled, "metrics", [])]:
        variables += list(getattr(metric, "variables", []) or [])
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:
        listed = getattr(optimizer, "variables", [])
        variables += list((listed() if callable(listed) else listed) or [])
    for counter in ("_train_counter", "_test_counter", "_predict_counter"):
        if getattr(model, counter, None) is not None:
            variables.append(getattr(model, counter))
    return [v for v in variables if backing_variable(v) is not None]


def load_keras_file(
    path: Path, loss: str | None, verify: bool, unsafe: bool, imports: tuple[str, ...] = ()
) -> TracedFunction:
    """A `.keras` / `.h5` model, deserialized with Keras's safe mode unless told otherwise,
    after importing the user's `imports` (the code that registers its custom classes).

    A file whose compile information Keras cannot load back (a custom function no imported
    code registers; Keras 3's own `.h5` files compiled with a loss named by a string, "mse")
    is loaded without it: `loss` then names the loss to check the model with, else the model
    is compiled with the loss its compile information names, if gradcheck resolves it."""
    check_weight_datasets(path)
    import_user_code(imports)
    loss_name = None
    try:
        model = _loaded(path, unsafe, compile=True)
    except Exception as error:
        try:
            model = _loaded(path, unsafe, compile=False)
        except Exception:
            raise GradcheckError(_load_error(path, error)) from None
        if loss is None:
            loss_name = _compiled_as_the_file_says(model, path, error)
    progress.say(f"tracing the objective of {path.name}...")
    try:
        with without_warnings_gradcheck_causes():
            result = trace_live_keras_model(model, loss, path.name, verify)
            if loss_name is not None and not result.other_tapes:
                result.loss_name = loss_name
            return result
    except Exception as error:
        if not _raised_running_the_model(error):
            raise
        # The file's model fails in Keras's own code (a layer name Keras refuses as a scope):
        # the model's problem, told in Keras's words.
        raise GradcheckError(
            f"{display_path(path)} holds a model that Keras cannot run: {_keras_message(error)}"
        ) from None


def _loaded(path: Path, unsafe: bool, *, compile: bool) -> Any:
    with without_warnings_gradcheck_causes(), _scopes_of_saved_layers(path):
        return _keras_that_wrote(path).saving.load_model(
            str(path), safe_mode=not unsafe, compile=compile
        )


def _compiled_as_the_file_says(model: Any, path: Path, error: BaseException) -> str:
    """Compile `model`, loaded without the compile information Keras could not load back
    (`error`), with the loss and loss weights that information names, each resolved as `--loss`
    is; the objective is then what `fit` minimises. What the report calls the loss."""
    config = keras_archive.compiled_loss(path)
    try:
        if config is None:
            raise keras_archive.UnresolvedLoss(None)
        losses = keras_archive.resolved_loss(_keras_that_wrote(path), config.loss)
    except keras_archive.UnresolvedLoss as unresolved:
        from gradcheck_cli.tracing import traced

        advice = "--loss mse, --loss sparse_categorical_crossentropy, ..."
        if unresolved.named is None or _told_load_error(path, error) is not None:
            raise GradcheckError(
                f"{_load_error(path, error)}; or name a Keras loss to check the model with "
                f"instead ({advice}): its compiled loss is then left unloaded"
            ) from None
        raise GradcheckError(
            f"Keras cannot compile the model of {display_path(path)} back "
            f"({traced.error_summary(error)}), and the loss its compile information names, "
            f"{unresolved.named!r}, is not a Keras loss gradcheck can resolve: name the loss to "
            f"check the model with ({advice})"
        ) from None
    words = keras_archive.loss_words(config.loss)
    try:
        model.compile(loss=losses, loss_weights=config.loss_weights)
    except Exception as failure:  # a loss structure that does not fit the model's outputs
        raise GradcheckError(
            f"Keras cannot compile the model of {display_path(path)} with the loss its compile "
            f"information names, {words}: {_keras_message(failure)}; name the loss to check the "
            "model with (--loss mse, --loss sparse_categorical_crossentropy, ...)"
        ) from None
    return f"compiled loss {words} + model.losses"


def _load_error(path: Path, error: BaseException) -> str:
    """What to tell of Keras's `error` loading `path`, with what to do about it."""
    from gradcheck_cli.tracing import traced

    told = _told_load_error(path, error)
    return told or f"{display_path(path)} cannot be loaded by Keras: {traced.error_summary(error)}"


def _told_load_error(path: Path, error: BaseException) -> str | None:
    """What to tell of an `error` gradcheck knows the cause of, with what to do; else None."""
    unlocated = _unregistered_class(str(error))
    if unlocated is not None:
        return f"{display_path(path)} cannot be loaded by Keras: {unlocated}"
    code = _code_refused_by_safe_mode(str(error))
    if code is not None:
        return (
            f"{display_path(path)} holds {code}, and loading it would run code stored in the "
            "file, which Keras's safe mode refuses; if you trust the file, pass "
            "--unsafe-deserialization (unsafe_deserialization=True from Python)"
        )
    if "No model config found" in str(error):  # Keras's word for a weights-only file
        return (
            f"{display_path(path)} holds weights only, no model (model.save_weights() wrote "
            "it): save the model itself (model.save('model.keras')), or check the script that "
            "builds it (gradcheck run train.py)"
        )
    return None


def _raised_running_the_model(error: BaseException) -> bool:
    """Whether `error` came from Keras's code below gradcheck's own (a layer of the model)."""
    import traceback

    files = [frame.filename for frame in traceback.extract_tb(error.__traceback__)]
    ours = max((n for n, file in enumerate(files) if "/gradcheck_cli/" in file), default=-1)
    return any("/keras/" in file or "/tf_keras/" in file for file in files[ours + 1 :])


def _keras_message(error: BaseException) -> str:
    """Keras's own words: no "Exception encountered" heading, argument list or styling."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).split("Arguments received by")[0]
    said = [line.strip() for line in text.splitlines() if line.strip()]
    return " ".join(x for x in said if not x.startswith("Exception encountered")) or repr(error)


def _keras_that_wrote(path: Path) -> Any:
    """The Keras that saved `path`, by the version it wrote down (a `.keras` archive's
    metadata.json, a `.h5` file's attribute): Keras 2 (`tf_keras`) for 2.x and for a SavedModel
    folder (Keras 3 reads none), else Keras 3."""
    if path.is_dir() or (keras_archive.written_version(path) or "3").startswith("2."):
        try:
            import tf_keras
        except ImportError:
            raise GradcheckError(
                f"{display_path(path)} was saved by Keras 2 (tf_keras), which is not installed "
                "here: pip install tf-keras"
            ) from None
        return tf_keras
    import keras

    return keras


@contextlib.contextmanager
def _scopes_of_saved_layers(path: Path) -> Iterator[None]:
    """The custom-object scopes of the libraries whose layers a Keras 2 file may hold: TF-MOT's
    quantization wrappers (QuantizeLayer, QuantizeWrapperV2) load only inside its scope, and
    TF-Hub's KerasLayer only when named."""
    with contextlib.ExitStack() as scopes:
        quantized = keras_archive.mentions(path, b"Quantize")
        if "tensorflow_model_optimization" in sys.modules or quantized:
            with contextlib.suppress(ImportError):
                import tensorflow_model_optimization as tfmot

                scopes.enter_context(tfmot.quantization.keras.quantize_scope())
        if keras_archive.mentions(path, b'"KerasLayer"'):  # TF-Hub's layer, registered by no name
            with contextlib.suppress(ImportError):
                import tensorflow_hub as hub

                keras = _keras_that_wrote(path)
                scopes.enter_context(
                    keras.utils.custom_object_scope({"KerasLayer": hub.KerasLayer})
                )
        yield


# What Keras warns about gradcheck's own calls, not about the user's model: the optimizer's
# variables are not loaded (gradcheck never trains, so it never builds them), and gradcheck
# calls a functional model on plain tensors where it was built on a named structure.
_CAUSED_BY_GRADCHECK = (
    r"Skipping variable loading for optimizer",
    r"The structure of `inputs` doesn't match the expected structure",
)


@contextlib.contextmanager
def without_warnings_gradcheck_causes() -> Iterator[None]:
    """Keras's warnings about gradcheck's own loading and tracing calls left out (Keras 2 logs
    them through absl); any other warning still shows."""
    import logging

    absl = logging.getLogger("absl")
    absl.addFilter(_not_caused_by_gradcheck)
    try:
        with warnings.catch_warnings():
            for message in _CAUSED_BY_GRADCHECK:
                warnings.filterwarnings("ignore", message=message, category=UserWarning)
            yield
    finally:
        absl.removeFilter(_not_caused_by_gradcheck)


def _not_caused_by_gradcheck(record: Any) -> bool:
    """A logging filter: False for a record that says what _CAUSED_BY_GRADCHECK matches."""
    text = record.getMessage()
    return not any(re.match(message, text) for message in _CAUSED_BY_GRADCHECK)


@contextlib.contextmanager
def warnings_told_by_their_cause() -> Iterator[None]:
    """In the worker, around the job: a warning that a library (Keras, TensorFlow) raises on a
    call gradcheck's own code made (tracing a model's objective, computing its loss, building
    it, loading a file) is told as gradcheck's line (`gradcheck: Keras warned when gradcheck
    called it: ...`), which the parent never labels with the script's name, or left out when
    it is about that call alone (_CAUSED_BY_GRADCHECK); a warning that the user's own code
    raised, itself or in a library it called (through gradcheck's hooks too, as `gradcheck
    run` watches a `fit`), is shown as Python shows it, as the script's.

    Who caused it is read off the stack: gradcheck's call when no frame of the user's code
    lies between the one that warned and the job's own (the `with` of this).
    """
    job = sys._getframe(2)  # past contextlib's __enter__
    shown = warnings.showwarning

    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        warner = _warner_on_gradcheck_s_call(sys._getframe(1), job)
        if warner is None:
            shown(message, category, filename, lineno, file, line)
            return
        text = " ".join(str(message).split())  # one line: the parent labels every other line
        if any(re.match(caused, text) for caused in _CAUSED_BY_GRADCHECK):
            return
        stream = file if file is not None else sys.stderr
        with contextlib.suppress(Exception):  # no stderr left: Python drops a warning too
            stream.write(
                f"gradcheck: {_library_of(warner)} warned when gradcheck called it: "
                f"{category.__name__}: {text}\n"
            )

    warnings.showwarning = showwarning
    try:
        yield
    finally:
        if warnings.showwarning is showwarning:  # unless the user's code replaced it since
            warnings.showwarning = shown


# What autograph made of a function it converted: the user's code (gradcheck converts its own
# only to reach a user's train_step).
_AUTOGRAPH = "__autograph_generated_file"


def _warner_on_gradcheck_s_call(frame: Any, job: Any) -> str | None:
    """The file that called `warnings.warn`, when walking out from `frame` reaches the `job`'s
    frame before any frame of the user's code (the script, a notebook cell, a module of
    theirs); else None."""
    from gradcheck_cli.source_code.debug_info import is_user_file

    warner = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if frame is job:
            return warner or filename
        if is_user_file(filename) or _AUTOGRAPH in filename:  # the user's code, converted
            return None
        if warner is None and filename != warnings.__file__:
            warner = filename
        frame = frame.f_back
    return None  # another thread's warning


def _library_of(filename: str) -> str:
    """Who warned from `filename`: "Keras", "TensorFlow", another installed package's folder
    name, else "Python"."""
    parts = Path(filename).parts
    if "keras" in parts or "tf_keras" in parts:
        return "Keras"
    if "tensorflow" in parts:
        return "TensorFlow"
    for index, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return parts[index + 1].removesuffix(".py")
    return "Python"


def _code_refused_by_safe_mode(error: str) -> str | None:
    """What Keras's safe mode refused to deserialize ("a Lambda layer", "a Python lambda"),
    or None when that is not the error. Keras's own advice (`safe_mode=False`,
    `enable_unsafe_deserialization()`) names its Python API, not gradcheck's option."""
    if "safe_mode" not in error and "unsafe_deserialization" not in error:
        return None
    found = re.search(r"deserialization of (an? .+?)(?: whose| which|[.,])", error)
    return found.group(1).replace("`", "") if found else "Python code"


def _users_module(name: str) -> bool:
    """Whether `name` (read from the model file, which anyone may have written) is a module of
    the user's own code in the working folder: advice never repeats any other module a file
    names (`os`, `builtins`, an installed package)."""
    top = name.split(".")[0]
    if top in sys.builtin_module_names or top in sys.stdlib_module_names or top == "__main__":
        return False
    here = Path.cwd()
    return (here / f"{top}.py").is_file() or (here / top / "__init__.py").is_file()


def _unregistered_class(error: str) -> str | None:
    """What to say when Keras's error is that a custom class is not registered here."""
    found = re.search(r"Could not locate (\w+) '([^']+)'", error)
    if found is None:  # Keras 2's words: "Unknown loss function: 'my_loss'"
        found = re.search(r"Unknown ((?:\w+ )?\w+): '([^']+)'", error)
    if found is None:
        return None
    kind, name = found.groups()
    module = re.compile(r"'module': '([\w.]+)'").search(error, found.end())
    where = module.group(1) if module else ""
    target = where if where and _users_module(where) else "MODULE"
    return (
        f"it uses the custom {kind} {name!r}, which no imported code registers; pass "
        f"--import {target} (a module or a .py file; or `import = [...]` in [tool.gradcheck]) "
        "naming the code that defines it with @keras.saving.register_keras_serializable()"
    )


def import_user_code(imports: tuple[str, ...]) -> None:
    """Import each module (from the working directory) or .py file, in order."""
    import importlib
    import importlib.util

    if imports and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for entry in imports:
        try:
            if entry.endswith(".py") or "/" in entry or os.sep in entry:
                path = Path(entry).resolve()
                if not path.is_file():
                    raise FileNotFoundError(f"no such file: {path}")
                sys.path.insert(0, str(path.parent))
                spec = importlib.util.spec_from_file_location(path.stem, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(entry)
        except BaseException as error:  # also SystemExit: the user's code is not gradcheck's
            raise GradcheckError(
                f"--import {entry}: cannot import it: {type(error).__name__}: {error}"
            ) from None


def trace_live_keras_model(model: Any, loss: str | None, name: str, verify: bool) -> TracedFunction:
    """A live Keras model's own objective (a loaded file's, or one handed to the library)."""
    result = trace_keras_model(model, loss, name, [], KerasWeights(), {}, verify)
    if not result.other_tapes:
        result.loss_name = loss or "compiled loss + model.losses"
    return result

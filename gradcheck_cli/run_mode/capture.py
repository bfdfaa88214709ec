"""Catch a running script's gradient requests and stop it before its first weight change (once
the step reached every request the script holds)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.run_mode import gradient_requests, graph_requests
from gradcheck_cli.run_mode.eager_recording import OpRecorder
from gradcheck_cli.run_mode.gradient_requests import CreatedVariables
from gradcheck_cli.run_mode.graph_requests import Snapshots
from gradcheck_cli.run_mode.keras_calls import KerasWatch, LayerCalls, called_name, is_idle
from gradcheck_cli.run_mode.untrained import untrained
from gradcheck_cli.source_code.request_sites import StepProgress
from gradcheck_cli.tracing.leaving_tensorflow import (
    LEAVING_METHODS,
    TRUTH_VALUE,
    LeaveLog,
    first_leave,
    leaving_owners,
)
from gradcheck_cli.worker.protocol import (
    GradientRequest,
    IdleTraining,
    RunResult,
    Traced,
    TracedFunction,
    TracedGraph,
)


class CaptureFailed(BaseException):  # noqa: N818 - it stops the script, like ScriptStopped
    """gradcheck could not read a gradient request: the script is stopped and the run fails."""


class ScriptStopped(BaseException):  # noqa: N818 - not an error: the check is done
    """Raised inside the script at its first weight change; a BaseException, so that the script's
    own `except Exception` handlers let it through."""


@dataclass
class _Patch:
    owner: Any
    attribute: str
    original: Any
    own: bool  # the owner's own attribute, not one it inherits: removed again, not set


@dataclass
class Capture:
    """The hooks of one run. `deliver` takes the result once the script is about to change a
    weight (or ends); with `run_on` the script then goes on, else it is stopped."""

    deliver: Callable[[RunResult], None]
    run_on: bool = False
    # The step goes on to the requests the script holds further on (`gradcheck run`); in the
    # program's own process (watch(), the Keras callback) it stops at the first weight change.
    whole_steps: bool = False
    # Told when a request cannot be read, instead of stopping the program (its own process).
    failed: Callable[[CaptureFailed], None] | None = None
    # Takes each graph request (a traced step's) once it is made, before the program goes on.
    share: Callable[[Traced], None] | None = None
    # Runs, as (the call, its arguments...), the calls a failing step raises through (a
    # tf.function's, a Keras optimizer's apply): watch() reports the step before the error.
    around_failures: Callable[..., Any] | None = None
    created: CreatedVariables = field(default_factory=CreatedVariables)
    requests: list[GradientRequest] = field(default_factory=list)
    # Requests for tensors only, no variable (a deep dream's image): the first's API and place.
    first_tensor_request: tuple[str, SourceLocation | None] | None = None
    tensor_request_count: int = 0
    # Keras training calls on a model with no trainable weight then, with the model (`idle`).
    _idle_calls: list[tuple[IdleTraining, Any]] = field(default_factory=list)
    # The script's last Keras training call (`model.fit`) and its line: what a gradient request
    # made from that same line called.
    _training_call: tuple[str, SourceLocation | None] = ("", None)
    delivered: bool = False
    _patches: list[_Patch] = field(default_factory=list)
    _busy: int = 0  # inside one of gradcheck's own calls: TensorFlow's nested calls are its own
    _leaves: LeaveLog = field(init=False)  # values that left TensorFlow in the script's code
    _requested: set[int] = field(default_factory=set)  # ids of the requested tf.Variables
    _snapshots: Snapshots = field(default_factory=Snapshots)  # of the requests while tracing
    _recorder: OpRecorder = field(init=False)  # the ops each eager tape runs
    _keras: KerasWatch = field(init=False)  # Keras's training and layer calls
    _layer_calls: LayerCalls = field(default_factory=LayerCalls)  # the script's layer calls
    # The arguments of each tf.function call in progress, innermost last.
    _arguments: list[graph_requests.Arguments] = field(default_factory=list)
    _step: StepProgress = field(default_factory=StepProgress)  # requests it has not reached

    def __post_init__(self) -> None:
        self._recorder = OpRecorder(busy=lambda: bool(self._busy))
        self._leaves = LeaveLog(busy=lambda: bool(self._busy))
        # A model's predictions leave TensorFlow as NumPy arrays, as a `.numpy()` would.
        watch = (self._keras_training, self._layer_called, self.around_failures)
        self._keras = KerasWatch(*watch, on_predict=self._leaves.record)

    # -- installing ----------------------------------------------------------------------------

    def install(self) -> None:
        import tensorflow as tf
        from tensorflow.python.client import session
        from tensorflow.python.eager.polymorphic_function import atomic_function
        from tensorflow.python.eager.polymorphic_function import polymorphic_function as function
        from tensorflow.python.ops import gradients_util, resource_variable_ops
        from tensorflow.python.training import optimizer as v1_optimizer

        self._wrap(tf.GradientTape, "gradient", self._tape_gradient)
        self._recorder.watch_reads(self.created.reads)
        self._keras.install()
        self._wrap(tf.GradientTape, "__enter__", self._tape_enter)
        self._wrap(tf.GradientTape, "__exit__", self._tape_exit)
        for method in ("jacobian", "batch_jacobian"):  # their inner gradients are not requests
            self._wrap(tf.GradientTape, method, self._inside_tensorflow)
        self._wrap(gradients_util, "_GradientsHelper", self._graph_gradients)
        self._wrap(atomic_function.AtomicFunction, "call_flat", self._function_call)
        self._wrap(function.Function, "__call__", self._tf_function_call)
        self._wrap(session.BaseSession, "run", self._stop_before_session_run)
        self._wrap(v1_optimizer.Optimizer, "apply_gradients", self._stop_before_eager_call)
        for owner in (
            resource_variable_ops.BaseResourceVariable,
            resource_variable_ops.ResourceVariable,
        ):
            for method in _WEIGHT_UPDATES:
                if method in vars(owner):
                    self._wrap(owner, method, self._stop_before_assign)
        for owner in leaving_owners():
            for method in (*LEAVING_METHODS, TRUTH_VALUE):
                if hasattr(owner, method):
                    self._wrap(owner, method, self._leaves.hook(method))

    def track_variables(self) -> None:
        """Record every tf.Variable created from now on, and what Keras says of its weights."""
        from tensorflow.python.eager.polymorphic_function import polymorphic_function
        from tensorflow.python.ops import resource_variable_ops

        from gradcheck_cli.tracing.keras_weights import track_keras_weights

        # A variable made while a tf.function traces its first call (a module that builds its
        # weights on its first call, as Sonnet's and many tf.Modules do, inside the step) is
        # an UnliftedInitializerVariable, whose constructor is not ResourceVariable's.
        for owner in (
            resource_variable_ops.ResourceVariable,
            polymorphic_function.UnliftedInitializerVariable,
        ):
            self._record_creations(owner)
        self.created.keras = track_keras_weights()

    def _record_creations(self, owner: type) -> None:
        original = vars(owner)["__init__"]
        created = self.created

        # Called straight from the variable's constructor, as CreatedVariables.add expects: it
        # reads the stack above this frame.
        def init(variable: Any, *args: Any, **kwargs: Any) -> None:
            original(variable, *args, **kwargs)
            created.add(variable)

        self._patches.append(_Patch(owner, "__init__", original, own=True))
        owner.__init__ = init  # type: ignore[method-assign]

    def uninstall(self) -> None:
        """Every hook removed: TensorFlow's and Keras's classes as they were before."""
        self._recorder.close()
        self._keras.uninstall()
        self.created.keras.stop()
        for patch in reversed(self._patches):
            if patch.own:
                setattr(patch.owner, patch.attribute, patch.original)
            else:
                delattr(patch.owner, patch.attribute)
        self._patches.clear()

    def _wrap(self, owner: Any, attribute: str, hook: Callable[..., Any]) -> None:
        original = getattr(owner, attribute)
        own = attribute in vars(owner)
        self._patches.append(_Patch(owner, attribute, vars(owner)[attribute] if own else None, own))

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # A check that stops the program in its own process (watch()) raises through here:
            # the user's traceback (IPython's, pytest's) leaves gradcheck's frames out.
            __tracebackhide__ = True
            return hook(original, *args, **kwargs)

        wrapper.__name__ = getattr(original, "__name__", attribute)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, attribute, wrapper)

    # -- gradient requests ---------------------------------------------------------------------

    def _tape_enter(self, original: Any, tape: Any) -> Any:
        tape._gradcheck_started = self._leaves.clock  # noqa: SLF001 - our own mark on the tape
        tape._gradcheck_created = len(self.created.variables)  # noqa: SLF001
        tape._gradcheck_layer_calls = self._layer_calls.count  # noqa: SLF001
        entered = original(tape)
        recording = not self._busy and not self.delivered and _executing_eagerly()
        tape._gradcheck_ops = self._recorder.tape_entered() if recording else None  # noqa: SLF001
        return entered

    def _tape_exit(self, original: Any, tape: Any, *args: Any) -> Any:
        if getattr(tape, "_gradcheck_ops", None) is not None:
            self._recorder.tape_exited()
        return original(tape, *args)

    def _tape_gradient(
        self, original: Any, tape: Any, target: Any, sources: Any, *args: Any, **kwargs: Any
    ) -> Any:
        import tensorflow as tf

        variables = gradient_requests.variables_of(sources)
        if self._busy or self.delivered or not variables:
            if not self._busy and not self.delivered:
                self._tensors_only("GradientTape.gradient")
            return original(tape, target, sources, *args, **kwargs)
        location = _caller_location()
        api = self._training_call[0] if location == self._training_call[1] else ""
        api = api or "GradientTape.gradient"
        label = _label(api, location)
        self._busy += 1
        try:
            if tf.executing_eagerly():
                since = getattr(tape, "_gradcheck_started", 0)
                left = first_leave(self._leaves.leaves, since)
                watched = {id(v) for v in tape.watched_variables()}
                ops = self._recorder.ops_since(getattr(tape, "_gradcheck_ops", None))
                gradients = original(tape, target, sources, *args, **kwargs)
                made = getattr(tape, "_gradcheck_created", None)
                used = [t for op in ops or () for t in op.inputs] + tf.nest.flatten(target)
                loss = target if ops == [] else None  # a loss the tape saw no op compute
                read = gradient_requests.read_before(self.created, used, location, loss)
                request = (variables, gradients, watched, left, self.created, label, made, read)
                result: Any = gradient_requests.eager_request(*request)
                if ops is not None:
                    opened = getattr(tape, "_gradcheck_layer_calls", 0)
                    result = self._reconstructed(result, ops, target, variables, opened)
            else:
                read = (api, location, target, variables, self.created, label)
                passed = self._arguments[-1:]  # the tf.function being traced, if one is
                result = self._reading(location, self._snapshots.take, *read, passed)
                gradients = original(tape, target, sources, *args, **kwargs)
                if result is None:  # a loop's pass snapshotted already, or unreadable
                    self._record(None, variables)
                    return gradients
                graph_requests.with_tensorflow_verdicts(result, variables, gradients)
        finally:
            self._busy -= 1
        self._record(GradientRequest(api, location, result), variables)
        return gradients

    def _reconstructed(
        self,
        eager: Any,
        ops: list[Any],
        target: Any,
        variables: list[tuple[int, Any]],
        opened: int,
    ) -> Any:
        try:
            return gradient_requests.reconstructed_request(
                eager,
                ops,
                self._recorder.functions,
                target,
                variables,
                self.created,
                lambda variable: self._layer_calls.before(variable, opened),
            )
        except Exception:  # an op the rebuild cannot express: TensorFlow's verdict stands
            return eager

    def _graph_gradients(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        bound = graph_requests.bound_arguments(original, args, kwargs)
        if self._busy or self.delivered or not bound or bound.get("src_graph") is not None:
            return original(*args, **kwargs)
        variables = graph_requests.graph_variables_of(bound["xs"])
        if not variables:
            self._tensors_only(graph_requests.graph_api())
            return original(*args, **kwargs)
        location = _caller_location()
        api = graph_requests.graph_api()
        self._busy += 1
        try:
            read = (api, location, bound["ys"], variables, self.created, _label(api, location))
            result = self._reading(location, self._snapshots.take, *read, self._arguments[-1:])
            gradients = original(*args, **kwargs)
            if result is None:  # a loop's pass snapshotted already, or unreadable
                self._record(None, variables)
                return gradients
            graph_requests.with_tensorflow_verdicts(result, variables, gradients)
        finally:
            self._busy -= 1
        self._record(GradientRequest(api, location, result), variables)
        return gradients

    def _tf_function_call(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        # A step traced now reads them as its inputs. The caller's frame, not its location: every
        # call of a tf.function passes here, and only a traced request reads where it was made.
        self._arguments.append(graph_requests.Arguments((args[1:], kwargs), sys._getframe(1)))
        try:
            if self.around_failures is not None:
                return self.around_failures(original, *args, **kwargs)
            return original(*args, **kwargs)
        finally:
            self._arguments.pop()

    def _reading(
        self, location: SourceLocation | None, read: Callable[..., Any], *args: Any
    ) -> Any:
        """`read(*args)`; if gradcheck cannot read the request, CaptureFailed, or, when the
        capture has `failed`, None: the hooks are gone, `failed` is told and the program goes
        on untouched."""
        try:
            return _reading(location, read, *args)
        except CaptureFailed as failure:
            if self.failed is None:
                raise
            self.delivered = True
            self.uninstall()
            self.failed(failure)
            return None

    def _inside_tensorflow(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        self._busy += 1
        try:
            return original(*args, **kwargs)
        finally:
            self._busy -= 1

    def _tensors_only(self, api: str) -> None:  # gradients of tensors alone: no variable
        self.tensor_request_count += 1
        if self.first_tensor_request is None:
            self.first_tensor_request = (api, _caller_location())

    def _record(self, request: GradientRequest | None, variables: list[tuple[int, Any]]) -> None:
        if request is not None:
            self.requests.append(request)
            if self.share is not None and isinstance(request.result, (TracedGraph, TracedFunction)):
                self.share(request.result)
        for _, variable in variables:
            backing = gradient_requests.backing(variable)
            self._requested.add(id(backing))
            # A distributed variable (MirroredStrategy) trains its components with it.
            for component in getattr(backing, "values", ()) or ():
                self._requested.add(id(component))

    def _keras_training(self, model: Any, method: str) -> None:
        if self._busy or self.delivered:
            return
        location = _caller_location()
        called = called_name(location, method)
        self._training_call = (f"{called or 'Model'}.{method}", location)
        name = called or model.name
        if not is_idle(model):
            return
        if (name, location) not in {(i.model, i.location) for i, _ in self._idle_calls}:
            api = f"{name}.{method}"
            self._idle_calls.append((IdleTraining(api, name, location, 0), model))

    @property
    def idle(self) -> list[IdleTraining]:
        """The Keras training calls that trained nothing: their model has no trainable weight."""
        calls = self._idle_calls
        return [replace(call, frozen=len(m.weights)) for call, m in calls if is_idle(m)]

    def _layer_called(self, layer: Any, where: SourceLocation, depth: int) -> None:
        if not self._busy and not self.delivered:
            self._layer_calls.called(layer, where, depth)

    # -- stopping before a weight changes ------------------------------------------------------

    def _function_call(self, original: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        from tensorflow.python.eager import context

        self._recorder.function_called(function)
        if self.requests and not self._busy and context.executing_eagerly():
            self._before_weight_change(("function", id(function)))
        return original(function, *args, **kwargs)

    def _stop_before_eager_call(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        from tensorflow.python.eager import context

        if self.requests and not self._busy and context.executing_eagerly():
            self._before_weight_change(("call", id(args[0]) if args else 0))
        return original(*args, **kwargs)

    def _stop_before_session_run(self, original: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if self.requests and not self._busy:
            self.finish()
        return original(*args, **kwargs)

    def _stop_before_assign(self, original: Any, variable: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        from tensorflow.python.eager import context

        if (
            self.requests
            and not self._busy
            and id(variable) in self._requested
            and context.executing_eagerly()
        ):
            self._before_weight_change(("variable", id(variable)))
        return original(variable, *args, **kwargs)

    def _before_weight_change(self, changing: tuple[str, int]) -> None:
        """Finish before `changing` (a function, an optimizer, a variable) changes weights, once
        the step is whole (`StepProgress`): a step goes on to the requests it holds further on."""
        __tracebackhide__ = True
        if not self.whole_steps or self._step.whole(self._reached(), changing):
            self.finish()

    def _reached(self) -> list[SourceLocation | None]:
        return [request.location for request in gradient_requests.distinct(self.requests)]

    def finish(self) -> None:
        """Deliver what the script asked for; stop it unless it runs on."""
        __tracebackhide__ = True
        if self.delivered:
            return
        self.delivered = True
        self.uninstall()
        requests = gradient_requests.distinct(self.requests)
        u = untrained(self.created, self._requested)
        later = self._step.unreached([request.location for request in requests])
        self.deliver(
            RunResult(requests, u.variables, [*self.idle], u.left_out, u.copies, later, (*u.fixed,))
        )
        if not self.run_on:
            if threading.current_thread() is not threading.main_thread():
                _stop_the_process()
            raise ScriptStopped


# What an optimizer calls on a variable to change it (sparse gradients use the scatters).
_WEIGHT_UPDATES = (
    "assign",
    "assign_add",
    "assign_sub",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
)


def _stop_the_process() -> None:
    """Stop the whole script from a thread that asked for gradients (ScriptStopped would end
    that thread only): the result is written already; gradcheck ends what the script started."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]
    os._exit(0)


def _reading(location: SourceLocation | None, read: Callable[..., Any], *args: Any) -> Any:
    """`read(*args)`, a gradcheck failure stopping the script rather than raising in its code."""
    try:
        return read(*args)
    except Exception as error:
        where = f" at {location}" if location is not None else ""
        raise CaptureFailed(
            f"gradcheck could not read the gradient request{where}: {type(error).__name__}: "
            f"{error} (run with --debug for the traceback)"
        ) from error


def _executing_eagerly() -> bool:
    from tensorflow.python.eager import context

    return bool(context.executing_eagerly())


def _label(api: str, location: SourceLocation | None) -> str:
    return f"{api} at {location.file}:{location.line}" if location is not None else api


def _caller_location() -> SourceLocation | None:
    """The innermost frame of the script's own code on the current stack; TensorFlow's stack
    maps the code autograph generates for a tf.function back to the user's lines."""
    from tensorflow.python.util import tf_stack

    from gradcheck_cli.tracing.traced import user_location

    return user_location(tf_stack.extract_stack())

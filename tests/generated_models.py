"""Random TF2 programs for the oracle tests: small tf.Modules whose loss mixes live and cut paths.

`generate(seed)` writes the Python source of one program (deterministic in the seed; no
TensorFlow needed), `build(seed)` executes it and returns `(module, loss, variables)`.

How a program is made:

1. 3–8 float32 variables `v0`, `v1`, ... of shape [4] or [4, 4]. Each gets a *role*: `live`
   (about 60%) or a reason to be dead: `stop_gradient`, `int_cast` (to int32 or bool and back),
   `argmax`, `round`, `floor`, `gather_indices` (the variable picks gather indices), `sign`
   (a structurally zero gradient), `cond_branch_cut` (cut inside one branch of a `tf.cond`),
   `cond_predicate`, `while_body_cut`, `while_condition` (in the loop condition or trip
   count), `inner_function_cut` (a captured variable or an argument cut inside a
   nested `tf.function`), `custom_gradient_none` / `custom_gradient_zeros` (a
   `tf.custom_gradient` whose gradient function returns None / `tf.zeros_like` for it, as an
   input or as a captured variable), `assign` (it only feeds `v.assign`), `unused`, and
   `unused_other_function` (read only by another `tf.function` of the module). Sometimes a
   non-trainable `f0` (role `frozen`) and, for `assign`, a scratch variable `s0` are added.
2. *Constructs* realise the roles: a term with a cut (`Cut`), a `tf.cond` (`Cond`), a
   `tf.while_loop` that always runs 2–4 times (`While`), a nested `tf.function` (`Inner`), a
   `tf.custom_gradient` (`CustomGradient`), an assignment (`Assign`), a plain differentiable
   term (`Plain`). Live variables join constructs as differentiable parts (add, mul, matmul,
   matvec, tanh, sigmoid, exp, square, reduce_sum, concat and slices that keep every element,
   gather with the variable as params); dead variables only appear behind their cut. Loops and
   inner functions may nest constructs. Some variables, live or dead, also appear behind an
   extra cut elsewhere.
3. The loss is a float32 scalar `loss(x)`, `x` of shape [4] drawn from U(-1, 1), exposed as
   `m.loss`, a `tf.function` with an `input_signature`.

What keeps "zero" structural (TensorFlow is the judge, so a gradient that is zero by value would
be a false alarm): every value that gets multiplied stays away from exact zeros (the outputs of
round/floor/casts/sign/one_hot are shifted by 0.37), magnitudes are tracked so that tanh, sigmoid
and exp never saturate (`_squash` rescales into range), a variable is live in one `tf.cond`
branch only if it is live in both (the untaken branch would give zeros), and loops always run
2–4 times. No relu, max, min, abs or multiply by a literal 0.

`GeneratedProgram.roles` is the generator's intent; TensorFlow's tape stays the test oracle.
"""

from __future__ import annotations

import linecache
import random
from dataclasses import dataclass, field
from typing import Any

LIVE = "live"
FROZEN = "frozen"
CUT_KINDS = (
    "stop_gradient",
    "int_cast",
    "argmax",
    "round",
    "floor",
    "gather_indices",
    "sign",
    "shape_only",
    "zero_product",
    "constant_where",
    "sliced_away",
)
DEAD_ROLE_WEIGHTS = {
    "stop_gradient": 6,
    "int_cast": 4,
    "argmax": 3,
    "round": 2,
    "floor": 2,
    "gather_indices": 3,
    "sign": 3,
    "shape_only": 2,
    "zero_product": 2,
    "constant_where": 2,
    "sliced_away": 2,
    "cond_branch_cut": 4,
    "cond_predicate": 2,
    "while_body_cut": 4,
    "while_condition": 2,
    "inner_function_cut": 4,
    "custom_gradient_none": 3,
    "custom_gradient_zeros": 2,
    "assign": 1,
    "unused": 3,
    "unused_other_function": 2,
}
LIVE_PROBABILITY = 0.58
INPUT_SHAPE = (4,)


@dataclass(frozen=True)
class GeneratedProgram:
    seed: int
    source: str
    roles: dict[str, str]  # variable name -> LIVE, FROZEN or the reason it should be dead

    @property
    def intended_dead(self) -> set[str]:
        return {name for name, role in self.roles.items() if role not in (LIVE, FROZEN)}

    @property
    def filename(self) -> str:
        return f"<generated model {self.seed}>"


@dataclass(frozen=True)
class _Expr:
    """A [4]-shaped float32 expression and a bound on the magnitude of its values."""

    code: str
    bound: float


@dataclass
class _Slot:
    """An input (or the captured variable) of a custom gradient: gradient mode and variables."""

    mode: str | None = None  # "real" | "none" | "zeros"
    variables: list[str] = field(default_factory=list)


@dataclass
class _Construct:
    family: str  # Plain | Cut | Cond | While | Inner | CustomGradient | Assign | UnusedFunction
    live: list[str] = field(default_factory=list)
    cuts: list[tuple[str, str]] = field(default_factory=list)  # (variable, cut kind)
    children: list[_Construct] = field(default_factory=list)
    # Cut
    kind: str = ""
    # Cond: the branch of each cut, variables in the predicate
    branches: list[bool] = field(default_factory=list)
    predicate: list[str] = field(default_factory=list)
    # While: variables only in the loop condition
    condition: list[str] = field(default_factory=list)
    # Inner: variables computed by the caller and passed in, live or cut by the function
    argument_live: list[str] = field(default_factory=list)
    argument_cuts: list[tuple[str, str]] = field(default_factory=list)
    # CustomGradient: "inputs" (a, b) or "captured" (a, and the variable in slots[1])
    form: str = ""
    slots: list[_Slot] = field(default_factory=list)
    # Assign: the variables that only feed the assignment, and its target
    target: str = ""

    def all_constructs(self) -> list[_Construct]:
        found = [self]
        for child in self.children:
            found.extend(child.all_constructs())
        return found


class _Scope:
    """A function body being written: its lines, indentation and its [4]-shaped input tensor."""

    def __init__(self, indent: int, input_name: str, input_bound: float) -> None:
        self.lines: list[str] = []
        self.indent = " " * indent
        self.input = _Expr(input_name, input_bound)

    def line(self, text: str) -> None:
        self.lines.append(self.indent + text)


def generate(seed: int) -> GeneratedProgram:
    """The source of program `seed` and the role of each of its variables."""
    return _Generator(seed).program()


def build(seed: int) -> tuple[Any, Any, list[Any]]:
    """Run program `seed`: returns (module, loss tf.function, the module's trainable variables)."""
    module, loss, variables, _ = build_program(seed)
    return module, loss, variables


def build_program(seed: int) -> tuple[Any, Any, list[Any], GeneratedProgram]:
    """Like `build`, plus the program (source and roles) for failure messages."""
    import tensorflow as tf

    program = generate(seed)
    lines = program.source.splitlines(keepends=True)
    # Registered so that tracebacks and op source locations can show the generated lines.
    linecache.cache[program.filename] = (len(program.source), None, lines, program.filename)
    namespace: dict[str, Any] = {"tf": tf, "__name__": f"generated_model_{seed}"}
    exec(compile(program.source, program.filename, "exec"), namespace)
    module = namespace["m"]
    return module, module.loss, list(module.trainable_variables), program


def random_input(seed: int, salt: int = 0) -> Any:
    """An input `x` for program `seed` from U(-1, 1), the range the generator assumes."""
    import tensorflow as tf

    return tf.random.stateless_uniform(INPUT_SHAPE, seed=[seed, 1000 + salt], minval=-1, maxval=1)


class _Generator:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.roles: dict[str, str] = {}
        self.definitions: list[list[str]] = []  # module-level functions, in definition order
        self.after: list[str] = []  # module-level lines after the loss
        self.counter = 0

    # -- planning -----------------------------------------------------------------------------

    def program(self) -> GeneratedProgram:
        rng = self.rng
        count = rng.randint(3, 8)
        for index in range(count):
            name = f"v{index}"
            if rng.random() < LIVE_PROBABILITY:
                role = LIVE
            else:
                roles, weights = zip(*DEAD_ROLE_WEIGHTS.items())
                role = rng.choices(roles, weights)[0]
            self.roles[name] = role
            self.shapes[name] = (4,) if rng.random() < 0.7 else (4, 4)
        top: list[_Construct] = []
        for name in list(self.roles):
            self._place_dead(top, name)
        if rng.random() < 0.15:
            self.roles["f0"] = FROZEN
            self.shapes["f0"] = (4,) if rng.random() < 0.7 else (4, 4)
        for name in list(self.roles):
            if self.roles[name] in (LIVE, FROZEN):
                self._place_live(top, name)
        if not [c for c in top if c.family != "UnusedFunction"]:
            top.append(_Construct("Plain"))
        self._add_extra_cuts(top)
        return GeneratedProgram(self.seed, self._write(top), dict(self.roles))

    def _constructs(self, top: list[_Construct]) -> list[_Construct]:
        return [c for t in top for c in t.all_constructs()]

    def _new(self, top: list[_Construct], family: str, nestable: bool = True) -> _Construct:
        construct = _Construct(family)
        hosts = [c for c in self._constructs(top) if c.family in ("While", "Inner")]
        if nestable and hosts and self.rng.random() < 0.25:
            self.rng.choice(hosts).children.append(construct)
        else:
            top.append(construct)
        return construct

    def _find_or_new(self, top: list[_Construct], family: str, **match: Any) -> _Construct:
        candidates = [
            c
            for c in self._constructs(top)
            if c.family == family and all(getattr(c, k) == v for k, v in match.items())
        ]
        if candidates and self.rng.random() < 0.35:
            return self.rng.choice(candidates)
        construct = self._new(top, family)
        for key, value in match.items():
            setattr(construct, key, value)
        return construct

    def _place_dead(self, top: list[_Construct], name: str) -> None:
        rng, role = self.rng, self.roles[name]
        if role in CUT_KINDS:
            self._find_or_new(top, "Cut", kind=role).cuts.append((name, role))
        elif role == "cond_branch_cut":
            cond = self._find_or_new(top, "Cond")
            cond.cuts.append((name, rng.choice(CUT_KINDS)))
            cond.branches.append(rng.random() < 0.5)
        elif role == "cond_predicate":
            self._find_or_new(top, "Cond").predicate.append(name)
        elif role == "while_body_cut":
            kind = "stop_gradient" if rng.random() < 0.6 else rng.choice(CUT_KINDS)
            self._find_or_new(top, "While").cuts.append((name, kind))
        elif role == "while_condition":
            self._find_or_new(top, "While").condition.append(name)
        elif role == "inner_function_cut":
            inner = self._find_or_new(top, "Inner")
            cuts = inner.argument_cuts if rng.random() < 0.4 else inner.cuts
            cuts.append((name, rng.choice(CUT_KINDS)))
        elif role in ("custom_gradient_none", "custom_gradient_zeros"):
            self._join_custom_gradient(top, name, role.rpartition("_")[2])
        elif role == "assign":
            assign = self._new(top, "Assign", nestable=False)
            assign.cuts.append((name, "assign"))
            target = f"s{sum(1 for n in self.roles if n.startswith('s'))}"
            self.roles[target] = LIVE
            self.shapes[target] = (4,)
            assign.target = target
        elif role == "unused_other_function":
            function = _Construct("UnusedFunction", live=[name])
            top.append(function)
        # "unused": declared and never read

    def _join_custom_gradient(self, top: list[_Construct], name: str, mode: str) -> None:
        rng = self.rng
        for construct in self._constructs(top):
            if construct.family != "CustomGradient" or rng.random() < 0.4:
                continue
            for slot in construct.slots[:1] if construct.form == "captured" else construct.slots:
                if slot.mode == mode:
                    slot.variables.append(name)
                    return
        other = _Slot(rng.choice(("real", "none", "zeros")))
        self._new_custom_gradient(top, name, _Slot(mode, [name]), other)

    def _place_live(self, top: list[_Construct], name: str) -> None:
        rng = self.rng
        hosts = [c for c in self._constructs(top) if c.family not in ("UnusedFunction",)]
        if hosts and rng.random() < 0.55:
            host = rng.choice(hosts)
        else:
            family = rng.choice(("Plain", "Cut", "Cut", "Cond", "While", "Inner", "CustomGradient"))
            if family == "CustomGradient":
                self._join_custom_gradient_live(top, name)
                return
            host = self._new(top, family)
            if family == "Cut":
                host.kind = rng.choice(CUT_KINDS)
        if host.family == "CustomGradient":
            self._join_custom_gradient_live(top, name, host)
        elif host.family == "Inner" and rng.random() < 0.4:
            host.argument_live.append(name)
        else:
            host.live.append(name)

    def _join_custom_gradient_live(
        self, top: list[_Construct], name: str, host: _Construct | None = None
    ) -> None:
        """A live variable in a custom gradient: an input whose gradient is real, or the
        captured variable of a new one whose variable gradient is real."""
        if host is not None:
            inputs = host.slots if host.form == "inputs" else host.slots[:1]
            for slot in inputs:
                if slot.mode == "real":
                    slot.variables.append(name)
                    return
        other = _Slot(self.rng.choice(("real", "none", "zeros")))
        self._new_custom_gradient(top, name, _Slot("real", [name]), other)

    def _new_custom_gradient(
        self, top: list[_Construct], name: str, mine: _Slot, other: _Slot
    ) -> None:
        """A custom gradient with `name` as an input or, sometimes, as its captured variable."""
        # tf.custom_gradient only sees trainable variables, and inside a while loop its
        # variable gradients fail in TensorFlow itself: captured ones stay at the top level.
        if self.roles[name] != FROZEN and self.rng.random() < 0.4:
            construct = self._new(top, "CustomGradient", nestable=False)
            construct.form = "captured"
            construct.slots = [other, mine]
        else:
            construct = self._new(top, "CustomGradient")
            construct.form = "inputs"
            construct.slots = [mine, other]
            self.rng.shuffle(construct.slots)

    def _add_extra_cuts(self, top: list[_Construct]) -> None:
        rng = self.rng
        hosts = [c for c in self._constructs(top) if c.family in ("Cut", "Cond", "While", "Inner")]
        if not hosts:
            return
        for name, role in self.roles.items():
            if role in ("unused", "unused_other_function") or rng.random() >= 0.2:
                continue
            host = rng.choice(hosts)
            kind = host.kind if host.family == "Cut" else rng.choice(CUT_KINDS)
            host.cuts.append((name, kind))
            if host.family == "Cond":
                host.branches.append(rng.random() < 0.5)

    # -- writing ------------------------------------------------------------------------------

    def _fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def _write(self, top: list[_Construct]) -> str:
        header = [
            f"# Generated gradient-flow program, seed {self.seed}.",
            f'm = tf.Module(name="generated_{self.seed}")',
        ]
        for index, name in enumerate(self.roles):
            shape = list(self.shapes[name])
            trainable = "" if self.roles[name] != FROZEN else ", trainable=False"
            header.append(
                f"m.{name} = tf.Variable(tf.random.stateless_uniform({shape}, "
                f'seed=[{self.seed}, {index}], minval=-1.0, maxval=1.0), name="{name}"{trainable})'
                f"  # {self.roles[name]}"
            )
        loss = _Scope(4, "x", 1.0)
        terms = [self._emit(loss, c) for c in top if c.family != "UnusedFunction"]
        for construct in top:
            if construct.family == "UnusedFunction":
                self._emit_unused_function(construct)
        total = terms[0]
        if len(terms) > 1:
            summed = _Expr(" + ".join(t.code for t in terms), sum(t.bound for t in terms))
            total = self._bind(loss, summed, "total")
        ending = self.rng.choice(
            (
                f"tf.reduce_sum({total.code} * tf.sigmoid(x))",
                f"tf.reduce_sum({total.code} + x)",
                f"tf.reduce_sum(tf.square({self._squash(total, 4).code})) + tf.reduce_sum(x)",
            )
        )
        loss.line(f"return {ending}")
        parts = ["\n".join(header)]
        parts.extend("\n".join(d) for d in self.definitions)
        parts.append(
            "\n".join(
                [
                    "@tf.function(autograph=False, "
                    'input_signature=[tf.TensorSpec([4], tf.float32, name="x")])',
                    "def loss(x):",
                    *loss.lines,
                ]
            )
        )
        parts.append("\n".join(["m.loss = loss", *self.after]))
        return "\n\n\n".join(parts) + "\n"

    def _bind(self, scope: _Scope, expr: _Expr, prefix: str = "h") -> _Expr:
        name = self._fresh(prefix)
        scope.line(f"{name} = {expr.code}")
        return _Expr(name, expr.bound)

    def _maybe_bind(self, scope: _Scope, expr: _Expr) -> _Expr:
        return self._bind(scope, expr) if len(expr.code) > 60 else expr

    @staticmethod
    def _squash(expr: _Expr, limit: float) -> _Expr:
        """`expr` rescaled into tanh's unsaturated range when its bound exceeds `limit`."""
        if expr.bound <= limit:
            return expr
        return _Expr(f"tf.tanh({expr.code} * {min(limit, 2.0) / expr.bound:.4g})", 1.0)

    def _vector(self, scope: _Scope, name: str) -> _Expr:
        """Variable `name` as a [4] vector, through a differentiable op if it is a matrix."""
        if self.shapes[name] == (4,):
            return _Expr(f"m.{name}", 1.0)
        inp = scope.input
        return self.rng.choice(
            (
                _Expr(f"tf.linalg.matvec(m.{name}, {inp.code})", 4 * inp.bound),
                _Expr(f"tf.reduce_sum(m.{name}, 0)", 4.0),
                _Expr(
                    f"tf.reshape(tf.matmul(tf.reshape({inp.code}, [1, 4]), m.{name}), [4])",
                    4 * inp.bound,
                ),
            )
        )

    def _unary(self, expr: _Expr) -> _Expr:
        op = self.rng.choice(("tanh", "sigmoid", "exp", "square", "none", "none"))
        if op == "tanh":
            return _Expr(f"tf.tanh({self._squash(expr, 3).code})", 1.0)
        if op == "sigmoid":
            return _Expr(f"tf.sigmoid({self._squash(expr, 4).code})", 1.0)
        if op == "exp":
            inner = self._squash(expr, 1.5)
            return _Expr(f"tf.exp({inner.code})", 2.72**inner.bound)
        if op == "square":
            inner = self._squash(expr, 2)
            return _Expr(f"tf.square({inner.code})", inner.bound**2)
        return expr

    def _binary(self, scope: _Scope, a: _Expr, b: _Expr) -> _Expr:
        op = self.rng.choice(("add", "mul", "mul", "concat_sum", "concat_stride", "reduce_mul"))
        if op == "add":
            out = _Expr(f"({a.code} + {b.code})", a.bound + b.bound)
        elif op == "mul":
            out = _Expr(f"({a.code} * {b.code})", a.bound * b.bound)
        elif op == "concat_sum":
            out = _Expr(
                f"tf.reduce_sum(tf.reshape(tf.concat([{a.code}, {b.code}], 0), [2, 4]), 0)",
                a.bound + b.bound,
            )
        elif op == "concat_stride":
            # Strided slices that together keep every element: a slice that drops elements
            # can drop all of a variable's, a structural zero that only element-level
            # reasoning sees (TensorFlow says "zero").
            joined = self._bind(scope, _Expr(f"tf.concat([{a.code}, {b.code}], 0)", 0.0), "c")
            out = _Expr(f"({joined.code}[::2] + {joined.code}[1::2])", 2 * max(a.bound, b.bound))
        else:
            out = _Expr(f"(tf.reduce_sum({a.code}) * {b.code})", 4 * a.bound * b.bound)
        return self._squash(out, 8)

    def _combine(self, scope: _Scope, parts: list[_Expr]) -> _Expr:
        parts = list(parts)
        self.rng.shuffle(parts)
        result = self._unary(parts[0]) if self.rng.random() < 0.4 else parts[0]
        for part in parts[1:]:
            if self.rng.random() < 0.3:
                part = self._unary(part)
            result = self._maybe_bind(scope, self._binary(scope, result, part))
        if self.rng.random() < 0.3:
            result = self._unary(result)
        return self._maybe_bind(scope, result)

    def _differentiable(self, scope: _Scope, names: list[str], with_input: bool = True) -> _Expr:
        """An expression through which each of `names` gets gradient."""
        parts = [self._vector(scope, n) for n in names]
        if with_input or not parts:
            parts.append(scope.input)
        return self._combine(scope, parts)

    def _operand(self, scope: _Scope, names: list[str]) -> _Expr:
        """What a cut is applied to: the variables `names`, sometimes mixed with the input."""
        return self._differentiable(scope, names, with_input=self.rng.random() < 0.5)

    def _cut(
        self, scope: _Scope, kind: str, operand: _Expr, params: list[str]
    ) -> tuple[_Expr, list[str]]:
        """`operand` behind a cut of `kind`; argmax and gather may select from a live variable
        in `params`. Returns the expression and the live variables it used."""
        rng, op = self.rng, operand.code
        if kind == "stop_gradient":
            return _Expr(f"tf.stop_gradient({op})", operand.bound), []
        if kind == "int_cast":
            if rng.random() < 0.3:
                return _Expr(f"(tf.cast({op} > 0.0, tf.float32) + 0.37)", 1.37), []
            dtype = rng.choice(("tf.int32", "tf.int32", "tf.int64"))
            return (
                _Expr(
                    f"(tf.cast(tf.cast({op} * 3.0, {dtype}), tf.float32) + 0.37)",
                    3 * operand.bound + 0.37,
                ),
                [],
            )
        if kind == "round":
            return _Expr(f"(tf.round({op} * 2.0) + 0.37)", 2 * operand.bound + 0.87), []
        if kind == "floor":
            return _Expr(f"(tf.floor({op} * 2.0) + 0.37)", 2 * operand.bound + 1.37), []
        if kind == "sign":
            return _Expr(f"(tf.sign({op}) + 0.37)", 1.37), []
        if kind == "shape_only":
            # TensorFlow folds a static shape into a constant while tracing.
            shape_of = rng.choice(
                (
                    f"tf.cast(tf.reduce_sum(tf.shape({op})), tf.float32)",
                    f"tf.cast(tf.size({op}), tf.float32)",
                    f"tf.cast(tf.rank({op}), tf.float32)",
                    f"tf.reduce_sum(tf.ones_like({op}))",
                    f"tf.reduce_sum(tf.zeros_like({op}))",
                )
            )
            return _Expr(f"({shape_of} * 0.05 + 0.37)", 1.17), []
        if kind == "zero_product":
            zero = rng.choice(("0.0", f"tf.zeros_like({scope.input.code})", "tf.zeros([4])"))
            return _Expr(f"({zero} * {op} + 0.37)", 0.37), []
        if kind == "sliced_away":
            ones = f"tf.ones_like({op})"
            if rng.random() < 0.5:
                return _Expr(f"(tf.stack([{op}, {ones}])[1] * 0.5 + 0.37)", 0.87), []
            stacked = f"tf.stack([{ones}, {op}, {ones}])"
            return _Expr(
                f"(tf.reduce_mean(tf.gather({stacked}, [0, 2]), 0) * 0.5 + 0.37)", 0.87
            ), []
        if kind == "constant_where":
            if rng.random() < 0.5:
                return _Expr(f"tf.where(tf.constant(True), 0.37, {op})", 0.37), []
            return _Expr(f"tf.where(tf.constant(False), {op}, 0.37)", 0.37), []
        if kind == "argmax":
            index = f"tf.argmax({op})"
            if params and rng.random() < 0.6:
                param = rng.choice(params)
                if self.shapes[param] == (4,):
                    return _Expr(
                        f"(tf.gather(m.{param}, {index}) * {scope.input.code})", scope.input.bound
                    ), [param]
                return _Expr(f"tf.gather(m.{param}, {index})", 1.0), [param]
            if rng.random() < 0.5:
                return _Expr(f"(tf.one_hot({index}, 4) + 0.37)", 1.37), []
            return _Expr(f"((tf.cast({index}, tf.float32) + 0.37) * tf.ones([4]))", 3.37), []
        assert kind == "gather_indices", kind
        index = f"tf.clip_by_value(tf.cast({op} * 4.0 + 2.0, tf.int32), 0, 3)"
        if params and rng.random() < 0.7:
            param = rng.choice(params)
            if self.shapes[param] == (4,):
                return _Expr(f"tf.gather(m.{param}, {index})", 1.0), [param]
            return _Expr(f"tf.reduce_sum(tf.gather(m.{param}, {index}), 1)", 4.0), [param]
        if rng.random() < 0.5:
            return _Expr(f"tf.gather({scope.input.code}, {index})", scope.input.bound), []
        return _Expr(f"tf.gather(tf.constant([0.5, -1.5, 2.5, 1.25]), {index})", 2.5), []

    def _join(self, scope: _Scope, live: _Expr, others: list[_Expr]) -> _Expr:
        """`live` combined with cut parts by add or mul (cut parts are never zero)."""
        result = live
        for other in others:
            if self.rng.random() < 0.5:
                result = _Expr(f"({result.code} * {other.code})", result.bound * other.bound)
            else:
                result = _Expr(f"({result.code} + {other.code})", result.bound + other.bound)
            result = self._maybe_bind(scope, self._squash(result, 8))
        return result

    def _cut_parts(self, scope: _Scope, cuts: list[tuple[str, str]]) -> list[_Expr]:
        """One cut expression per kind, each over the variables cut that way."""
        by_kind: dict[str, list[str]] = {}
        for name, kind in cuts:
            by_kind.setdefault(kind, []).append(name)
        parts = []
        for kind, names in by_kind.items():
            part, _ = self._cut(scope, kind, self._operand(scope, names), [])
            parts.append(self._maybe_bind(scope, part))
        return parts

    def _emit(self, scope: _Scope, construct: _Construct) -> _Expr:
        family = construct.family
        if family == "Plain":
            term = self._differentiable(scope, construct.live)
        elif family == "Cut":
            term = self._emit_cut(scope, construct)
        elif family == "Cond":
            term = self._emit_cond(scope, construct)
        elif family == "While":
            term = self._emit_while(scope, construct)
        elif family == "Inner":
            term = self._emit_inner(scope, construct)
        elif family == "CustomGradient":
            term = self._emit_custom_gradient(scope, construct)
        elif family == "Assign":
            term = self._emit_assign(scope, construct)
        else:
            raise AssertionError(family)
        return self._bind(scope, term, "t")

    def _emit_cut(self, scope: _Scope, construct: _Construct) -> _Expr:
        names = [name for name, _ in construct.cuts]
        operand = self._operand(scope, names) if names else scope.input
        cut, used = self._cut(scope, construct.kind, operand, construct.live)
        cut = self._maybe_bind(scope, cut)
        rest = [n for n in construct.live if n not in used]
        if rest or not used:
            return self._join(scope, self._differentiable(scope, rest), [cut])
        return cut

    def _emit_body(
        self,
        scope: _Scope,
        construct: _Construct,
        live: list[str],
        parts: list[_Expr] | None = None,
    ) -> _Expr:
        """The live part, the cuts and the nested constructs of a branch, loop or function body."""
        parts = list(parts or []) + self._cut_parts(scope, construct.cuts)
        parts.extend(self._emit(scope, child) for child in construct.children)
        return self._squash(self._join(scope, self._differentiable(scope, live), parts), 4)

    def _emit_cond(self, scope: _Scope, construct: _Construct) -> _Expr:
        if construct.predicate:
            operand = self._operand(scope, construct.predicate)
            predicate = f"tf.reduce_sum({operand.code}) > 0.0"
        elif self.rng.random() < 0.5:
            predicate = f"tf.reduce_sum({scope.input.code}) > 0.0"
        else:
            predicate = f"{scope.input.code}[0] > {scope.input.code}[1]"
        results = []
        names = []
        for branch in (True, False):
            name = self._fresh("true_fn" if branch else "false_fn")
            body = _Scope(len(scope.indent) + 4, scope.input.code, scope.input.bound)
            cuts = [c for c, b in zip(construct.cuts, construct.branches) if b == branch]
            branch_construct = _Construct("Cond", cuts=cuts)
            result = self._emit_body(body, branch_construct, construct.live)
            scope.line(f"def {name}():")
            scope.lines.extend(body.lines)
            scope.line(f"    return {result.code}")
            results.append(result)
            names.append(name)
        return _Expr(f"tf.cond({predicate}, {names[0]}, {names[1]})", max(r.bound for r in results))

    def _emit_while(self, scope: _Scope, construct: _Construct) -> _Expr:
        trips = self.rng.randint(2, 4)
        condition_name, body_name = self._fresh("loop_condition"), self._fresh("loop_body")
        condition = f"i < {trips}"
        if construct.condition:
            inner = _Scope(len(scope.indent) + 4, "acc", 1.0)
            operand = self._operand(inner, construct.condition)
            if self.rng.random() < 0.5:
                condition = f"tf.logical_and(i < {trips}, tf.reduce_sum({operand.code}) > -1000.0)"
            else:  # the variables choose the trip count, clipped so the body always runs
                count = f"tf.cast(tf.reduce_sum({operand.code}) * 2.0, tf.int32)"
                condition = f"i < tf.clip_by_value({count}, 2, 4)"
            condition_lines = inner.lines
        else:
            condition_lines = []
        scope.line(f"def {condition_name}(i, acc):")
        scope.lines.extend(condition_lines)
        scope.line(f"    return {condition}")
        body = _Scope(len(scope.indent) + 4, "acc", 1.0)
        result = self._squash(self._emit_body(body, construct, construct.live), 2)
        scope.line(f"def {body_name}(i, acc):")
        scope.lines.extend(body.lines)
        scope.line(f"    return i + 1, tf.tanh(acc * 0.5 + {result.code})")
        start = scope.input.code
        out = self._fresh("loop_out")
        scope.line(
            f"_, {out} = tf.while_loop({condition_name}, {body_name}, [tf.constant(0), {start}])"
        )
        return _Expr(out, 1.0)

    def _emit_inner(self, scope: _Scope, construct: _Construct) -> _Expr:
        name = self._fresh("inner")
        body = _Scope(4, "a", 1.0)
        cut_arguments = []
        for kind in dict.fromkeys(kind for _, kind in construct.argument_cuts):
            operand = self._combine(body, [_Expr("b", 1.0), body.input][: self.rng.randint(1, 2)])
            cut, _ = self._cut(body, kind, operand, [])
            cut_arguments.append(self._maybe_bind(body, cut))
        result = self._emit_body(body, construct, construct.live, cut_arguments)
        parameters = "a, b" if construct.argument_cuts else "a"
        self.definitions.append(
            [
                "@tf.function(autograph=False)",
                f"def {name}({parameters}):",
                *body.lines,
                f"    return {result.code}",
            ]
        )
        arguments = [scope.input]
        if construct.argument_live:
            arguments[0] = self._squash(self._differentiable(scope, construct.argument_live), 1)
        if construct.argument_cuts:
            names = [n for n, _ in construct.argument_cuts]
            arguments.append(self._squash(self._operand(scope, names), 1))
        return _Expr(f"{name}({', '.join(a.code for a in arguments)})", result.bound)

    def _gradient_code(self, mode: str, real: str, like: str) -> str:
        return {"real": real, "none": "None", "zeros": f"tf.zeros_like({like})"}[mode]

    def _emit_custom_gradient(self, scope: _Scope, construct: _Construct) -> _Expr:
        name = self._fresh("custom")
        first = construct.slots[0]
        a = self._differentiable(scope, first.variables, with_input=not first.variables)
        a = self._squash(a, 2)
        if construct.form == "inputs":
            second = construct.slots[1]
            b = self._squash(
                self._differentiable(scope, second.variables, with_input=not second.variables), 2
            )
            grad_a = self._gradient_code(first.mode or "real", "upstream * b", "a")
            grad_b = self._gradient_code(second.mode or "real", "upstream * a", "b")
            self.definitions.append(
                [
                    "@tf.custom_gradient",
                    f"def {name}(a, b):",
                    "    def grad(upstream):",
                    f"        return {grad_a}, {grad_b}",
                    "    return a * b, grad",
                ]
            )
            return _Expr(f"{name}({a.code}, {b.code})", a.bound * b.bound)
        (variable,) = construct.slots[1].variables
        matrix = self.shapes[variable] != (4,)
        forward = "tf.linalg.matvec(w, a)" if matrix else "a * w"
        real_a = "tf.linalg.matvec(w, upstream, transpose_a=True)" if matrix else "upstream * w"
        real_w = "upstream[:, None] * a[None, :]" if matrix else "upstream * a"
        grad_a = self._gradient_code(first.mode or "real", real_a, "a")
        grad_w = self._gradient_code(construct.slots[1].mode or "real", real_w, "w")
        self.definitions.append(
            [
                "@tf.custom_gradient",
                f"def {name}(a):",
                f"    w = m.{variable}",
                "    def grad(upstream, variables=None):",
                f"        return {grad_a}, [{grad_w}]",
                f"    return {forward}, grad",
            ]
        )
        return _Expr(f"{name}({a.code})", a.bound * (4.0 if matrix else 1.0))

    def _emit_assign(self, scope: _Scope, construct: _Construct) -> _Expr:
        names = [name for name, _ in construct.cuts]
        value = self._squash(self._operand(scope, names), 3)
        scope.line(f"m.{construct.target}.assign(tf.tanh({value.code}))")
        return self._differentiable(scope, [construct.target, *construct.live])

    def _emit_unused_function(self, construct: _Construct) -> None:
        name = self._fresh("unused_function")
        body = _Scope(4, "a", 1.0)
        result = self._differentiable(body, construct.live)
        self.definitions.append(
            [
                "@tf.function(autograph=False, input_signature=[tf.TensorSpec([4], tf.float32)])",
                f"def {name}(a):",
                *body.lines,
                f"    return {result.code}",
            ]
        )
        self.after.append(f"m.{name} = {name}")

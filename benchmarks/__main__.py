"""`python -m benchmarks`: gradcheck's time and memory next to `import tensorflow` and
TensorFlow's own route, measured side by side in one run, each measurement in fresh processes.

    python -m benchmarks [--repeat 3] [--only NAME...] [--sizes 10k 100k 1M] [--cache DIR]
                         [--quick] [--json] [--tf-route-100k]

Every model is built locally (keras.applications and keras_hub from their configs, synthetic
graphs as protos) and kept in the cache folder. gradcheck runs as `python -m gradcheck_cli`
with this checkout on PYTHONPATH, so the numbers are those of the code next to this file.
Medians of `--repeat` runs; the repetitions go round every selected benchmark in turn, so a
slow minute on a shared machine touches every route alike. Ratios are to `import tensorflow`
and to TensorFlow's route on the same model (load the SavedModel, then `tf.gradients` of the
loss with respect to the trainable variables); `gradcheck run SCRIPT`'s, to the script's own
time to its first gradient request under plain Python (`benchmarks/first_request.py`).
"""

from __future__ import annotations

import argparse
import compileall
import enum
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import models, synthetic, templates
from benchmarks.measure import Run, Summary, measure

ROOT = Path(__file__).resolve().parents[1]
"""The checkout whose gradcheck is measured: the one these benchmarks belong to."""

_TENSORFLOW_ROUTE = """
import sys
import tensorflow as tf
from tensorflow.python.checkpoint import graph_view, util

loaded = tf.saved_model.load(sys.argv[1])
concrete = loaded.loss.concrete_functions[0]
graph = concrete.graph
internal = {id(external): placeholder for external, placeholder in graph.captures}
variables = [o for o in util.list_objects(graph_view.ObjectGraphView(loaded))
             if isinstance(o, tf.Variable) and o.trainable]
captured = [internal[id(v.handle)] for v in variables if id(v.handle) in internal]
with graph.as_default():
    gradients = tf.gradients(graph.outputs[0], captured)
print(sum(g is None for g in gradients), "of", len(gradients), "without gradient")
"""

HTML_PAGE_LIMIT = 2 * 1024 * 1024
"""The most an HTML page of a real model may weigh (ResNet50's, with its map)."""

SCRIPTS = {"script-keras": "keras_unused_layer.py", "script-tf2": "module_tf2.py"}
"""Samples checked in script mode (`--loss loss`; both exit 1)."""


@dataclass(frozen=True)
class RunScript:
    """A training script checked with `gradcheck run`, and the exit code it gives."""

    path: Path
    exit_code: int
    arguments: tuple[str, ...] = ()
    quick: bool = False  # also in --quick


_RUN_TESTS = ROOT / "tests" / "scripts" / "run"
RUN_SCRIPTS = {
    # Four GradientTapes (two generators, two discriminators) in one tf.function.
    "run-cyclegan": RunScript(ROOT / "benchmarks" / "scripts" / "cyclegan_step.py", 0),
    # Five critic steps, each with a nested tape for its gradient penalty, per generator step.
    "run-wgan-gp": RunScript(ROOT / "benchmarks" / "scripts" / "wgan_gp_step.py", 0, quick=True),
    "run-critic-loop": RunScript(_RUN_TESTS / "critic_loop.py", 0),
    "run-gan-fit": RunScript(_RUN_TESTS / "gan_train_step.py", 1),  # a custom train_step
    "run-teacher-student": RunScript(_RUN_TESTS / "teacher_student.py", 0),
    "run-keras-fit": RunScript(_RUN_TESTS / "keras_fit_unused.py", 1, quick=True),
    "run-module-tf2": RunScript(ROOT / "sample_models" / "module_tf2.py", 1),  # eager tape
    "run-keras-unused-layer": RunScript(ROOT / "sample_models" / "keras_unused_layer.py", 1),
}
"""Scripts checked in run mode, each next to its own time to its first gradient request
(`benchmarks/first_request.py`)."""

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000,)
TENSORFLOW_ROUTE_MAX_OPS = 10_000
"""Above this, TensorFlow's route on a synthetic graph is left out: its loader takes minutes at
1M ops. `--tf-route-100k` adds one run at 100k."""


class Route(str, enum.Enum):
    IMPORT = "python -c 'import tensorflow'"
    GRADCHECK = "gradcheck"
    TENSORFLOW = "TensorFlow: load + tf.gradients"
    SCRIPT_FIRST = "gradcheck script: first run"
    SCRIPT_RERUN = "gradcheck script: re-run"
    RUN_OWN = "the script to its first request"
    RUN = "gradcheck run: first run"
    TERMINAL = "gradcheck: terminal report"
    HTML = "gradcheck: HTML page and map"


# The `own` columns: a run's ratio to the script's own time to its first request; the HTML
# page's to the terminal report of the same check.
_OWN_BASELINE = {Route.RUN: Route.RUN_OWN, Route.HTML: Route.TERMINAL}


@dataclass(frozen=True)
class Step:
    """One command of a repetition. `statuses`: the verdicts gradcheck's JSON must hold."""

    route: Route
    command: tuple[str, ...]
    exit_codes: frozenset[int] = frozenset({0, 1})
    statuses: Mapping[str, str] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # The most bytes the step may print (the HTML page of a model: 2 MiB).
    output_limit: int | None = None


@dataclass(frozen=True)
class Benchmark:
    """What `--only` selects (by `name` or any of `tags`): the steps of one repetition, made
    fresh for each in a scratch folder of its own."""

    name: str
    tags: frozenset[str]
    steps: Callable[[Path], list[Step]]
    build: Callable[[], str] = lambda: ""  # builds the model; a description of it
    repeat: int | None = None  # None: --repeat


@dataclass
class Row:
    benchmark: str
    route: Route
    runs: list[Run] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def gradcheck_command(path: Path, *extra: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "gradcheck_cli", str(path), "--format", "json", *extra)


def tensorflow_command(path: Path) -> tuple[str, ...]:
    return (sys.executable, "-c", _TENSORFLOW_ROUTE, str(path))


def ops_label(ops: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if ops >= size and ops % size == 0:
            return f"{ops // size}{unit}"
    return str(ops)


def parse_ops(text: str) -> int:
    """`10k`, `1M`, `2500` -> ops."""
    units = {"k": 1_000, "m": 1_000_000}
    multiplier = units.get(text[-1:].lower(), 1)
    try:
        return int(text[:-1] if multiplier > 1 else text) * multiplier
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of ops: {text!r}") from None


def catalogue(
    cache: Path,
    sizes: tuple[int, ...],
    tf_route_100k: bool,
    real_models: tuple[models.Model, ...],
    quick: bool = False,
) -> list[Benchmark]:
    """Every benchmark, in the order they run and print."""
    benchmarks = [
        Benchmark(
            "import-tensorflow",
            frozenset(),
            lambda scratch: [Step(Route.IMPORT, (sys.executable, "-c", "import tensorflow"))],
        )
    ]
    for model in real_models:
        benchmarks.append(_real_model(model, cache))
    # Regenerated when the generator or its templates change: their sources name the folder.
    sources = (Path(synthetic.__file__), Path(templates.__file__))
    synthetic_cache = cache / f"synthetic-{'-'.join(map(synthetic.source_hash, sources))}"
    for shape in synthetic.Shape:
        for ops in sizes:
            benchmarks.append(_synthetic(shape, ops, synthetic_cache, cache))
            if ops == 100_000 and tf_route_100k:
                benchmarks.append(_synthetic(shape, ops, synthetic_cache, cache, single_tf=True))
    for name, script in SCRIPTS.items():
        benchmarks.append(_script(name, ROOT / "sample_models" / script))
    for name, run in RUN_SCRIPTS.items():
        if run.quick or not quick:
            benchmarks.append(_run_mode(name, run))
    return benchmarks


def _real_model(model: models.Model, cache: Path) -> Benchmark:
    folder: list[Path] = []

    def build() -> str:
        folder.append(models.saved_model(model, cache / "models"))
        return _describe(folder[0])

    def steps(scratch: Path) -> list[Step]:
        # The terminal report and the HTML page of the same check, without colour, to a file:
        # the page's cost (its map above all) is measured against the terminal's.
        shown = (sys.executable, "-m", "gradcheck_cli", str(folder[0]), "--loss", synthetic.LOSS)
        return [
            Step(Route.GRADCHECK, gradcheck_command(folder[0], "--loss", synthetic.LOSS)),
            Step(Route.TERMINAL, (*shown, "--color", "never")),
            Step(Route.HTML, (*shown, "--format", "html"), output_limit=HTML_PAGE_LIMIT),
            Step(Route.TENSORFLOW, tensorflow_command(folder[0]), exit_codes=frozenset({0})),
        ]

    return Benchmark(model.value, frozenset({model.value, "models"}), steps, build)


def _synthetic(
    shape: synthetic.Shape, ops: int, folder: Path, cache: Path, single_tf: bool = False
) -> Benchmark:
    path = folder / f"{shape.value}-{ops}"
    name = f"{shape.value}-{ops_label(ops)}"

    def build() -> str:
        if not (path / "saved_model.pb").is_file():
            # In a process of its own: a 1M-op graph would grow this one by a gigabyte, which
            # every process it starts later would report as its peak RSS (`measure.measure`).
            start = time.perf_counter()
            synthetic.run_fresh_python(
                ["-m", "benchmarks.synthetic", "--shape", shape.value, "--ops", str(ops)]
                + ["--cache", str(cache), str(path)]
            )
            print(f"  generated in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        return _describe(path)

    def steps(scratch: Path) -> list[Step]:
        tensorflow = Step(Route.TENSORFLOW, tensorflow_command(path), exit_codes=frozenset({0}))
        if single_tf:
            return [tensorflow]
        gradcheck = Step(
            Route.GRADCHECK,
            gradcheck_command(path, "--loss", synthetic.LOSS),
            exit_codes=frozenset({1}),
            statuses=synthetic.EXPECTED,
        )
        return [gradcheck, tensorflow] if ops <= TENSORFLOW_ROUTE_MAX_OPS else [gradcheck]

    tags = frozenset({"synthetic", shape.value, ops_label(ops)})
    if single_tf:
        return Benchmark(f"{name}-tf-route", tags, steps, build, repeat=1)
    return Benchmark(name, tags, steps, build)


def _script(name: str, script: Path) -> Benchmark:
    def steps(scratch: Path) -> list[Step]:
        # A fresh copy and a fresh cache folder each repetition: the first run finds nothing
        # cached, the re-run finds what the first run left (if gradcheck caches at all).
        copy = scratch / script.name
        shutil.copy2(script, copy)
        env = {"XDG_CACHE_HOME": str(scratch / "cache")}
        command = gradcheck_command(copy, "--loss", "loss")
        return [
            Step(Route.SCRIPT_FIRST, command, exit_codes=frozenset({1}), env=env),
            Step(Route.SCRIPT_RERUN, command, exit_codes=frozenset({1}), env=env),
        ]

    return Benchmark(name, frozenset({"script"}), steps, lambda: f"sample_models/{script.name}")


def _run_mode(name: str, run: RunScript) -> Benchmark:
    def steps(scratch: Path) -> list[Step]:
        # A copy in a folder of its own (some scripts leave a marker file beside them), a
        # fresh cache folder: `gradcheck run` caches nothing, and must find nothing either.
        copy = scratch / run.path.name
        shutil.copy2(run.path, copy)
        env = {"XDG_CACHE_HOME": str(scratch / "cache")}
        arguments = ("--", *run.arguments) if run.arguments else ()
        own = (sys.executable, str(ROOT / "benchmarks" / "first_request.py"), str(copy))
        gradcheck = (sys.executable, "-m", "gradcheck_cli", "run", str(copy), "--format", "json")
        return [
            Step(Route.RUN_OWN, (*own, *run.arguments), exit_codes=frozenset({0}), env=env),
            Step(Route.RUN, (*gradcheck, *arguments), frozenset({run.exit_code}), env=env),
        ]

    shown = run.path.relative_to(ROOT)
    return Benchmark(name, frozenset({"run"}), steps, lambda: str(shown))


def _describe(folder: Path) -> str:
    pb = (folder / "saved_model.pb").stat().st_size
    return f"saved_model.pb {_mib(pb)}, {_mib(models.size_on_disk(folder))} on disk"


def _mib(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB" if size < 1024**3 else f"{size / 1024**3:.2f} GiB"


def measurement_env() -> dict[str, str]:
    """The environment of every measured process: this checkout's gradcheck first on the path,
    TensorFlow's C++ log quiet and oneDNN off, as in the test suite."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")


def compile_checkout() -> None:
    """Compile this checkout's gradcheck to bytecode, into `__pycache__` as `pip install` does.

    Every measured process then imports gradcheck as an installed copy does, from bytecode, as
    `import tensorflow` imports TensorFlow's: in a fresh clone, or with PYTHONDONTWRITEBYTECODE
    set, each run would otherwise compile gradcheck's modules from source again (0.05-0.1 s of
    a ResNet50 check's 0.4 s on the 2-core machine).
    """
    compileall.compile_dir(ROOT / "gradcheck_cli", quiet=1)


def run_all(benchmarks: list[Benchmark], repeat: int) -> list[Row]:
    """Each benchmark `repeat` times (or its own count), round by round."""
    rows: dict[tuple[str, Route], Row] = {}
    env = measurement_env()
    rounds = max((b.repeat or repeat) for b in benchmarks)
    for round_number in range(rounds):
        for benchmark in benchmarks:
            if round_number >= (benchmark.repeat or repeat):
                continue
            with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as scratch:
                for step in benchmark.steps(Path(scratch)):
                    row = rows.setdefault(
                        (benchmark.name, step.route), Row(benchmark.name, step.route)
                    )
                    print(
                        f"[{round_number + 1}/{rounds}] {benchmark.name}: {step.route.value}",
                        file=sys.stderr,
                    )
                    stdout = Path(scratch) / "stdout"
                    run = measure(step.command, {**env, **step.env}, Path(scratch), stdout)
                    row.runs.append(run)
                    row.problems.extend(_problems(step, run, stdout))
    return list(rows.values())


def _problems(step: Step, run: Run, stdout: Path) -> list[str]:
    if run.exit_code not in step.exit_codes:
        return [f"exit code {run.exit_code}, expected {sorted(step.exit_codes)}"]
    if step.output_limit is not None and stdout.stat().st_size > step.output_limit:
        return [f"printed {stdout.stat().st_size} bytes, more than {step.output_limit}"]
    if step.statuses is None:
        return []
    try:
        report = json.loads(stdout.read_bytes())
        statuses = {v["name"]: v["status"] for v in report["variables"]}
    except (ValueError, KeyError, TypeError) as error:
        return [f"unreadable JSON report: {error}"]
    if statuses != dict(step.statuses):
        return [f"verdicts {statuses}, expected {dict(step.statuses)}"]
    return []


def summarise(rows: list[Row]) -> list[dict[str, Any]]:
    """Per row: medians, ratios to `import tensorflow` and to TensorFlow's route on the same
    benchmark (the 100k `-tf-route` runs stand for their benchmark), a run's to the script's
    own time to its first request, problems, every run."""
    summaries = {(row.benchmark, row.route): Summary.of(row.runs) for row in rows}
    baseline = summaries.get(("import-tensorflow", Route.IMPORT))
    results = []
    for row in rows:
        summary = summaries[(row.benchmark, row.route)]
        tensorflow = summaries.get((row.benchmark, Route.TENSORFLOW)) or summaries.get(
            (f"{row.benchmark}-tf-route", Route.TENSORFLOW)
        )
        if row.route is Route.TENSORFLOW:
            tensorflow = None
        own = (
            summaries.get((row.benchmark, _OWN_BASELINE[row.route]))
            if row.route in _OWN_BASELINE
            else None
        )
        results.append(
            {
                "benchmark": row.benchmark,
                "route": row.route.value,
                "runs": len(row.runs),
                "wall_s": summary.wall,
                "cpu_s": summary.cpu,
                "peak_rss_mib": summary.peak_rss_mib,
                "wall_x_import": baseline and summary.wall / baseline.wall,
                "cpu_x_import": baseline and summary.cpu / baseline.cpu,
                "wall_x_tf_route": tensorflow and summary.wall / tensorflow.wall,
                "cpu_x_tf_route": tensorflow and summary.cpu / tensorflow.cpu,
                # gradcheck run next to the script's own time to its first gradient request
                "wall_x_own": own and summary.wall / own.wall,
                "cpu_x_own": own and summary.cpu / own.cpu,
                "problems": sorted(set(row.problems)),
                "each_run": [vars(run) for run in row.runs],
            }
        )
    return results


def table(results: list[dict[str, Any]], described: Mapping[str, str]) -> str:
    header = (
        f"{'benchmark':22} {'route':31} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} "
        f"{'wall/imp':>8} {'CPU/imp':>8} {'wall/TF':>8} {'CPU/TF':>8} {'wall/own':>8} "
        f"{'CPU/own':>8}"
    )
    lines = [header, "-" * len(header)]
    for result in results:
        lines.append(
            f"{result['benchmark']:22} {result['route']:31} {result['wall_s']:8.2f} "
            f"{result['cpu_s']:8.2f} {result['peak_rss_mib']:9.0f} "
            + " ".join(
                _cell(result[key])
                for key in (
                    "wall_x_import",
                    "cpu_x_import",
                    "wall_x_tf_route",
                    "cpu_x_tf_route",
                    "wall_x_own",
                    "cpu_x_own",
                )
            )
        )
        lines.extend(f"    ! {problem}" for problem in result["problems"])
    lines.append("")
    lines.append("models:")
    lines.extend(f"  {name:22} {text}" for name, text in described.items() if text)
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return f"{value:8.2f}" if value is not None else f"{'-':>8}"


def select(benchmarks: list[Benchmark], only: list[str] | None) -> list[Benchmark]:
    """The benchmarks `--only` names (by name or tag); `import-tensorflow` always, as every
    ratio's baseline."""
    if not only:
        return benchmarks
    known = {b.name for b in benchmarks} | {t for b in benchmarks for t in b.tags}
    unknown = sorted(set(only) - known)
    if unknown:
        raise SystemExit(f"unknown benchmark {unknown}; choose from {sorted(known)}")
    return [
        b for b in benchmarks if b.name == "import-tensorflow" or b.name in only or b.tags & {*only}
    ]


def machine() -> dict[str, Any]:
    return {
        # A floor under every peak RSS measured (see `measure.measure`).
        "runner_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "python": platform.python_version(),
        "tensorflow": importlib.metadata.version("tensorflow"),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Time and memory of gradcheck next to `import tensorflow` and TensorFlow's "
        "own route, in fresh processes, side by side.",
    )
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per measure (default 3, 1 with --quick)"
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="benchmarks by name or tag (see --list)"
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_ops,
        metavar="OPS",
        help="synthetic graph sizes (default 10k 100k 1M)",
    )
    parser.add_argument(
        "--cache",
        "--keep",
        type=Path,
        metavar="DIR",
        default=synthetic.default_cache(),
        help="where built models are kept between runs (default: %(default)s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: one repetition, 2k-op synthetic graphs, ResNet50 as the only real "
        "model, two scripts in run mode",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--tf-route-100k",
        action="store_true",
        help="also run TensorFlow's route once on each 100k-op synthetic graph (minutes)",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    real_models = (models.Model.RESNET50,) if args.quick else tuple(models.Model)
    benchmarks = catalogue(args.cache, sizes, args.tf_route_100k, real_models, args.quick)
    if args.list:
        for benchmark in benchmarks:
            print(f"{benchmark.name:24} {' '.join(sorted(benchmark.tags))}")
        return
    chosen = select(benchmarks, args.only)
    described = {}
    for benchmark in chosen:
        print(f"building {benchmark.name} ...", file=sys.stderr)
        described[benchmark.name] = benchmark.build()
    compile_checkout()
    results = summarise(run_all(chosen, repeat))
    if args.json:
        payload = {"machine": machine(), "repeat": repeat, "models": described, "rows": results}
        print(json.dumps(payload, indent=2))
    else:
        print(f"{repeat} run(s) each, medians; machine: {machine()}")
        print(table(results, described))
    if any(result["problems"] for result in results):
        sys.exit(1)


if __name__ == "__main__":
    main()

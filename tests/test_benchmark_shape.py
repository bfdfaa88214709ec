"""The shape of gradcheck's cost, never its absolute seconds: twice the graph costs at most about
twice the time, and a bigger weight file costs nothing, because `variables/` is never opened.

The graphs are the benchmark's synthetic SavedModels (`benchmarks.synthetic`), spliced as protos
into templates that a process forked from TensorFlow writes once for the module; the check runs
in this process through the public API, timed in process CPU time (what other processes on a
busy machine take does not count), the best of a few runs.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import synthetic
from gradcheck_cli import check
from tests import forked_python

# Linear work doubles; quadratic work quadruples. 2.6 leaves room for a loaded machine and for
# the garbage collector's passes, which grow a little faster than the objects they walk.
MAX_DOUBLING_RATIO = 2.6
OPS = 2_500
REPEATS = 3


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Templates written once for this module (by a process forked from TensorFlow)."""
    folder = tmp_path_factory.mktemp("templates")
    for template in synthetic.Template:
        synthetic.template_dir(folder, template, forked_python.run)
    return folder


def _cpu_seconds(path: Path) -> float:
    # The objects earlier tests left in this process are frozen out of the garbage collector's
    # reach, as if gradcheck ran in a process of its own: otherwise every full collection walks
    # them too, and the bigger graph, which triggers more collections, pays for them (2.5x).
    gc.collect()
    gc.freeze()
    try:
        start = time.process_time()
        report = check(path, loss=synthetic.LOSS)
        elapsed = time.process_time() - start
    finally:
        gc.unfreeze()
    assert {v.variable.name: v.status.value for v in report.variables} == synthetic.EXPECTED
    return elapsed


def _best_of(paths: list[Path]) -> list[float]:
    """The least CPU time of each path over `REPEATS` rounds, the paths taking turns so a slow
    moment touches them alike."""
    best = [float("inf")] * len(paths)
    for _ in range(REPEATS):
        for index, path in enumerate(paths):
            best[index] = min(best[index], _cpu_seconds(path))
    return best


@pytest.mark.parametrize("shape", [synthetic.Shape.CHAIN, synthetic.Shape.TREE])
def test_twice_the_ops_cost_at_most_about_twice_the_time(
    shape: synthetic.Shape, cache: Path, tmp_path: Path
) -> None:
    paths = [
        synthetic.write(shape, ops, tmp_path / str(ops), cache).parent for ops in (OPS, 2 * OPS)
    ]
    _cpu_seconds(paths[0])  # the first check imports and caches what every later one uses
    single, double = _best_of(paths)
    assert double <= MAX_DOUBLING_RATIO * single, (
        f"{shape.value}: {OPS} ops took {single:.3f} s of CPU, {2 * OPS} took {double:.3f} s "
        f"({double / single:.2f}x)"
    )


_opened: list[Any] | None = None
_installed_hooks: list[Any] = []


def _record_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None:
        _opened.append(args[0])


@pytest.fixture
def opened_files() -> Iterator[list[Any]]:
    """Every path opened while the fixture is active (an audit hook, installed once: audit
    hooks cannot be removed, so it records only here)."""
    global _opened
    if _record_open not in _installed_hooks:
        sys.addaudithook(_record_open)
        _installed_hooks.append(_record_open)
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def test_the_weight_file_is_never_opened_and_its_size_costs_nothing(
    cache: Path, tmp_path: Path, opened_files: list[Any]
) -> None:
    paths = []
    for gib in (1, 2):
        path = synthetic.write(synthetic.Shape.CHAIN, 1000, tmp_path / f"{gib}gib", cache).parent
        (data,) = (path / "variables").glob("variables.data-*")
        os.truncate(data, gib * 1024**3)  # sparse: no disk used, but every byte readable
        paths.append(path)
    opened_files.clear()  # writing the models copied the template's weights
    _cpu_seconds(paths[0])
    small, large = _best_of(paths)
    variables = tuple(os.fspath(path / "variables") for path in paths)
    names = [os.fsdecode(os.fspath(f)) for f in opened_files if not isinstance(f, int)]
    assert names, "the audit hook saw no file opened at all"
    read = [name for name in names if os.path.abspath(name).startswith(variables)]
    assert not read, f"gradcheck opened the weights: {read}"
    assert large <= 1.5 * small + 0.05, f"1 GiB of weights: {small:.3f} s, 2 GiB: {large:.3f} s"

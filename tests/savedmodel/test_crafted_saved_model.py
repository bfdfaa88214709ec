"""Crafted saved_model.pb files under 100 KB: judged or refused within 5 s of CPU and 500 MB, with
one clear error line, never an internal error or a traceback. The bound is CPU time (the process's
and its children's), never wall-clock time: a busy machine does not move it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gradcheck_cli.protos.tf_protos import protos
from tests.savedmodel import crafted_protos as crafted

CPU_SECONDS = 5.0
MEGABYTES = 500

# The child reports its own peak resident memory (VmHWM, in kB): ru_maxrss would also count
# the forked test process's peak, which survives exec, and RUSAGE_CHILDREN earlier children.
_MEASURED = (
    "import atexit, os, runpy, sys; "
    "report = sys.argv.pop(1); "
    "peak = lambda: next(line.split()[1] for line in open('/proc/self/status') "
    "if line.startswith('VmHWM')); "
    "cpu = lambda: sum(os.times()[:4]); "
    "atexit.register(lambda: open(report, 'w').write(f'{peak()} {cpu()}')); "
    "runpy.run_module('gradcheck_cli', run_name='__main__', alter_sys=True)"
)

REFUSED = {
    "unpack_2_28": (crafted.unpack_num(2**28), "declares 268435456 outputs (num=268435456)"),
    "unpack_negative": (crafted.unpack_num(-5), "declares -5 outputs (num=-5)"),
    "split_2_40": (crafted.split_num("Split", 2**40), "(num_split=1099511627776)"),
    "splitv_2_31": (crafted.split_num("SplitV", 2**31 - 1), "(num_split=2147483647)"),
    "identity_n_wide": (crafted.identity_n(1000), "has 1000 inputs and 1000 outputs"),
    "while_wide": (crafted.while_loop(3000), "has 3000 inputs and 3000 outputs"),
    "cast_dtype_9999": (crafted.cast_to_dtype(9999), "has dtype 9999"),
    "argument_dtype_9999": (crafted.argument_dtype(9999), "argument 'x'"),
    "num_holds_a_type": (crafted.number_attr_of_wrong_kind, "num holding type"),
    "output_index_2_28": (crafted.output_index_read(2**28), "has its output 268435456 read"),
    "shape_rank_300": (crafted.variable_shape([1] * 300), "rank 300"),
    "shape_dimension_below_minus_one": (crafted.variable_shape([3, -7]), "below -1"),
}

JUDGED = {
    "call_tout_80000": crafted.call_with_tout(80_000),
    "shape_huge_dimensions": crafted.variable_shape([2**62, 2**62, 2**40]),
    "nested_700_deep": crafted.nested_calls(700),
}


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tensorflow as tf

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable([1.0, 2.0], name="w")

        @tf.function(input_signature=[tf.TensorSpec([2], name="x")])
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(tf.tanh(x * self.w))

    path = tmp_path_factory.mktemp("crafted") / "base"
    tf.saved_model.save(Model(), str(path))
    return path


def _crafted(base: Path, target: Path, mutate: crafted.Mutation, limit: int = 100_000) -> Path:
    saved_model = protos().saved_model_pb2.SavedModel()
    saved_model.ParseFromString((base / "saved_model.pb").read_bytes())
    meta_graph = saved_model.meta_graphs[0]
    loss = next(
        f
        for f in meta_graph.graph_def.library.function
        if f.signature.name.startswith("__inference_loss")
    )
    mutate(loss, meta_graph)
    target.mkdir()
    payload = saved_model.SerializeToString()
    assert len(payload) < limit
    (target / "saved_model.pb").write_bytes(payload)
    return target


def _run(model: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], float, float]:
    report = tmp_path / "maxrss"
    run = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(report), str(model), "--loss", "loss"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,  # a guard against a hang only: the bound is the CPU time below
    )
    # CPU seconds, the process's and its children's: what the check cost, however busy the
    # machine (wall-clock time would measure the neighbours too).
    peak, cpu = report.read_text().split()
    cpu_seconds, megabytes = float(cpu), int(peak) / 1024
    return run, cpu_seconds, megabytes


def _assert_no_crash(run: subprocess.CompletedProcess[str]) -> None:
    assert "internal error" not in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("case", REFUSED)
def test_crafted_model_is_refused(base_model: Path, tmp_path: Path, case: str) -> None:
    mutate, expected = REFUSED[case]
    run, cpu_seconds, megabytes = _run(_crafted(base_model, tmp_path / case, mutate), tmp_path)
    _assert_no_crash(run)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("gradcheck: error:")]
    assert len(errors) == 1, run.stderr
    assert "malformed SavedModel" in errors[0] and expected in errors[0], errors[0]
    assert cpu_seconds < CPU_SECONDS and megabytes < MEGABYTES, (cpu_seconds, megabytes)


@pytest.mark.parametrize("case", JUDGED)
def test_crafted_model_within_the_budget_is_judged(
    base_model: Path, tmp_path: Path, case: str
) -> None:
    model = _crafted(base_model, tmp_path / case, JUDGED[case])
    run, cpu_seconds, megabytes = _run(model, tmp_path)
    _assert_no_crash(run)
    assert run.returncode in (0, 1), run.stderr
    assert cpu_seconds < CPU_SECONDS and megabytes < MEGABYTES, (cpu_seconds, megabytes)


def test_a_saved_model_pb_of_2_gib_is_refused_from_its_size(tmp_path: Path) -> None:
    # A sparse file: 2.2 GB on paper, nothing on disk. Reading it would cost 2.2 GB of memory
    # before protobuf refused it; its size alone says it cannot be a protocol buffer.
    from gradcheck_cli.cli import command
    from tests.cli_runs import invoke

    model = tmp_path / "huge"
    model.mkdir()
    with (model / "saved_model.pb").open("wb") as sparse:
        sparse.truncate(2200 * 2**20)
    code, out, err = invoke(command, [str(model), "--loss", "loss"])
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert line == (
        f"gradcheck: error: {model / 'saved_model.pb'} is 2.1 GiB: a saved_model.pb of 2 GiB "
        "or more cannot be a protocol buffer (TensorFlow saves such models chunked, as "
        "saved_model.cpb)"
    )


@pytest.mark.parametrize(
    ("levels", "judged"),
    [
        # Past the 1000 levels the main thread's stack holds, the analysis runs on a thread of
        # its own with a deeper stack: judged, not refused.
        (1500, True),
        # 3 MB, within the item budget: an analysis that recursed once per level, its
        # recursion limit raised to match, would overflow the C stack (a segfault, no message
        # at all): refused past 10000 levels.
        (25_000, False),
    ],
)
def test_deeply_nested_functions_are_judged_or_refused_never_a_crash(
    base_model: Path, tmp_path: Path, levels: int, judged: bool
) -> None:
    model = _crafted(base_model, tmp_path / "deep", crafted.nested_calls(levels), 4_000_000)
    run, cpu_seconds, megabytes = _run(model, tmp_path)
    _assert_no_crash(run)
    errors = [line for line in run.stderr.splitlines() if line.startswith("gradcheck: error:")]
    if judged:
        assert run.returncode in (0, 1) and not errors, run.stderr
    else:
        assert run.returncode == 2, run.stderr
        (error,) = errors
        assert f"malformed SavedModel or graph: its functions call each other {levels + 1}" in error
    assert cpu_seconds < CPU_SECONDS and megabytes < MEGABYTES, (cpu_seconds, megabytes)


def test_a_sparse_1_gib_debug_info_is_passed_by_without_reading_it(
    base_model: Path, tmp_path: Path
) -> None:
    # Nothing on disk, 1 GiB on paper: read whole, it would cost 1 GB of memory. A debug info
    # far larger than its graph can have is passed by (the report has no source lines).
    import shutil

    model = tmp_path / "sparse_debug"
    shutil.copytree(base_model, model)
    (model / "debug").mkdir(exist_ok=True)
    with (model / "debug" / "saved_model_debug_info.pb").open("wb") as sparse:
        sparse.truncate(2**30)
    run, cpu_seconds, megabytes = _run(model, tmp_path)
    _assert_no_crash(run)
    assert run.returncode in (0, 1), run.stderr
    assert cpu_seconds < CPU_SECONDS and megabytes < MEGABYTES, (cpu_seconds, megabytes)

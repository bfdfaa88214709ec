"""Shared test set-up: quiet TensorFlow before anything imports it, the heavy test tier, and
the repository's script reports shared between modules."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.options import CACHE_DIR_VARIABLE
from tests.shared_checks import RepositoryChecks

# Must run before the first `import tensorflow`: C++ log noise off, and oneDNN's reordered
# float arithmetic off so gradients that are exactly zero stay exactly zero.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

# The cache of traced scripts goes to a folder of this test process, never the user's own:
# set here, so every gradcheck the module and session fixtures run uses it; each test gets a
# folder of its own (`own_cache`).
CACHE_DIR = tempfile.mkdtemp(prefix="gradcheck-test-cache-")
os.environ[CACHE_DIR_VARIABLE] = CACHE_DIR
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)

# The tests that start TensorFlow subprocesses or build many models (> 10 s each, or behind a
# module fixture that does): marked `heavy`, so `-m "not heavy"` is a fast local loop. CI and the
# README's test command run them all. A path names a whole module, `path::test` one test (every
# parametrization of it); a module fixture only saves time if every test using it is listed.
HEAVY = (
    "tests/analysis/test_control_flow_tensorflow.py",
    "tests/analysis/test_structural_zeros_tensorflow.py",
    "tests/findings/test_dead_loss_terms.py",
    "tests/findings/test_essential_cuts.py",
    "tests/findings/test_creation_names.py",
    "tests/findings/advice/test_fitted_fixes.py",
    "tests/findings/advice/test_fix_rewrites.py",
    "tests/test_fix.py",
    "tests/findings/advice/test_override_maps.py",
    "tests/findings/test_unused_networks.py",
    "tests/keras_models/test_keras_models.py",
    "tests/run_mode/test_eager_recording.py",
    "tests/run_mode/test_variable_identity.py",
    "tests/run_mode/test_what_a_run_counts.py",
    "tests/run_mode/test_clean_scripts.py",
    "tests/tracing/test_gradient_override.py",
    "tests/tracing/test_keras_creation_lines.py",
    "tests/tracing/test_loss_finding.py",
    "tests/cache/test_script_cache.py::test_editing_any_file_the_script_read_invalidates_its_entry",
    "tests/cache/test_script_cache.py::test_a_hit_renders_the_same_bytes_as_a_miss",
    "tests/cache/test_script_cache.py::test_a_hit_imports_no_tensorflow",
    "tests/tracing/test_script_loading.py",
    "tests/worker/test_warm_workers.py",
    "tests/savedmodel/test_saved_model.py::test_verify_asks_tensorflow_in_its_own_process",
    "tests/worker/test_worker_process.py",
    "tests/worker/test_progress.py",
    "tests/tracing/test_keras_warnings.py",
    "tests/legacy_keras/test_keras_warnings.py",
    "tests/reporters/test_one_explanation.py::test_every_format_gives_the_seed_the_same_cuts_and_fix",
    "tests/reporters/test_terminal_golden.py",
    "tests/reporters/test_dot_golden.py",
    "tests/test_api.py::test_assert_no_dead_variables_takes_the_worker_options",
    "tests/test_bad_input.py",
    "tests/test_security.py",
    "tests/test_cli.py",
    "tests/test_cli_policy.py",
    "tests/test_hints.py",
    "tests/test_intended_cuts.py",
    "tests/test_integer_loss.py",
    "tests/test_keras_import.py",
    "tests/test_keras_train_step.py",
    "tests/test_oracle_generated.py",
    "tests/test_oracle_keras_architectures.py",
    "tests/worker/test_process_tree.py",
    "tests/test_pytest_plugin.py",
    "tests/test_run_findings.py",
    "tests/test_run_mode.py",
    "tests/test_sample_models.py",
    "tests/test_suppressions.py",
    "tests/test_action.py",
    "tests/legacy_keras/test_fit_batches.py",
    "tests/legacy_keras/test_library_models.py",
    "tests/legacy_keras/test_watching_keras2.py",
    "tests/test_watching.py",
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test a cache of its own (gradcheck in this process and the subprocesses it starts):
    no test is answered from what another filled, whatever the order."""
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path_factory.mktemp("cache")))


# The tests of the model libraries (the `libraries` extra: keras-hub, tf-keras, TFP, TF-MOT,
# TF-Hub): marked `libraries`, a tier of their own that CI and the README's test command run;
# `-m "not libraries"` is the core tier, for an install of `.[test-core]` only.
LIBRARIES = (
    "tests/legacy_keras/",
    "tests/keras_models/test_keras_models.py",
    "tests/test_oracle_keras_architectures.py",
)


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden report files from the current output instead of comparing",
    )


# The xdist group of the modules that share `repository_checks`.
SHARING_CHECKS = "repository_checks"


@pytest.fixture(scope="session")
def repository_checks() -> Iterator[RepositoryChecks]:
    checks = RepositoryChecks()
    yield checks
    checks.close()


@pytest.fixture(scope="session")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small SavedModel without debug info whose `scale` is dead (TensorFlow says so), for the
    tests of the command line, its machine output and the README's workflow."""
    import tensorflow as tf

    from tests.oracle import dead_names
    from tests.tf_oracle_inprocess import tf_verdicts

    class Small(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable([[1.0, 2.0]], name="kernel")
            self.scale = tf.Variable(3.0, name="scale")

        @tf.function(input_signature=[tf.TensorSpec([None, 1], tf.float32)])
        def loss(self, x: tf.Tensor) -> tf.Tensor:
            return tf.reduce_sum(tf.matmul(x, self.kernel) * tf.round(self.scale))

    module = Small()
    path = tmp_path_factory.mktemp("cli") / "small"
    tf.saved_model.save(module, str(path))
    verdicts = tf_verdicts(module.loss, [module.kernel, module.scale], [tf.ones([2, 1])])
    # The tests that use it are about the command line; the model must have a dead variable,
    # and TensorFlow, not a test, says that it does.
    assert dead_names(verdicts) == {"scale"}
    return path


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        test = item.nodeid.split("[")[0]
        if test.split("::")[0] in HEAVY or test in HEAVY:
            item.add_marker(pytest.mark.heavy)
        if test.startswith(LIBRARIES):
            item.add_marker(pytest.mark.libraries)
    if config.pluginmanager.hasplugin("xdist"):
        _group_by_module(items)


def _group_by_module(items: list[pytest.Item]) -> None:
    """`--dist loadgroup` sends a group to one worker: a group per module, so a module fixture
    runs once, and one group for every module that uses `repository_checks`."""
    fixtures = {item.nodeid: getattr(item, "fixturenames", ()) for item in items}
    sharing = {_module(item) for item in items if SHARING_CHECKS in fixtures[item.nodeid]}
    for item in items:
        if not any(item.iter_markers("xdist_group")):
            module = _module(item)
            item.add_marker(
                pytest.mark.xdist_group(SHARING_CHECKS if module in sharing else module)
            )


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The shuffled order's seed, last, also under `-q` (pytest-randomly's header line is not
    shown then): a failure that depends on the order can be replayed."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int):
        terminalreporter.write_line(f"test order: --randomly-seed={seed} repeats it")

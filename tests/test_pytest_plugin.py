"""The pytest plugin through pytester: the fixture, the --gradcheck option and the marker.

Each pytester run that touches TensorFlow is a subprocess and costs seconds, so each run holds
several tests, and runs that only need a SavedModel copy one written here. (An in-process run
would drop, at its end, every module it imported: TensorFlow's and NumPy's extension modules
cannot be loaded twice, and gradcheck's would be loaded anew.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.docs_pages import code_blocks
from tests.import_probe import imported_after

pytest_plugins = ["pytester"]

SAMPLE_MODELS = Path(__file__).resolve().parents[1] / "sample_models"


def test_importing_the_plugin_does_not_import_tensorflow_or_rich() -> None:
    assert not imported_after("import gradcheck_cli.pytest_plugin")
    assert not imported_after("import gradcheck_cli.pytest_plugin", "rich")


def test_the_plugin_is_registered_with_its_option_and_marker(pytester: pytest.Pytester) -> None:
    # In subprocesses: an in-process run unloads what its plugins imported (pytest-randomly
    # imports NumPy), and NumPy cannot be imported twice in one process.
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--gradcheck*"])
    result = pytester.runpytest_subprocess("--markers")
    # The marker takes every option of `check`, named after CheckOptions' fields.
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.gradcheck(loss=None, allow_dead=(), verify=False, all_cuts=False, "
            "unsafe_deserialization=False, imports=(), sum_loss=False, timeout=None, "
            "memory_limit=None, debug=False, quiet=False, progress=False, model_map=False, "
            "cache=True, cache_dir=None):*"
        ]
    )


def test_the_fixture_and_the_readme_example_fail_on_the_seed_and_pass_on_the_fix(
    pytester: pytest.Pytester,
) -> None:
    shutil.copytree(SAMPLE_MODELS, pytester.path / "sample_models")
    # The documentation's example as written (it checks the fix), and the same test on the seed;
    # the README shows the same test.
    example = code_blocks("pytest.md", "Use in pytest", "python")[0]
    assert code_blocks("README.md", "Use it", "python")[1] in example
    assert "sample_models/faulty_weights_fixed.py" in example
    readme_seed = example.replace("faulty_weights_fixed.py", "faulty_weights_tf1.py")
    pytester.makepyfile(
        test_readme_fixed=example,
        test_readme_seed=readme_seed,
        test_fixture="""
        def test_seed(gradcheck):
            gradcheck.assert_no_dead_variables("sample_models/faulty_weights_tf1.py", loss="loss")

        def test_fixed(gradcheck):
            report = gradcheck.assert_no_dead_variables(
                "sample_models/faulty_weights_fixed.py", loss="loss", timeout=120
            )
            assert report.dead == ()
            assert "hidden1/weights_i" in [v.name for v in report.variables]

        def test_seed_allowed(gradcheck):
            report = gradcheck.check(
                "sample_models/faulty_weights_tf1.py", loss="loss", allow_dead=["*weights_i"]
            )
            assert report.dead == ()
            assert list(report.allowed) == ["hidden1/weights_i"]
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.re_match_lines([r"FAILED test_fixture\.py::test_seed( |$)"])
    result.stdout.re_match_lines([r"FAILED test_readme_seed\.py::"])
    output = result.stdout.str()
    assert "blocked hidden1/weights_i" in output
    assert "sample_models/faulty_weights_tf1.py:36" in output  # where weights_i is created
    assert "StopGradient" in output and "Cast" in output
    assert "straight-through" in output
    # The failure is the report: gradcheck's own frames are hidden from the traceback.
    assert "gradcheck_cli/" not in output and "gradcheck_cli\\" not in output
    assert "def require_no_dead" not in output


# Each test writes a SavedModel into its tmp_path: a copy of the suite's small one (conftest's
# `saved`, whose `scale` TensorFlow says is dead), so that the pytest subprocesses need not import
# TensorFlow (gradcheck reads a SavedModel without it).
SAVED_MODEL_TESTS = """
import shutil

import pytest

EXPORTED = {exported!r}


def write_saved_model(tmp_path):
    shutil.copytree(EXPORTED, tmp_path / "exported")


@pytest.mark.gradcheck(loss="loss")
def test_marked(tmp_path):
    write_saved_model(tmp_path)


@pytest.mark.gradcheck(loss="loss", allow_dead=["*scale*"])
def test_marked_allowed(tmp_path):
    write_saved_model(tmp_path)


@pytest.mark.gradcheck(loss="loss", alow_dead=["*scale*"])
def test_marked_misspelt(tmp_path):
    write_saved_model(tmp_path)


def test_unmarked(tmp_path):
    write_saved_model(tmp_path)
"""


def test_marker_and_option_check_the_saved_models_a_test_writes(
    pytester: pytest.Pytester, saved: Path
) -> None:
    pytester.makepyfile(SAVED_MODEL_TESTS.format(exported=str(saved)))
    marker_only = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    marker_only.assert_outcomes(passed=2, failed=2)
    marker_only.stdout.re_match_lines([r"FAILED .*::test_marked( |$)"])
    marker_only.stdout.re_match_lines([r"FAILED .*::test_marked_misspelt( |$)"])
    marker_only.stdout.fnmatch_lines(
        ["pytest.mark.gradcheck() got an unexpected keyword argument 'alow_dead'; *"]
    )
    assert "scale" in marker_only.stdout.str()
    assert "Round" in marker_only.stdout.str()

    option = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--gradcheck", "-k", "unmarked"
    )
    option.assert_outcomes(failed=1, deselected=3)
    option.stdout.re_match_lines([r"FAILED .*::test_unmarked( |$)"])
    assert "scale" in option.stdout.str()


def test_the_fixture_and_the_marker_apply_the_project_s_settings(
    pytester: pytest.Pytester, saved: Path
) -> None:
    # The project ignores GC103 (the Round that cuts `scale`), as `gradcheck` on its command
    # line would; without the setting, the same tests fail (test_marker_and_option_...).
    pytester.makepyprojecttoml('[tool.gradcheck]\nignore = ["GC103"]\n')
    pytester.makepyfile(
        SAVED_MODEL_TESTS.format(exported=str(saved))
        + f"""

def test_fixture(gradcheck):
    report = gradcheck.assert_no_dead_variables({str(saved)!r}, loss="loss")
    assert [v.name for v in report.variables if v.dead] == ["scale"]
    assert not any(item.code == "GC103" for item in report.findings)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)  # test_marked passes now; the misspelt one fails
    result.stdout.re_match_lines([r"FAILED .*::test_marked_misspelt( |$)"])

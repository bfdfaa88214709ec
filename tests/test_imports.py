"""TensorFlow stays behind one door: the CLI's help, reporters and library import stay light."""

from __future__ import annotations

from pathlib import Path

from tests.import_probe import imported_after, modules_after


def test_package_cli_and_reporters_do_not_import_tensorflow() -> None:
    assert not imported_after(
        "import gradcheck_cli, gradcheck_cli.cli, gradcheck_cli.reporters.terminal, "
        "gradcheck_cli.reporters.json_reporter, gradcheck_cli.findings.build, "
        "gradcheck_cli.analysis.analyse, gradcheck_cli.pipeline"
    )


def test_the_worker_protocol_and_the_worker_modules_do_not_import_tensorflow_on_import() -> None:
    # The worker entry point unpickles a request before it decides to import TensorFlow.
    assert not imported_after(
        "import gradcheck_cli.worker.protocol, gradcheck_cli.worker.process, "
        "gradcheck_cli.jobs.worker_entry, gradcheck_cli.tracing.script_loading, "
        "gradcheck_cli.tracing.keras_models, gradcheck_cli.tracing.eager_fallback"
    )


def test_help_does_not_import_tensorflow() -> None:
    assert not imported_after(
        "from click.testing import CliRunner\n"
        "from gradcheck_cli.cli import command\n"
        "assert CliRunner().invoke(command, ['--help']).exit_code == 0"
    )


def test_the_probe_sees_what_the_code_imports() -> None:
    # The probe looks a module up by name in the fresh process; a light module shows that it
    # works as well as TensorFlow would, without its seconds of import.
    assert imported_after("import fractions", "fractions")
    assert not imported_after("import json", "fractions")
    # And by default it looks for TensorFlow's name.
    assert imported_after("sys.modules['tensorflow'] = sys")


def test_a_machine_readable_check_loads_neither_rich_nor_tensorflow(saved: Path) -> None:
    # gradcheck in a pre-commit hook or CI job pays for what it prints: JSON needs no rich.
    check = (
        "from click.testing import CliRunner\n"
        "from gradcheck_cli.cli import command\n"
        f"ran = CliRunner().invoke(command, [{str(saved)!r}, '--loss', 'loss', '-f', 'json'])\n"
        "assert ran.exit_code == 1, ran.output\n"
        'assert \'"status": "blocked"\' in ran.output, ran.output\n'
    )
    assert not imported_after(check, "rich")
    assert not imported_after(check)


# What a SavedModel's check from the command line never runs: its start-up is most of its time.
NOT_FOR_A_SAVED_MODEL = (
    "tensorflow",  # the protos load without the runtime (protos/descriptors.py)
    "tensorflow.core",  # nor its generated modules: their descriptors are read from source
    "google.protobuf.descriptor_pb2",
    "google.protobuf.descriptor_pool",  # which imports protobuf's pure-Python implementation
    "google.protobuf.internal.python_message",
    "google.protobuf.text_format",  # a saved_model.pbtxt's
    "keras",
    "numpy",
    "rich",  # JSON output
    "cloup",  # --help's layout
    "gradcheck_cli.cli.help_layout",
    "gradcheck_cli.cli.usage",  # a usage error's hint
    "gradcheck_cli.worker.protocol",  # a script's or Keras file's trace, and the worker
    "gradcheck_cli.worker.process",
    "gradcheck_cli.jobs",
    "gradcheck_cli.tracing",
    "gradcheck_cli.run_mode",
    "gradcheck_cli.cache",  # the script cache
    "gradcheck_cli.source_code.keras_archive",
    "gradcheck_cli.fixing",  # --fix and --diff
    "gradcheck_cli.reporters.terminal",  # the formats not asked for
    "gradcheck_cli.reporters.sarif",
    "gradcheck_cli.reporters.dot",
    "gradcheck_cli.watching",
)


def test_a_saved_model_checked_from_the_command_line_imports_only_what_its_check_runs(
    saved: Path,
) -> None:
    check = (
        f"sys.argv = ['gradcheck', {str(saved)!r}, '--loss', 'loss', '-f', 'json', '-q']\n"
        "try:\n"
        "    import gradcheck_cli.__main__\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 1, exit.code  # scale is dead\n"
    )
    loaded = modules_after(check)
    assert "gradcheck_cli.reporters.json_reporter" in loaded  # the probe saw the check
    assert sorted(loaded.intersection(NOT_FOR_A_SAVED_MODEL)) == []

"""Configuration: `[tool.gradcheck]` parsing, the three layers, errors that name the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gradcheck_cli.cli import ExitCode, command
from gradcheck_cli.config import (
    Overrides,
    Settings,
    find_pyproject,
    load_settings,
    resolve_cache_dir,
    resolve_memory_limit,
    resolve_timeout,
)
from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.findings.policy import FailOn
from gradcheck_cli.options import CACHE_DIR_VARIABLE, CheckOptions
from gradcheck_cli.reporters import Format
from tests.cli_runs import cli_result, invoke
from tests.error_documents import shows_path


def _pyproject(folder: Path, body: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text(f'[project]\nname = "x"\n\n[tool.gradcheck]\n{body}\n')
    return path


def test_defaults_without_a_config(tmp_path: Path) -> None:
    assert load_settings(cwd=tmp_path) == Settings()


def test_every_key_is_read_and_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    path = _pyproject(
        tmp_path,
        'loss = "train_loss"\n'
        'select = ["GC1", "GC201"]\n'
        'ignore = ["GC204"]\n'
        'allow-dead = ["*/pooler/*"]\n'
        'format = "json"\n'
        'fail-on = "warning"\n'
        'baseline = "ci/baseline.json"\n'
        "timeout = 90\n"
        'memory-limit = "6GiB"\n'
        "cache = false\n"
        'cache-dir = ".cache/gradcheck"\n',
    )
    settings = load_settings(config=path, cwd="/")
    assert settings.timeout == 90.0
    assert settings.memory_limit == 6 * 2**30
    assert settings.cache is False
    assert settings.cache_dir == tmp_path.resolve() / ".cache" / "gradcheck"
    assert settings.loss == "train_loss"
    assert settings.select == ("GC1", "GC201")
    assert settings.ignore == ("GC204",)
    assert settings.allow_dead == (("*/pooler/*", ""),)
    assert settings.output_format is Format.JSON
    assert settings.fail_on is FailOn.WARNING
    assert settings.baseline == tmp_path.resolve() / "ci" / "baseline.json"
    assert settings.loss_for("anything") == "train_loss"


def test_allow_dead_table_keeps_the_reasons(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, 'allow-dead = { "*/pooler/*" = "the head ignores the pooler" }')
    settings = load_settings(config=path)
    assert settings.allow_dead == (("*/pooler/*", "the head ignores the pooler"),)


def test_loss_table_matches_model_paths_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "models" / "bert").mkdir(parents=True)
    path = _pyproject(tmp_path, 'loss = { "models/bert" = "mlm_loss", "models/*.py" = "loss" }')
    elsewhere = tmp_path / "models"
    monkeypatch.chdir(elsewhere)
    settings = load_settings(config=path)
    assert settings.loss_for("bert") == "mlm_loss"
    assert settings.loss_for("bert/") == "mlm_loss"
    assert settings.loss_for(tmp_path / "models" / "train.py") == "loss"
    assert settings.loss_for("other") is None  # auto-detection
    assert load_settings(Overrides(loss="x"), config=path).loss_for("bert") == "x"


def test_models_are_relative_to_the_file_and_shown_as_typed_from_the_working_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    path = _pyproject(tmp_path, 'models = ["exported/model", "sub/train.py", "../outside.keras"]')
    assert load_settings(config=path, cwd=tmp_path).models == (
        "exported/model",
        "sub/train.py",
        str(tmp_path.resolve().parent / "outside.keras"),
    )
    assert load_settings(config=path, cwd=tmp_path / "sub").models == (
        str(tmp_path.resolve() / "exported" / "model"),
        "train.py",
        str(tmp_path.resolve().parent / "outside.keras"),
    )


def test_a_bare_gradcheck_without_models_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli_result(command, [])
    assert result.exit_code == ExitCode.ERROR
    assert result.stdout == ""
    assert "No MODEL given" in result.stderr and "models = [" in result.stderr


def test_a_bare_gradcheck_checks_the_configured_models_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    _pyproject(tmp_path, 'models = ["missing_model", "sub/missing_script.py"]')
    monkeypatch.chdir(tmp_path / "sub")
    result = cli_result(command, [])
    assert result.exit_code == ExitCode.ERROR
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert shows_path(errors[0], f"{tmp_path.resolve() / 'missing_model'}:")
    # Shown relative to the working directory, as the user would type it.
    assert " missing_script.py:" in errors[1] and str(tmp_path) not in errors[1]
    # MODEL arguments replace the configured models.
    result = cli_result(command, ["other_model"])
    assert result.exit_code == ExitCode.ERROR
    assert "other_model" in result.stderr and "missing" not in result.stderr


def test_gradcheck_toml_is_the_table_itself(tmp_path: Path) -> None:
    path = tmp_path / "gradcheck.toml"
    path.write_text('fail-on = "never"\nbaseline = "b.json"\n')
    settings = load_settings(config=path)
    assert settings.fail_on is FailOn.NEVER
    assert settings.baseline == tmp_path.resolve() / "b.json"


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = _pyproject(
        tmp_path,
        'select = ["GC1"]\nignore = ["GC204"]\nallow-dead = { "a*" = "why" }\n'
        'format = "json"\nfail-on = "warning"\nbaseline = "b.json"',
    )
    flags = Overrides(
        select=("GC2",),
        ignore=("GC205",),
        allow_dead=("b*",),
        output_format=Format.DOT,
        fail_on=FailOn.ERROR,
        baseline=Path("flag.json"),
    )
    settings = load_settings(flags, config=path, cwd=tmp_path / "sub")
    assert settings.select == ("GC2",)  # replaces
    assert settings.ignore == ("GC204", "GC205")  # adds
    assert settings.allow_dead == (("a*", "why"), ("b*", ""))  # adds
    assert settings.output_format is Format.DOT
    assert settings.fail_on is FailOn.ERROR
    assert settings.baseline == tmp_path / "sub" / "flag.json"  # flags: relative to cwd


def test_nearest_pyproject_with_the_table_is_found_walking_up(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, 'fail-on = "never"')
    (tmp_path / ".git").mkdir()  # the repository's root
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\nname = "no-table"\n')
    assert find_pyproject(inner) == path.resolve()
    assert load_settings(cwd=inner).fail_on is FailOn.NEVER


def test_the_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'allow-dead = ["*"]')  # above the repository: not its config
    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    assert find_pyproject(repository / ".git") is None
    assert load_settings(cwd=repository).allow_dead == ()


def test_outside_a_repository_the_first_pyproject_ends_the_search(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'allow-dead = ["*"]')
    project = tmp_path / "unpacked"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "no-table"\n')
    assert find_pyproject(project) is None


def test_a_config_another_user_can_change_is_skipped_with_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    _pyproject(shared, 'allow-dead = ["*"]')
    shared.chmod(0o777)  # a /tmp of its own
    settings = load_settings(cwd=shared)
    assert settings.allow_dead == ()
    assert settings.skipped == (
        f"ignoring {shared.resolve() / 'pyproject.toml'}: its folder is writable by every user",
    )
    shared.chmod(0o755)
    assert load_settings(cwd=shared).allow_dead == (("*", ""),)
    # The same file owned by another user than the one who checks (root is trusted).
    config = shared / "pyproject.toml"
    if os.getuid() == 0:
        os.chown(config, 4242, -1)
    else:
        monkeypatch.setattr("os.getuid", lambda: 4242)
    owner = config.stat().st_uid
    (skipped,) = load_settings(cwd=shared).skipped
    assert skipped.endswith(f"the file belongs to another user (uid {owner})")
    monkeypatch.chdir(shared)
    code, _, err = invoke(command, [])
    assert code == ExitCode.ERROR  # no model named, and the config that names them is skipped
    assert err.splitlines()[0] == f"gradcheck: warning: {skipped}"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('alow-dead = ["x"]', "'alow-dead'"),
        ('allow-dead = "x"', "allow-dead"),
        ("allow-dead = { x = 1 }", "allow-dead"),
        ("select = [1]", "select"),
        ('select = ["XX9"]', "'XX9'"),
        ('ignore = "GC1"', "ignore"),
        ('format = "pdf"', "format"),
        ('fail-on = "sometimes"', "fail-on"),
        ("baseline = 3", "baseline"),
        ('models = "train.py"', "models"),
        ("models = [1]", "models"),
        ("loss = 3", "loss"),
        ("loss = { a = 3 }", "loss"),
        ('timeout = "10"', "timeout"),
        ("timeout = true", "timeout"),
        ("timeout = 0", "timeout"),
        ("timeout = -5", "timeout"),
        ("timeout = inf", "timeout"),
        ("timeout = nan", "timeout"),
        ("timeout = 1e9", "timeout"),
        ("memory-limit = 8", "memory-limit"),
        ('memory-limit = "8"', "memory-limit"),
        ('memory-limit = "100MiB"', "memory-limit"),
        ('memory-limit = "lots"', "memory-limit"),
        ('memory-limit = "9999999TiB"', "memory-limit"),
        ("memory-limit = true", "memory-limit"),
        ('cache = "no"', "cache"),
        ("cache-dir = false", "cache-dir"),
    ],
)
def test_bad_keys_and_types_name_the_key_and_the_file(
    tmp_path: Path, body: str, named: str
) -> None:
    path = _pyproject(tmp_path, body)
    with pytest.raises(GradcheckError) as caught:
        load_settings(config=path)
    assert named in str(caught.value) and shows_path(str(caught.value), path)


def test_unknown_key_exits_2_on_the_command_line(tmp_path: Path) -> None:
    path = _pyproject(tmp_path, 'alow-dead = ["x"]')
    result = cli_result(command, ["--config", str(path), str(tmp_path)])
    assert result.exit_code == ExitCode.ERROR
    assert result.stdout == ""
    assert "'alow-dead'" in result.stderr and shows_path(result.stderr, path)
    assert len(result.stderr.strip().splitlines()) == 1


def test_invalid_toml_and_missing_table_are_errors(tmp_path: Path) -> None:
    broken = tmp_path / "gradcheck.toml"
    broken.write_text("select = [\n")
    with pytest.raises(GradcheckError, match="not valid TOML"):
        load_settings(config=broken)
    plain = tmp_path / "pyproject.toml"
    plain.write_text('[project]\nname = "x"\n')
    with pytest.raises(GradcheckError, match=r"no \[tool.gradcheck\] table"):
        load_settings(config=plain)


def test_bad_code_flag_is_a_usage_error(tmp_path: Path) -> None:
    result = cli_result(command, ["--select", "GC1,NOPE", str(tmp_path)])
    assert result.exit_code == 2 and "'NOPE'" in result.stderr


def test_each_model_is_checked_with_its_loss_and_the_allowed_dead(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    path = _pyproject(tmp_path, 'loss = { "models/*.py" = "loss" }\nallow-dead = { "a*" = "why" }')
    settings = load_settings(Overrides(allow_dead=("b*",)), config=path)
    flags = CheckOptions(verify=True, timeout=30.0)
    options = settings.options_for(tmp_path / "models" / "train.py", flags)
    assert options == CheckOptions(
        loss="loss", allow_dead=(("a*", "why"), ("b*", "")), verify=True, timeout=30.0
    )
    assert settings.options_for(tmp_path / "other.py", flags).loss is None


@pytest.mark.parametrize(
    ("flag", "variable", "configured", "seconds"),
    [
        (9.0, "7", 5.0, 9.0),  # the flag beats everything
        (None, "7", 5.0, 7.0),  # then GRADCHECK_TIMEOUT
        (None, None, 5.0, 5.0),  # then the config file's timeout
        (None, " ", 5.0, 5.0),  # an empty variable is no variable
        (None, None, None, 600.0),  # then the default
    ],
)
def test_timeout_flag_beats_the_variable_beats_the_file_beats_600(
    flag: float | None, variable: str | None, configured: float | None, seconds: float
) -> None:
    environ = {} if variable is None else {"GRADCHECK_TIMEOUT": variable}
    assert resolve_timeout(flag, Settings(timeout=configured), environ) == seconds


@pytest.mark.parametrize("variable", ["soon", "inf", "nan", "1e308", "0", "-1", "86401"])
def test_a_bad_timeout_variable_is_an_error_naming_it(variable: str) -> None:
    with pytest.raises(GradcheckError, match=r"^GRADCHECK_TIMEOUT: .*86400 \(one day\)"):
        resolve_timeout(None, Settings(timeout=5.0), {"GRADCHECK_TIMEOUT": variable})


@pytest.mark.parametrize(
    ("flag", "variable", "configured", "limit"),
    [
        (2**33, "4GiB", 2**31, 2**33),  # the flag beats everything
        (None, "4GiB", 2**31, 2**32),  # then GRADCHECK_MEMORY_LIMIT
        (None, "none", 2**31, 0),  # which may lift the limit
        (None, None, 2**31, 2**31),  # then the config file's memory-limit
        (None, None, None, None),  # then the worker's default
    ],
)
def test_memory_limit_flag_beats_the_variable_beats_the_file(
    flag: int | None, variable: str | None, configured: int | None, limit: int | None
) -> None:
    environ = {} if variable is None else {"GRADCHECK_MEMORY_LIMIT": variable}
    assert resolve_memory_limit(flag, Settings(memory_limit=configured), environ) == limit


@pytest.mark.parametrize("variable", ["lots", "8", "-1G", "1KiB"])
def test_a_bad_memory_limit_variable_is_an_error_naming_it(variable: str) -> None:
    with pytest.raises(GradcheckError, match=r"^GRADCHECK_MEMORY_LIMIT: a memory limit"):
        resolve_memory_limit(None, Settings(), {"GRADCHECK_MEMORY_LIMIT": variable})


@pytest.mark.parametrize(
    ("variable", "configured", "chosen"),
    [
        ("/from/variable", Path("/from/config"), "/from/variable"),  # the variable wins
        (" ", Path("/from/config"), "/from/config"),  # then the config file's cache-dir
        (None, None, None),  # then the platform's folder, chosen by the cache itself
    ],
)
def test_the_cache_folder_variable_beats_the_file(
    variable: str | None, configured: Path | None, chosen: str | None
) -> None:
    environ = {} if variable is None else {CACHE_DIR_VARIABLE: variable}
    assert resolve_cache_dir(Settings(cache_dir=configured), environ) == chosen


@pytest.mark.parametrize(
    ("body", "flags", "cache"),
    [
        ("cache = true", [], True),
        ("cache = true", ["--no-cache"], False),
        ("cache = false", [], False),
    ],
)
def test_no_cache_and_the_cache_key_reach_the_check_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, flags: list[str], cache: bool
) -> None:
    from gradcheck_cli import cli

    chosen: list[CheckOptions] = []
    monkeypatch.setattr(cli, "run", lambda options: chosen.append(options.check) or 0)
    config = _pyproject(tmp_path, body)
    result = cli_result(command, ["model.py", "--config", config, *flags])
    assert result.exit_code == 0 and chosen[0].cache is cache


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("tool = 5\n", "`tool` must be a table"),
        ('[tool.gradcheck]\ncache-dir = "a\\u0000b"\n', "a NUL character in 'a\\0b'"),
        ('[tool.gradcheck]\nbaseline = "b\\u0000.json"\n', "a NUL character in"),
        (
            "[tool.gradcheck]\nx = " + "[" * 5000 + "]" * 5000 + "\n",
            "nested more than 32 levels deep",
        ),
        ("[tool.gradcheck]\nx = " + "[" * 40 + "]" * 40 + "\n", "nested more than 32 levels"),
    ],
    ids=["tool-not-a-table", "nul-cache-dir", "nul-baseline", "deep", "deeper-than-32"],
)
def test_a_malformed_config_is_one_error_line(
    body: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(body)
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke(command, ["model.py", "--loss", "loss"])
    assert code == ExitCode.ERROR and out == ""
    (line,) = err.splitlines()
    assert line.startswith(f"gradcheck: error: {tmp_path / 'pyproject.toml'}: ")
    assert says in line


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ('{"schema": "gradcheck-baseline/1", "models": {"m.py": "w"}}', "must be a list"),
        ('{"schema": "gradcheck-baseline/1", "models": {"m.py": [1]}}', "must be a list"),
        ("[" * 100000 + "]" * 100000, "nested more than 32 levels deep"),
        ('{"schema": "gradcheck-baseline/1", "models": {"m\\u0000.py": []}}', "a NUL character"),
    ],
    ids=["string-not-list", "number-not-name", "deep", "nul-key"],
)
def test_a_malformed_baseline_is_one_error(document: str, says: str, tmp_path: Path) -> None:
    from gradcheck_cli.run import read_baseline

    path = tmp_path / "baseline.json"
    path.write_text(document)
    with pytest.raises(GradcheckError) as raised:
        read_baseline(path)
    assert str(raised.value).startswith(f"{path}: ") and says in str(raised.value)

"""`gradcheck` on Keras models, `.keras`/`.h5` files and Keras exports agrees with TensorFlow.

The objective of a compiled Keras model is what `model.fit` minimises: its compiled loss(es)
plus `model.losses`. `keras_oracle` asks TensorFlow's tape for the gradient of exactly that, per
weight; every dead/alive/frozen assertion below compares gradcheck's JSON report with that
answer. Files are written into `tmp_path` at test time, loaded back with `safe_mode=True` for
the oracle, and every `gradcheck` runs in this process (its TensorFlow workers fork from one
warm launcher) in one module-scoped fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gradcheck_cli.cli import command
from tests.cli_runs import invoke
from tests.error_documents import assert_error_document
from tests.keras_models import fixture_models
from tests.keras_models.keras_oracle import (
    DEAD,
    ROOT,
    KerasVerdicts,
    keras_verdicts,
    start_script_verdicts,
)

SCRIPTS = Path(__file__).parent / "scripts"
DEAD_STATUSES = ("blocked", "unused")
PROJ_LINE = "self.proj = layers.Dense(32)"


def _mobilenet_v2() -> Any:
    import keras

    model = keras.applications.MobileNetV2(
        weights=None, input_shape=(32, 32, 3), alpha=0.35, classes=10
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


# file name -> (builder, the `--loss` gradcheck gets, which the oracle compiles an uncompiled
# model with). The suffix picks the format.
FILE_CASES: dict[str, tuple[Callable[[], Any], str | None]] = {
    "sequential_penalised.keras": (fixture_models.sequential_penalised, None),
    "sequential_frozen_first.h5": (fixture_models.sequential_frozen_first, None),
    "functional_argmax_gate.keras": (fixture_models.functional_argmax_gate, None),
    "functional_activity_side.keras": (fixture_models.functional_activity_side, None),
    "two_heads.keras": (fixture_models.two_heads, None),
    # Keras 3.15 cannot compile its own .h5 of a string loss back: checked with the file's loss.
    "two_heads.h5": (fixture_models.two_heads, None),
    "twin_towers.keras": (fixture_models.twin_towers, None),
    "uncompiled_gate.keras": (fixture_models.uncompiled_gate, "mse"),
    "hand_pooler.keras": (lambda: fixture_models.hand_pooler(None), None),
    "hand_pooler_l2.keras": (lambda: fixture_models.hand_pooler(0.01), None),
    "bert_pooler.keras": (fixture_models.bert_pooler, None),
    "frozen_backbone.keras": (fixture_models.frozen_backbone, None),
    "mobilenet_v2.keras": (_mobilenet_v2, None),
}
# Scripts checked with `--loss model` (a compiled Keras model bound at module level).
SCRIPT_CASES = (
    "subclassed_unused_proj.py",
    "frozen_backbone.py",
    "bert_pooler.py",
    "bert_pooler_regularized.py",
)
EXPORT_CASE = "export"
ALL_CASES = [*FILE_CASES, *SCRIPT_CASES, EXPORT_CASE]


@dataclass
class Case:
    """One gradcheck run and TensorFlow's verdicts on the same objective."""

    name: str
    target: Path
    verdicts: KerasVerdicts
    returncode: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        try:
            report: dict[str, Any] = json.loads(self.stdout)
        except ValueError:
            pytest.fail(
                f"{self.name}: gradcheck exited {self.returncode} without a JSON report\n"
                f"stderr: {self.stderr[-3000:]}"
            )
        return report

    @property
    def statuses(self) -> dict[str, str]:
        return {v["name"]: v["status"] for v in self.report["variables"]}

    @property
    def gradcheck_dead(self) -> set[str]:
        return {name for name, status in self.statuses.items() if status in DEAD_STATUSES}

    def findings(self, code: str) -> list[dict[str, Any]]:
        return [f for f in self.report["findings"] if f["code"] == code]

    def disagreement(self, names: set[str]) -> str:
        return ", ".join(
            f"{n}: gradcheck {self.statuses.get(n, 'missing')} / TensorFlow "
            f"{self.verdicts.full.get(n, 'missing')} (data loss only: "
            f"{self.verdicts.data_only.get(n, 'missing')})"
            for n in sorted(names)
        )


def _gradcheck(*args: str) -> tuple[int, str, str]:
    return invoke(command, [*args, "--format", "json"])


def _lambda_model() -> Any:
    import keras
    from keras import layers

    inputs = keras.Input((fixture_models.FEATURES,), name="x")
    doubled = layers.Lambda(lambda t: t * 2.0, name="doubled")(inputs)
    model = keras.Model(inputs, layers.Dense(1, name="lambda_out")(doubled))
    model.compile(optimizer="adam", loss="mse")
    return model


def _lambda_loss_model() -> Any:
    import keras
    from keras import layers

    inputs = keras.Input((fixture_models.FEATURES,), name="x")
    model = keras.Model(inputs, layers.Dense(1, name="lambda_loss_out")(inputs))
    model.compile(optimizer="adam", loss=lambda y, y_pred: keras.ops.mean((y - y_pred) ** 2))
    return model


def _as_keras_loads_it(path: Path, compile_config: dict[str, Any]) -> Any:
    """The model of `path` as Keras loads it back in safe mode. Keras 3.15 cannot compile back
    the string losses of an .h5 file it wrote ("Could not deserialize 'keras.metrics.mse'"):
    then Keras's own compile is given the loss arguments the builder compiled the model with."""
    import keras

    try:
        return keras.saving.load_model(str(path), safe_mode=True)
    except ValueError as error:
        if path.suffix != ".h5" or "Could not deserialize" not in str(error):
            raise
    loaded = keras.saving.load_model(str(path), safe_mode=True, compile=False)
    loaded.compile(
        optimizer="adam",
        loss=compile_config["loss"],
        loss_weights=compile_config.get("loss_weights"),
    )
    return loaded


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case: the script oracles run in the background while gradcheck checks each model."""
    directory = tmp_path_factory.mktemp("keras_models")
    pending_oracles = {
        name: start_script_verdicts(SCRIPTS / name, "model") for name in SCRIPT_CASES
    }
    runs: dict[str, tuple[int, str, str]] = {}
    targets: dict[str, Path] = {}
    verdicts: dict[str, KerasVerdicts] = {}
    for name in SCRIPT_CASES:
        targets[name] = SCRIPTS / name
        runs[name] = _gradcheck(str(targets[name]), "--loss", "model")
    compile_configs: dict[str, dict[str, Any]] = {}
    for name, (build, loss) in FILE_CASES.items():
        targets[name] = directory / name
        built = build()
        compile_configs[name] = built.get_compile_config() or {}
        built.save(str(targets[name]))
        loss_args = () if loss is None else ("--loss", loss)
        runs[name] = _gradcheck(str(targets[name]), *loss_args)
    targets[EXPORT_CASE] = directory / "exported"
    model, x, y = fixture_models.exported_gate(targets[EXPORT_CASE])
    runs[EXPORT_CASE] = _gradcheck(str(targets[EXPORT_CASE]), "--loss", "loss")
    lambda_path = directory / "lambda.keras"
    _lambda_model().save(str(lambda_path))
    lambda_loss_path = directory / "lambda_loss.h5"
    _lambda_loss_model().save(str(lambda_loss_path))
    bad = {
        "uncompiled without --loss": _gradcheck(str(targets["uncompiled_gate.keras"])),
        "lambda layer (safe_mode)": _gradcheck(str(lambda_path)),
        "lambda loss in an .h5": _gradcheck(str(lambda_loss_path)),
    }

    # The oracles: the export's own model and inputs; files as gradcheck will see them.
    verdicts[EXPORT_CASE] = keras_verdicts(model, x, y)
    for name, (_, loss) in FILE_CASES.items():
        loaded = _as_keras_loads_it(targets[name], compile_configs[name])
        verdicts[name] = keras_verdicts(loaded, loss=loss)
    for name, pending in pending_oracles.items():
        verdicts[name] = pending.result()
    cases = {name: Case(name, targets[name], verdicts[name], *runs[name]) for name in ALL_CASES}
    return {"cases": cases, "bad": bad}


@pytest.fixture(params=ALL_CASES)
def case(request: pytest.FixtureRequest, runs: dict[str, Any]) -> Case:
    found: Case = runs["cases"][request.param]
    return found


# --- Every case -------------------------------------------------------------------------------


def test_exit_code_is_1_iff_tensorflow_finds_a_dead_weight(case: Case) -> None:
    expected = 1 if case.verdicts.dead else 0
    assert case.returncode == expected, (
        f"{case.name}: exit {case.returncode}, expected {expected} "
        f"(TensorFlow's dead set: {sorted(case.verdicts.dead)})\nstderr: {case.stderr[-3000:]}"
    )
    assert case.report["schema"] == "gradcheck/1"


def test_every_weight_is_reported_once_by_its_keras_path(case: Case) -> None:
    names = [v["name"] for v in case.report["variables"]]
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not repeated, f"{case.name}: reported more than once: {repeated}"
    expected = set(case.verdicts.full)
    assert set(names) == expected, (
        f"{case.name}: not reported: {sorted(expected - set(names))}; "
        f"not a weight of the model: {sorted(set(names) - expected)}"
    )


def test_dead_set_matches_tensorflow(case: Case) -> None:
    gradcheck_only = case.gradcheck_dead - case.verdicts.dead
    tensorflow_only = case.verdicts.dead - case.gradcheck_dead
    assert not gradcheck_only and not tensorflow_only, (
        f"{case.name}\n  dead for gradcheck only: {case.disagreement(gradcheck_only)}\n"
        f"  dead for TensorFlow only: {case.disagreement(tensorflow_only)}"
    )


def test_frozen_set_is_the_non_trainable_weights(case: Case) -> None:
    frozen = {n for n, status in case.statuses.items() if status == "frozen"}
    assert frozen == case.verdicts.frozen, (
        f"{case.name}\n"
        f"  frozen for gradcheck only: {case.disagreement(frozen - case.verdicts.frozen)}\n"
        f"  non-trainable but not frozen: {case.disagreement(case.verdicts.frozen - frozen)}"
    )
    not_trainable = {v["name"] for v in case.report["variables"] if not v["trainable"]}
    assert not_trainable == case.verdicts.frozen


def test_gc206_marks_exactly_the_weights_only_a_penalty_trains(case: Case) -> None:
    """GC206: TensorFlow gives a gradient, but none from the compiled loss alone."""
    flagged = {f["variable"] for f in case.findings("GC206")}
    expected = case.verdicts.trained_only_by_model_losses
    assert flagged == expected, (
        f"{case.name}\n  GC206 without reason: {case.disagreement(flagged - expected)}\n"
        f"  GC206 missing: {case.disagreement(expected - flagged)}"
    )
    for finding in case.findings("GC206"):
        assert finding["severity"] == "warning"
        assert case.statuses[finding["variable"]] == "ok", case.disagreement({finding["variable"]})


# --- Acceptance ---------------------------------------------------------------------------------


def _weights_of(case: Case, layer: str) -> set[str]:
    """The weights whose Keras path names `layer` as their owning layer."""
    return {n for n in case.verdicts.full if n.split("/")[-2] == layer}


def test_a_aux_head_without_loss_is_dead(runs: dict[str, Any]) -> None:
    case: Case = runs["cases"]["two_heads.keras"]
    aux = set().union(*(_weights_of(case, layer) for layer in fixture_models.AUX_LAYERS))
    assert aux and aux <= case.verdicts.dead, "TensorFlow: the aux head should be dead"
    assert aux <= case.gradcheck_dead, case.disagreement(aux - case.gradcheck_dead)
    assert case.gradcheck_dead == case.verdicts.dead
    assert case.returncode == 1


def test_a_tower_whose_twin_has_the_loss_is_dead_not_hidden(runs: dict[str, Any]) -> None:
    case: Case = runs["cases"]["twin_towers.keras"]
    spare = {name for name in case.verdicts.full if name.startswith("spare_")}
    assert len(spare) == 4 and spare <= case.verdicts.dead, "TensorFlow: spare gets no gradient"
    assert spare <= case.gradcheck_dead, case.disagreement(spare - case.gradcheck_dead)
    assert case.returncode == 1


def test_b_subclassed_proj_is_unused_and_points_at_its_construction(
    runs: dict[str, Any],
) -> None:
    case: Case = runs["cases"]["subclassed_unused_proj.py"]
    proj = set(case.verdicts.layers["proj"])
    assert proj and proj <= case.verdicts.dead, "TensorFlow: proj should get no gradient"
    assert {case.statuses.get(n) for n in proj} == {"unused"}, case.disagreement(proj)
    assert case.returncode == 1
    lines = case.target.read_text().splitlines()
    for name in sorted(proj):
        (finding,) = [f for f in case.findings("GC108") if f["variable"] == name]
        location = finding["location"]
        assert location is not None, f"GC108 for {name} has no location"
        assert (ROOT / location["file"]).resolve() == case.target.resolve(), location
        assert PROJ_LINE in lines[location["line"] - 1], (
            f"GC108 for {name} points at line {location['line']}: {lines[location['line'] - 1]!r}"
        )


@pytest.mark.parametrize("name", ["frozen_backbone.py", "frozen_backbone.keras"])
def test_c_frozen_backbone_is_clean(runs: dict[str, Any], name: str) -> None:
    case: Case = runs["cases"][name]
    backbone = {n for n in case.verdicts.full if "backbone" in n}
    assert backbone and backbone == case.verdicts.frozen, "TensorFlow: the backbone is frozen"
    assert not case.verdicts.dead
    assert {case.statuses.get(n) for n in backbone} == {"frozen"}, case.disagreement(backbone)
    assert case.returncode == 0, case.stderr[-3000:]


@pytest.mark.parametrize(
    ("name", "pooler"),
    [
        ("hand_pooler_l2.keras", fixture_models.POOLER),
        ("bert_pooler_regularized.py", "pooled_dense"),
    ],
)
def test_d_regularized_pooler_kernel_is_ok_with_gc206_and_its_bias_dead(
    runs: dict[str, Any], name: str, pooler: str
) -> None:
    case: Case = runs["cases"][name]
    (kernel,) = {n for n in _weights_of(case, pooler) if n.endswith("/kernel")}
    (bias,) = {n for n in _weights_of(case, pooler) if n.endswith("/bias")}
    assert case.verdicts.full[kernel] == "gradient", "TensorFlow: the penalty trains the kernel"
    assert case.verdicts.data_only[kernel] in DEAD, "TensorFlow: the data does not"
    assert case.verdicts.full[bias] in DEAD
    assert case.statuses[kernel] == "ok", case.disagreement({kernel})
    assert [f["variable"] for f in case.findings("GC206")] == [kernel]
    assert case.statuses[bias] in DEAD_STATUSES, case.disagreement({bias})
    assert case.returncode == 1


@pytest.mark.parametrize(
    ("name", "pooler"),
    [
        ("hand_pooler.keras", fixture_models.POOLER),
        ("bert_pooler.py", "pooled_dense"),
        ("bert_pooler.keras", "pooled_dense"),
    ],
)
def test_d_unregularized_pooler_is_dead(runs: dict[str, Any], name: str, pooler: str) -> None:
    case: Case = runs["cases"][name]
    weights = _weights_of(case, pooler)
    assert len(weights) == 2 and weights == case.verdicts.dead, "TensorFlow: only the pooler"
    assert weights == case.gradcheck_dead, case.disagreement(weights ^ case.gradcheck_dead)
    assert not case.findings("GC206")
    assert case.returncode == 1


def test_export_archive_trainability_comes_from_the_archive(runs: dict[str, Any]) -> None:
    case: Case = runs["cases"][EXPORT_CASE]
    trunk = _weights_of(case, "ex_trunk")
    assert trunk and trunk == case.verdicts.frozen
    assert {case.statuses.get(n) for n in trunk} == {"frozen"}, case.disagreement(trunk)
    assert case.gradcheck_dead == case.verdicts.dead != set()


# --- Bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("uncompiled without --loss", "--loss"),
        ("lambda layer (safe_mode)", "--unsafe-deserialization"),
        (
            "lambda loss in an .h5",
            "names, '<lambda>', is not a Keras loss gradcheck can resolve: name the loss to "
            "check the model with (--loss mse",
        ),
    ],
)
def test_unanalysable_keras_files_exit_2_with_one_message(
    runs: dict[str, Any], name: str, message: str
) -> None:
    returncode, stdout, stderr = runs["bad"][name]
    assert returncode == 2, f"{name}: exit {returncode}\n{stdout[:2000]}\n{stderr[-2000:]}"
    assert_error_document(stdout, stderr)
    assert "Traceback" not in stderr
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr

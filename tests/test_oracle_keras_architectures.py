"""gradcheck agrees with TensorFlow on real architectures built without downloads.

MobileNetV2 and ResNet50 (`keras.applications`, `weights=None`, 32x32 inputs, 10 classes) under a
sparse categorical cross-entropy loss, ResNet50 with its first two stages frozen and also as a
SavedModel; and a small keras_hub `BertBackbone` trained through an MLM head on `sequence_output`
only, so its pooler is dead. TensorFlow's tape in this process is the judge
(`tf_oracle_inprocess`). The HTML page of ResNet50 and of the backbone is rendered by headless
Chromium (`tests/browser.py`), its map checked in the DOM and a screenshot taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.tf_oracle_inprocess import dead_names, tf_verdicts, variable_name

BATCH = 2
IMAGE_SHAPE = (32, 32, 3)
CLASSES = 10
SEQUENCE_LENGTH = 8
VOCABULARY = 50


@dataclass
class Subject:
    """A loss over a model, TensorFlow's verdicts on it and gradcheck's report."""

    module: Any  # a tf.Module holding the model(s) and `loss`, a tf.function with input_signature
    trainable: list[Any]
    non_trainable: list[Any]
    verdicts: dict[str, str]
    report: Any

    @property
    def gradcheck_dead(self) -> set[str]:
        return {v.name for v in self.report.variables if v.dead}

    @property
    def statuses(self) -> dict[str, str]:
        return {v.name: v.status.value for v in self.report.variables}


def judge(module: Any, trainable: list[Any], non_trainable: list[Any], args: list[Any]) -> Subject:
    from gradcheck_cli.api import check_function

    # The oracle runs first: nothing gradcheck does to the traced graph can then affect it.
    verdicts = tf_verdicts(module.loss, trainable, args)
    report = check_function(module.loss, variables=trainable + non_trainable, model_map=True)
    return Subject(module, trainable, non_trainable, verdicts, report)


def classifier_subject(model: Any) -> Subject:
    import keras
    import tensorflow as tf

    module = tf.Module(name="classifier_loss")
    module.model = model

    @tf.function(
        input_signature=[
            tf.TensorSpec((BATCH, *IMAGE_SHAPE), tf.float32, name="images"),
            tf.TensorSpec((BATCH,), tf.int32, name="labels"),
        ]
    )
    def loss(images: Any, labels: Any) -> Any:
        probabilities = model(images, training=True)
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, probabilities))

    module.loss = loss
    images = tf.random.stateless_normal((BATCH, *IMAGE_SHAPE), seed=[0, 1])
    labels = tf.constant([1, 7], tf.int32)
    return judge(module, model.trainable_variables, model.non_trainable_variables, [images, labels])


@pytest.fixture(scope="module")
def mobilenet_v2() -> Subject:
    import keras

    return classifier_subject(
        keras.applications.MobileNetV2(weights=None, input_shape=IMAGE_SHAPE, classes=CLASSES)
    )


FROZEN_STAGES = ("conv1", "conv2")
"""ResNet50's layers whose names start so are frozen (`trainable = False`), as in fine-tuning."""


@pytest.fixture(scope="module")
def resnet50() -> Subject:
    import keras

    model = keras.applications.ResNet50(weights=None, input_shape=IMAGE_SHAPE, classes=CLASSES)
    for layer in model.layers:
        if layer.name.startswith(FROZEN_STAGES):
            layer.trainable = False
    return classifier_subject(model)


@pytest.fixture(params=["mobilenet_v2", "resnet50"])
def classifier(request: pytest.FixtureRequest) -> Subject:
    subject: Subject = request.getfixturevalue(request.param)
    return subject


@pytest.fixture(scope="module")
def bert_mlm() -> tuple[Subject, Any]:
    """A small BERT whose loss uses only `sequence_output`; returns the subject and the backbone."""
    import keras
    import keras_hub
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=SEQUENCE_LENGTH,
    )
    head = keras.layers.Dense(VOCABULARY, name="mlm_head")
    module = tf.Module(name="bert_mlm_loss")
    module.backbone, module.head = backbone, head
    spec = [
        tf.TensorSpec((BATCH, SEQUENCE_LENGTH), tf.int32, name=name)
        for name in ("token_ids", "segment_ids", "padding_mask")
    ]

    @tf.function(input_signature=spec)
    def loss(token_ids: Any, segment_ids: Any, padding_mask: Any) -> Any:
        outputs = backbone(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            training=True,
        )
        logits = head(outputs["sequence_output"])
        return tf.reduce_mean(
            keras.losses.sparse_categorical_crossentropy(token_ids, logits, from_logits=True)
        )

    module.loss = loss
    token_ids = tf.random.stateless_uniform(
        (BATCH, SEQUENCE_LENGTH), seed=[0, 2], minval=0, maxval=VOCABULARY, dtype=tf.int32
    )
    segment_ids = tf.zeros((BATCH, SEQUENCE_LENGTH), tf.int32)
    padding_mask = tf.ones((BATCH, SEQUENCE_LENGTH), tf.int32)
    loss(token_ids, segment_ids, padding_mask)  # builds the head
    subject = judge(
        module,
        backbone.trainable_variables + head.trainable_variables,
        backbone.non_trainable_variables + head.non_trainable_variables,
        [token_ids, segment_ids, padding_mask],
    )
    return subject, backbone


def assert_agrees(subject: Subject, report: Any = None) -> None:
    report = subject.report if report is None else report
    reported = {v.name: v.status.value for v in report.variables}
    gradcheck_dead = {v.name for v in report.variables if v.dead}
    tf_dead = dead_names(subject.verdicts)
    missing = {variable_name(v) for v in subject.trainable} - reported.keys()
    assert not missing, f"trainable variables missing from gradcheck's report: {sorted(missing)}"
    assert gradcheck_dead == tf_dead, (
        f"gradcheck only: {sorted((n, reported[n]) for n in gradcheck_dead - tf_dead)}\n"
        f"TensorFlow only: {sorted((n, subject.verdicts[n]) for n in tf_dead - gradcheck_dead)}"
    )


def test_classifier_dead_sets_agree(classifier: Subject) -> None:
    assert_agrees(classifier)


def test_classifier_trains_every_trainable_variable(classifier: Subject) -> None:
    assert classifier.trainable
    assert dead_names(classifier.verdicts) == set()
    assert classifier.gradcheck_dead == set()


def test_classifier_batchnorm_statistics_are_frozen(classifier: Subject) -> None:
    moving = {
        variable_name(v)
        for v in classifier.non_trainable
        if variable_name(v).endswith(("/moving_mean", "/moving_variance"))
    }
    assert moving, "expected BatchNormalization moving statistics"
    statuses = classifier.statuses
    not_frozen = {
        name: statuses.get(name)
        for name in map(variable_name, classifier.non_trainable)
        if statuses.get(name) != "frozen"
    }
    assert not not_frozen, f"non-trainable variables not reported frozen: {not_frozen}"
    assert not moving & classifier.gradcheck_dead


@pytest.fixture(scope="module")
def resnet50_savedmodel(resnet50: Subject, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tensorflow as tf

    directory = tmp_path_factory.mktemp("resnet50") / "savedmodel"
    tf.saved_model.save(resnet50.module, str(directory))
    return directory


def test_resnet50_savedmodel_agrees(resnet50: Subject, resnet50_savedmodel: Path) -> None:
    import tensorflow as tf

    from gradcheck_cli.api import check

    report = check(resnet50_savedmodel, loss="loss")
    assert_agrees(resnet50, report)
    statuses = {v.name: v.status.value for v in report.variables}
    # Frozen is what the file records. Keras freezes a layer without touching its tf.Variable,
    # so the SavedModel holds the frozen stages' variables as trainable: loaded, they train.
    loaded = tf.saved_model.load(str(resnet50_savedmodel))
    variables = loaded.loss.get_concrete_function().variables
    recorded = {variable_name(v) for v in variables if not v.trainable}
    moving = {n for n in map(variable_name, resnet50.non_trainable) if "/moving_" in n}
    assert moving and moving <= recorded
    assert {name for name, status in statuses.items() if status == "frozen"} == recorded
    stages = {n for n in map(variable_name, resnet50.non_trainable) if "/moving_" not in n}
    assert stages and all(statuses[name] == "ok" for name in stages)


def _page(report: Any, folder: Path, name: str) -> Path:
    from gradcheck_cli.reporters import Format, render

    page = folder / f"{name}.html"
    page.write_text(render(report, Format.HTML), encoding="utf-8")
    return page


def _map_nodes(shown: Any) -> dict[str, str]:
    """The rendered map's nodes: scope label -> status."""
    nodes = shown.page.locator(".map-node").all()
    return {node.get_attribute("data-scope"): node.get_attribute("data-status") for node in nodes}


@pytest.mark.heavy
def test_resnet50_with_a_frozen_part_renders_its_map_in_a_browser(
    resnet50: Subject, tmp_path: Path
) -> None:
    from tests.browser import assert_clean, nothing_clipped, rendered, screenshot

    with rendered(_page(resnet50.report, tmp_path, "resnet50")) as shown:
        assert_clean(shown)
        nodes = _map_nodes(shown)
        assert 20 <= len(nodes) <= 60, nodes  # its layers, its repeated blocks folded
        layers = {label.partition("/")[2]: status for label, status in nodes.items()}
        assert layers["conv1_conv_1"] == "frozen" and layers["conv2_block2…3"] == "frozen"
        assert layers["conv3_block1_0_conv_1"] == "ok" and layers["conv4_block2…6"] == "ok"
        assert shown.page.locator(".map-edge").count() >= len(nodes) - 3  # one flow, not a row
        assert shown.page.locator(".map-node.status-blocked, .map-node.status-unused").count() == 0
        nothing_clipped(shown)
        screenshot(shown, tmp_path / "resnet50.png")


def test_bert_mlm_pooler_is_exactly_the_dead_set(bert_mlm: tuple[Subject, Any]) -> None:
    subject, backbone = bert_mlm
    pooler = {variable_name(v) for v in backbone.get_layer("pooled_dense").trainable_variables}
    assert pooler
    assert dead_names(subject.verdicts) == pooler, "TensorFlow: only the pooler should be dead"
    assert_agrees(subject)


def test_bert_mlm_non_trainable_variables_are_frozen(bert_mlm: tuple[Subject, Any]) -> None:
    subject, _ = bert_mlm
    statuses = subject.statuses
    not_frozen = {
        name: statuses.get(name)
        for name in map(variable_name, subject.non_trainable)
        if statuses.get(name) != "frozen"
    }
    assert not not_frozen, f"non-trainable variables not reported frozen: {not_frozen}"


@pytest.mark.heavy
def test_a_keras_hub_backbone_s_dead_pooler_is_marked_on_its_map_in_a_browser(
    bert_mlm: tuple[Subject, Any], tmp_path: Path
) -> None:
    from tests.browser import assert_clean, nothing_clipped, rendered, screenshot

    subject, backbone = bert_mlm
    pooler = {variable_name(v) for v in backbone.get_layer("pooled_dense").trainable_variables}
    with rendered(_page(subject.report, tmp_path, "bert")) as shown:
        assert_clean(shown)
        nodes = shown.page.locator(".map-node.status-unused, .map-node.status-blocked").all()
        assert len(nodes) == 1, _map_nodes(shown)
        title = nodes[0].locator("title").text_content() or ""
        assert all(f"{name}: " in title for name in pooler), title
        assert shown.page.locator(".map-node.status-ok").count() >= 3  # embeddings, layers, head
        for name in pooler:
            assert shown.page.locator(f'.variable[data-variable="{name}"]').count()
        nothing_clipped(shown)
        screenshot(shown, tmp_path / "bert.png")

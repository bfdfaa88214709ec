"""A Keras model with its own train_step is checked through what that train_step differentiates."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np

from gradcheck_cli.cli import command
from tests.cli_runs import invoke
from tests.tf_oracle_inprocess import dead_names, tf_verdicts

SCRIPT = Path(__file__).parent / "scripts" / "custom_train_step.py"


def test_custom_train_step_agrees_with_tensorflow() -> None:
    code, out, _ = invoke(command, [str(SCRIPT), "--loss", "model", "--format", "json"])
    report = json.loads(out)
    namespace = runpy.run_path(str(SCRIPT), run_name="oracle")
    model = namespace["model"]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 4)).astype("float32")
    y = rng.normal(size=(4, 4)).astype("float32")
    verdicts = tf_verdicts(
        lambda: namespace["step_loss"](model, x, y), [w for w in model.weights if w.trainable]
    )
    dead = {v["name"] for v in report["variables"] if v["status"] in ("blocked", "unused")}
    assert dead == dead_names(verdicts)
    assert code == (1 if dead_names(verdicts) else 0)


GAN = Path(__file__).parent / "scripts" / "gan_train_step.py"


def test_gan_train_step_judges_each_network_by_its_own_tape() -> None:
    """No compiled loss: each tape's loss against the variables that tape differentiates."""
    code, out, err = invoke(command, [str(GAN), "--loss", "gan", "--format", "json", "--verify"])
    namespace = runpy.run_path(str(GAN), run_name="oracle")
    gan = namespace["gan"]
    import tensorflow as tf

    real = tf.random.normal((4, 4), seed=0)
    noise = tf.random.normal((4, namespace["LATENT"]), seed=1)
    verdicts = {}
    for loss, network in (
        (namespace["discriminator_loss"], gan.discriminator),
        (namespace["generator_loss"], gan.generator),
    ):
        verdicts.update(
            tf_verdicts(lambda loss=loss: loss(gan, real, noise), network.trainable_weights)
        )
    report = json.loads(out)
    statuses = {v["name"]: v["status"] for v in report["variables"]}
    assert set(statuses) == set(verdicts), err
    dead = {name for name, status in statuses.items() if status in ("blocked", "unused")}
    assert dead == dead_names(verdicts) == {w.path for w in gan.generator.trainable_weights}
    assert code == 1
    codes = {finding["code"] for finding in report["findings"]}
    assert "GC003" in codes and "GC002" not in codes  # TensorFlow agrees, tape by tape

"""SavedModel loading from protos alone, judged by TensorFlow's own gradients."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from gradcheck_cli import GradcheckError, check
from gradcheck_cli.analysis.verdicts import Status

sys.path.insert(0, str(Path(__file__).parent))
from zoo import Zoo, verdict_inputs  # noqa: E402

from tests.tf_oracle_inprocess import dead_names, tf_verdicts  # noqa: E402


@pytest.fixture(scope="module")
def zoo_saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    import tensorflow as tf

    zoo = Zoo()
    verdicts = tf_verdicts(zoo.loss, [v for v in zoo.variables if v.trainable], verdict_inputs())
    path = tmp_path_factory.mktemp("zoo") / "saved"
    tf.saved_model.save(zoo, str(path), options=tf.saved_model.SaveOptions(save_debug_info=True))
    return path, verdicts


def _dead(report) -> set[str]:  # type: ignore[no-untyped-def]
    return {v.name for v in report.variables if v.dead}


def test_verdicts_agree_with_tensorflow(zoo_saved: tuple[Path, dict[str, str]]) -> None:
    path, verdicts = zoo_saved
    report = check(path, "loss")
    assert _dead(report) == dead_names(verdicts)
    trainable = {v.name for v in report.variables if v.status is not Status.FROZEN}
    assert trainable == set(verdicts)
    assert {v.name for v in report.variables if v.status is Status.FROZEN} == {"w_frozen"}


def test_analysis_does_not_start_tensorflow(zoo_saved: tuple[Path, dict[str, str]]) -> None:
    import subprocess

    path, _ = zoo_saved
    probe = (
        "import sys; from gradcheck_cli import check; check(sys.argv[1], 'loss'); "
        "print('tensorflow.python' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_same_verdicts_without_variables_folder(
    zoo_saved: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, _ = zoo_saved
    stripped = tmp_path / "stripped"
    shutil.copytree(path, stripped)
    shutil.rmtree(stripped / "variables")
    full = check(path, "loss")
    assert [(v.name, v.status) for v in check(stripped, "loss").variables] == [
        (v.name, v.status) for v in full.variables
    ]


def test_cuts_point_at_the_lines_that_made_them(zoo_saved: tuple[Path, dict[str, str]]) -> None:
    path, _ = zoo_saved
    report = check(path, "loss")
    source = (Path(__file__).parent / "zoo.py").read_text().splitlines()
    stopped = next(v for v in report.variables if v.name == "w_stop")
    (blocker,) = stopped.blockers
    assert blocker.op_type == "StopGradient"
    assert blocker.location is not None and blocker.location.file.endswith("zoo.py")
    assert "tf.stop_gradient(self.w_stop)" in source[blocker.location.line - 1]


def test_signature_and_output_key(zoo_saved: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    import tensorflow as tf

    class Heads(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = tf.Variable(1.0, name="a")
            self.b = tf.Variable(1.0, name="b")

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def heads(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"main": x * self.a, "aux": tf.stop_gradient(self.b) * x}

    module = Heads()
    path = tmp_path / "heads"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.heads})
    by_key = {
        key: tf_verdicts(lambda key=key: module.heads(tf.constant(2.0))[key], [module.a, module.b])
        for key in ("main", "aux")
    }
    for key, verdicts in by_key.items():
        report = check(path, f"serving_default:{key}")
        assert _dead(report) == dead_names(verdicts)
    with pytest.raises(GradcheckError, match="candidate"):
        check(path, None)


def test_unknown_loss_suggests_the_closest(zoo_saved: tuple[Path, dict[str, str]]) -> None:
    path, _ = zoo_saved
    with pytest.raises(GradcheckError, match="did you mean 'loss'"):
        check(path, "los")


def test_not_a_saved_model(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x00not a proto\xff" * 10)
    with pytest.raises(GradcheckError, match="not a readable SavedModel"):
        check(tmp_path, "loss")
    with pytest.raises(GradcheckError, match="no such file"):
        check(tmp_path / "missing", "loss")


def test_tf1_saved_model(tmp_path: Path) -> None:
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    path = tmp_path / "tf1"
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        used = v1.get_variable("used", [3])
        cut = v1.get_variable("cut", [3])
        idle = v1.get_variable("idle", [3])
        hidden = tf.cast(tf.cast(cut * 100.0, tf.int32), tf.float32)
        loss = tf.reduce_sum(x * used + hidden, name="loss")
        del idle
        variables = v1.trainable_variables()
        gradients = v1.gradients(loss, variables)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            values = session.run(
                [g for g in gradients if g is not None], feed_dict={x: np.ones(3, np.float32)}
            )
            builder = v1.saved_model.Builder(str(path))
            signature = v1.saved_model.predict_signature_def({"x": x}, {"loss": loss})
            builder.add_meta_graph_and_variables(session, ["serve"], {"train": signature})
            builder.save()
    values_iter = iter(values)
    tf_dead = {
        v.op.name
        for v, g in zip(variables, gradients)
        if g is None or not np.any(next(values_iter))
    }
    for name in ("train", "train:loss", "loss"):
        report = check(path, name)
        assert _dead(report) == tf_dead
    # Without --loss, the only loss-like output is chosen.
    assert _dead(check(path, None)) == tf_dead


def test_verify_asks_tensorflow_in_its_own_process(
    zoo_saved: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    path, _ = zoo_saved
    verification = check(path, "loss", verify=True).verification
    assert verification is not None and verification.agrees, verification
    stripped = tmp_path / "stripped"
    shutil.copytree(path, stripped)
    shutil.rmtree(stripped / "variables")
    report = check(stripped, "loss", verify=True)
    assert report.verification is not None and report.verification.error
    assert "GC004" in {f.code for f in report.findings}


def test_tf1_plain_loss_name_resolves_to_one_output(tmp_path: Path) -> None:
    """`--loss loss` names the signature output `loss` when no node is called "loss", and a
    scoped tensor by its last part; a name that several outputs or tensors carry is refused
    with all of them on one line."""
    import numpy as np
    import tensorflow as tf

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [3], name="x")
        used = v1.get_variable("used", [3])
        cut = v1.get_variable("cut", [3])
        loss = tf.reduce_mean(x * used + tf.stop_gradient(cut))  # the node is "Mean"
        other = tf.reduce_sum(x * cut)
        with tf.name_scope("train"):
            tf.add(loss, 0.0, name="total")
        with tf.name_scope("eval"):
            tf.identity(other, name="twice")
        with tf.name_scope("test"):
            tf.identity(other, name="twice")
        gradients = v1.gradients(loss, [used, cut])
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            values = session.run(
                [g for g in gradients if g is not None], feed_dict={x: np.ones(3, np.float32)}
            )
            signatures = {
                "one": {"train": {"loss": loss}, "eval": {"loss": loss, "other": other}},
                "two": {"train": {"loss": loss}, "aux": {"loss": other}},
            }
            for name, outputs in signatures.items():
                builder = v1.saved_model.Builder(str(tmp_path / name))
                builder.add_meta_graph_and_variables(
                    session,
                    ["serve"],
                    {
                        key: v1.saved_model.predict_signature_def({"x": x}, heads)
                        for key, heads in outputs.items()
                    },
                )
                builder.save()
    values_iter = iter(values)
    tf_dead = {
        v.op.name
        for v, g in zip([used, cut], gradients)
        if g is None or not np.any(next(values_iter))
    }
    assert tf_dead == {"cut"}
    report = check(tmp_path / "one", "loss")
    assert report.source.loss == "eval:loss"
    assert _dead(report) == tf_dead
    assert _dead(check(tmp_path / "one", "total")) == tf_dead
    with pytest.raises(GradcheckError, match=r"'loss' names 2 outputs.*'aux:loss', 'train:loss'"):
        check(tmp_path / "two", "loss")
    with pytest.raises(GradcheckError, match=r"'twice' names 2 tensors.*'eval/twice', 'test/tw"):
        check(tmp_path / "one", "twice")

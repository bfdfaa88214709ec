"""Time and peak memory of gradcheck on a ResNet50 SavedModel, next to `import tensorflow` and
TensorFlow's own route (load the SavedModel, then tf.gradients), measured in the same run.

    python benchmarks/resnet50.py [--repeat 3] [--model-dir DIR]

Each measure runs in a fresh process; the table shows the median wall time and the peak RSS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WRITE_MODEL = """
import sys
import keras
import tensorflow as tf

model = keras.applications.ResNet50(weights=None)

class Loss(tf.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.all_variables = list(model.variables)

    @tf.function(input_signature=[tf.TensorSpec([2, 224, 224, 3]), tf.TensorSpec([2], tf.int64)])
    def loss(self, images, labels):
        logits = self.model(images, training=True)
        return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, logits))

options = tf.saved_model.SaveOptions(save_debug_info=True)
tf.saved_model.save(Loss(model), sys.argv[1], options=options)
"""

_TENSORFLOW_ROUTE = """
import sys
import tensorflow as tf
from tensorflow.python.checkpoint import graph_view, util

loaded = tf.saved_model.load(sys.argv[1])
concrete = loaded.loss.concrete_functions[0]
graph = concrete.graph
internal = {id(external): placeholder for external, placeholder in graph.captures}
variables = [o for o in util.list_objects(graph_view.ObjectGraphView(loaded))
             if isinstance(o, tf.Variable) and o.trainable]
captured = [internal[id(v.handle)] for v in variables if id(v.handle) in internal]
with graph.as_default():
    gradients = tf.gradients(graph.outputs[0], captured)
print(sum(g is None for g in gradients), "of", len(gradients), "without gradient")
"""


def measure(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one fresh process."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0")
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{command} failed with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model-dir", type=Path)
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory(prefix="gradcheck-bench-")
    model_dir = args.model_dir or Path(scratch.name) / "resnet50"
    if not (model_dir / "saved_model.pb").is_file():
        print(f"writing the ResNet50 SavedModel to {model_dir} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-c", _WRITE_MODEL, str(model_dir)],
            check=True,
            stderr=subprocess.DEVNULL,
        )
    routes = {
        "python -c 'import tensorflow'": [sys.executable, "-c", "import tensorflow"],
        "gradcheck (SavedModel, json)": [
            sys.executable,
            "-m",
            "gradcheck_cli",
            str(model_dir),
            "--loss",
            "loss",
            "--format",
            "json",
        ],
        "TensorFlow: load + tf.gradients": [
            sys.executable,
            "-c",
            _TENSORFLOW_ROUTE,
            str(model_dir),
        ],
    }
    results = {}
    for name, command in routes.items():
        runs = [measure(command) for _ in range(args.repeat)]
        results[name] = (statistics.median(r[0] for r in runs), max(r[1] for r in runs))
    baseline_time, baseline_memory = results["python -c 'import tensorflow'"]
    print(f"{'route':36} {'time (s)':>9} {'x import':>9} {'peak RSS (MiB)':>15} {'x import':>9}")
    for name, (seconds, memory) in results.items():
        print(
            f"{name:36} {seconds:9.3f} {seconds / baseline_time:9.2f} {memory:15.0f} "
            f"{memory / baseline_memory:9.2f}"
        )


if __name__ == "__main__":
    main()

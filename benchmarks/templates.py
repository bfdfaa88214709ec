"""The two template SavedModels of `benchmarks.synthetic`, written by TensorFlow:
`python -m benchmarks.templates STRAIGHT_DIR LOOP_DIR`.

Four variables: `alive` trains; `stopped` reaches the loss only through a `tf.stop_gradient`,
`casted` only through a cast to int32; `unused` is never read. The loss is straight-line code in
one, inside a `tf.while_loop` body in the other.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def save_templates(straight: Path, loop: Path) -> None:
    """Write both templates (imports TensorFlow)."""
    import tensorflow as tf

    # In both templates the generated ops go before the Identity `splice` (the generator rewires
    # its input to their end) and use the Identities `alive_value` and `x_value`: each AddV2 of
    # the chain adds `alive` again, so its gradient stays far from float32's underflow at any
    # depth.
    class Variables(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.alive = tf.Variable(0.5, name="alive")
            self.stopped = tf.Variable(0.25, name="stopped")
            self.casted = tf.Variable(1.5, name="casted")
            self.unused = tf.Variable(2.0, name="unused")

    class Straight(Variables):
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def loss(self, x: Any) -> Any:
            a = tf.identity(self.alive, name="alive_value")
            x = tf.identity(x, name="x_value")
            h = tf.identity(a * x, name="splice")
            dead = tf.stop_gradient(self.stopped) + tf.cast(
                tf.cast(self.casted, tf.int32), tf.float32
            )
            return h + dead

    class Loop(Variables):
        @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
        def loss(self, x: Any) -> Any:
            alive = self.alive * 1.0

            def body(i: Any, h: Any, s: Any, c: Any) -> tuple[Any, ...]:
                a = tf.identity(alive, name="alive_value")
                h = tf.identity(h * tf.identity(x, name="x_value"), name="splice")
                h = h + a * 0.0 + tf.stop_gradient(s) + tf.cast(tf.cast(c, tf.int32), tf.float32)
                return i + 1, h, s, c

            start = (tf.constant(0), alive, self.stopped * 1.0, self.casted * 1.0)
            _, h, _, _ = tf.while_loop(lambda i, h, s, c: i < 3, body, start)
            return h

    tf.saved_model.save(Straight(), str(straight))
    tf.saved_model.save(Loop(), str(loop))


if __name__ == "__main__":
    save_templates(Path(sys.argv[1]), Path(sys.argv[2]))

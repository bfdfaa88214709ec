"""A TF2 script that prints on import: gradcheck's JSON must stay clean."""

import sys
import time

import tensorflow as tf

print("the user's script prints this")
print("and this to stderr", file=sys.stderr)

w = tf.Variable([1.0, 2.0], name="w")
cut = tf.Variable([1.0, 2.0], name="cut")
idle = tf.Variable([1.0], name="idle")


@tf.function
def loss():
    print("traced")
    time.sleep(0.3)  # a trace long enough that a terminal's status line shows "tracing loss..."
    return tf.reduce_sum(w * tf.cast(tf.argmax(cut), tf.float32))

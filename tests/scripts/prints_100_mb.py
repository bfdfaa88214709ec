"""Prints a line, waits for the test to have seen it, prints 100 MB, then defines a fine loss.

The test creates the file named in GRADCHECK_TEST_GO once the first line reached it.
"""

import os
import sys
import time
from pathlib import Path

import tensorflow as tf

print("the first line", flush=True)
go = Path(os.environ["GRADCHECK_TEST_GO"])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
megabyte = ("x" * 99 + "\n") * 10_000
for _ in range(100):
    sys.stdout.write(megabyte)

w = tf.Variable(2.0, name="w")


def loss():
    return w * w

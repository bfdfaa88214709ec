"""Shared test set-up: quiet TensorFlow before anything imports it."""

from __future__ import annotations

import os

# Must run before the first `import tensorflow`: C++ log noise off, and oneDNN's reordered
# float arithmetic off so gradients that are exactly zero stay exactly zero.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"


def pytest_addoption(parser):  # type: ignore[no-untyped-def]
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden report files from the current output instead of comparing",
    )

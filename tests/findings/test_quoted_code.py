"""A line of code as a sentence quotes it: its comment dropped by the tokenizer, its padding
collapsed, its strings as written."""

from __future__ import annotations

import pytest

from gradcheck_cli.findings.source import quoted_code


@pytest.mark.parametrize(
    ("line", "quoted"),
    [
        ("    x   = model(images)   # forward", "x = model(images)"),
        ("y = tf.matmul(x, kernel)    # scale", "y = tf.matmul(x, kernel)"),
        ('s = "a  # b"  # c', 's = "a  # b"'),  # a `#` inside a string is no comment
        ("w = x[:, :1] * 0.0   +  1.0", "w = x[:, :1] * 0.0 + 1.0"),
        ("out = f(a,   # the first", "out = f(a,"),  # a statement that goes on below
        ('doc = """two  spaces  # kept', 'doc = """two  spaces  # kept'),  # inside a string
        ("pred = model(x)", "pred = model(x)"),
    ],
)
def test_a_line_is_quoted_as_its_statement(line: str, quoted: str) -> None:
    assert quoted_code(line) == quoted

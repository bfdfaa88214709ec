"""The name a creation line binds a variable or layer to: given only when it is certainly that
one's, the call picked by its column where Python gives one."""

from __future__ import annotations

import ast

import pytest

from gradcheck_cli.source_code.bound_names import bound_name, simple_statements_by_line


def _name(code: str, line: int, call: str | None, occurrence: int = 0) -> str | None:
    """The name bound at `line` of `code` to the call that starts with the text `call` (its
    `occurrence`-th on the line, its column counted in UTF-8 bytes as Python counts it), or,
    for `call` None, with no column known."""
    text = code.splitlines()[line - 1]
    column = None
    if call is not None:
        start = -1
        for _ in range(occurrence + 1):
            start = text.index(call, start + 1)
        column = len(text[:start].encode("utf-8"))
    statements = simple_statements_by_line(ast.parse(code)).get(line, [])
    return bound_name(statements, line, column)


TWO = "w = tf.Variable(1.0); d = tf.Variable(2.0)\n"


def test_two_creations_on_one_line_are_told_apart_by_their_column_only() -> None:
    assert _name(TWO, 1, "tf.Variable", 0) == "w"
    assert _name(TWO, 1, "tf.Variable", 1) == "d"
    assert _name(TWO, 1, None) is None  # no column: the line's name is nobody's for sure


def test_columns_count_bytes_as_python_does() -> None:
    code = "é = 1; e = tf.Variable(3.0)\n"
    assert _name(code, 1, "tf.Variable") == "e"
    assert _name(code, 1, None) is None


@pytest.mark.parametrize(
    ("code", "call", "expected"),
    [
        ("w = tf.Variable(tf.random.normal([3]))\n", "tf.Variable", "w"),
        ("self.kernel = tf.Variable(1.0)\n", "tf.Variable", "self.kernel"),
        ("w: tf.Variable = tf.Variable(1.0)\n", "tf.Variable(", "w"),
        ("proj = layers.Dense(4)\n", "layers.Dense", "proj"),
        # Not the created object's name: a layer's output, a tuple, a list, two names, an item.
        ("x = layers.Dense(4)(inputs)\n", "layers.Dense", None),
        ("w, d = tf.Variable(1.0), tf.Variable(2.0)\n", "tf.Variable", None),
        ("ws = [tf.Variable(1.0) for _ in range(2)]\n", "tf.Variable", None),
        ("w = d = tf.Variable(1.0)\n", "tf.Variable", None),
        ("table[0] = tf.Variable(1.0)\n", "tf.Variable", None),
        ("w = scale * tf.Variable(1.0)\n", "tf.Variable", None),
        ("model = keras.Sequential([layers.Dense(4)])\n", "layers.Dense", None),
        ("return tf.Variable(1.0)\n", "tf.Variable", None),
    ],
)
def test_a_name_is_given_only_when_the_statement_binds_the_created_call_itself(
    code: str, call: str, expected: str | None
) -> None:
    code = code if not code.startswith("return") else "def f():\n    " + code
    line = code.count("\n")
    assert _name(code, line, call) == expected
    # Without a column, a lone statement still names what it creates, and only then.
    if expected is not None:
        assert _name(code, line, None) == expected


def test_a_call_over_several_lines_is_named_from_its_first() -> None:
    code = "def build(self):\n    self.kernel = tf.Variable(\n        tf.ones([2]))\n"
    assert _name(code, 2, "tf.Variable") == "self.kernel"
    assert _name(code, 2, None) == "self.kernel"
    assert _name(code, 1, None) is None  # a def is no simple statement

"""Lines of code folded at a terminal's width: between tokens, never inside a name, and a folded
statement still means what it meant (Python's own parser and tokenizer are the judges)."""

from __future__ import annotations

import ast
import io
import tokenize

import pytest
from rich.cells import cell_len

from gradcheck_cli.reporters.folding import HANGING_INDENT, fold_code

# Lines users have: the seed's long lines (as posted), fixes gradcheck writes, a comprehension,
# a call in an expression, strings with spaces and brackets inside.
STATEMENTS = (
    "weights_i = tf.Variable(tf.truncated_normal([layer_size1, layer_size2],stddev=1.0 / "
    "math.sqrt(float(layer_size1))),name='weights_i')",
    "weights = weights_i + tf.stop_gradient(tf.multiply((1.0/268435456.0),weights_fl) - weights_i)",
    "self.output_kernel + tf.stop_gradient(quantize(self.output_kernel) - self.output_kernel)",
    'teacher = keras.Sequential([keras.layers.Dense(2) for _ in range(52)], name="teacher")',
    "codebook_loss = tf.reduce_mean((tf.stop_gradient(z) - nearest) ** 2) + "
    "tf.reduce_mean((z - tf.stop_gradient(nearest)) ** 2)",
    'message = f"{name} (a, b) [c]" + " ".join(str(value) for value in values if value > 0)',
    "total = first_long_variable_name + second_long_variable_name * third_long_variable_name",
)
# Widths at which every line can fit (no single name or string is wider than the room).
WIDTHS = (40, 57, 68, 78)


def _tokens(source: str) -> list[tuple[int, str]]:
    """What Python reads in `source`, line structure left out."""
    layout = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    return [
        (token.type, token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type not in layout
    ]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("statement", STATEMENTS)
def test_a_folded_statement_pastes_as_the_same_code(statement: str, width: int) -> None:
    for indent in ("", "    ", "      "):
        lines = fold_code(indent + statement, width)
        assert lines[0].startswith(indent + statement[:3])
        pasted = "\n".join([lines[0].lstrip(), *lines[1:]])
        # Same tokens: no name, number or string is split, and nothing is added but a fold.
        assert _tokens(pasted) == _tokens(statement), lines
        assert ast.dump(ast.parse(pasted)) == ast.dump(ast.parse(statement))
        assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("statement", STATEMENTS)
def test_every_line_fits_where_the_tokens_allow_it(statement: str) -> None:
    for width in (40, 57, 68):
        lines = fold_code("    " + statement, width)
        assert all(cell_len(line) <= width for line in lines), lines
        assert all(line.startswith("    " + HANGING_INDENT) for line in lines[1:])


def test_a_line_that_fits_is_left_alone() -> None:
    assert fold_code("    x = f(a, b)   ", 80) == ["    x = f(a, b)"]


def test_folds_go_inside_brackets_before_they_need_a_backslash() -> None:
    lines = fold_code("result = compute(first_argument, second_argument)", 40)
    assert lines == ["result = compute(first_argument,", "    second_argument)"]
    # No bracket to fold in: Python's explicit line joining, which still pastes.
    lines = fold_code("total = first_long_name + second_long_name + third_long_name", 40)
    assert lines[0].endswith(" \\") and len(lines) > 1
    assert ast.dump(ast.parse("\n".join(lines))) == ast.dump(
        ast.parse("total = first_long_name + second_long_name + third_long_name")
    )


def test_the_outermost_comma_and_the_space_before_an_operator_are_preferred() -> None:
    assert fold_code(
        "    return tf.round(tf.clip_by_value(weights, -1.0, 1.0) * levels) / levels", 68
    ) == [
        "    return tf.round(tf.clip_by_value(weights, -1.0, 1.0)",
        "        * levels) / levels",
    ]
    assert fold_code(
        "    [keras.Input((4,)), layers.Dense(5, name='d_0'), layers.Dense(1, name='s')]", 60
    ) == [
        "    [keras.Input((4,)), layers.Dense(5, name='d_0'),",
        "        layers.Dense(1, name='s')]",
    ]


def test_a_comment_folds_at_its_spaces_and_stays_a_comment() -> None:
    code = "    y = f(x)  # gradcheck: ignore[GC101] kept: the teacher is trained elsewhere"
    lines = fold_code(code, 44)
    assert lines[0].startswith("    y = f(x)  # gradcheck: ignore[GC101]") and len(lines) > 1
    assert all(line.startswith("        # ") for line in lines[1:])
    assert all(cell_len(line) <= 44 for line in lines)
    words = " ".join(line.strip().removeprefix("# ") for line in lines[1:])
    assert lines[0].strip() + " " + words == code.strip()


def test_text_that_is_not_python_folds_at_its_spaces() -> None:
    line = "    '''the docstring of a loss that goes on for quite a long way, longer than the width"
    lines = fold_code(line, 40)
    assert " ".join(part.strip() for part in lines) == line.strip()
    assert all(cell_len(part) <= 40 for part in lines)


def test_a_name_wider_than_the_width_overflows_whole() -> None:
    name = "a_variable_name_far_longer_than_any_terminal_is_wide_" * 2
    assert fold_code(f"x = {name} + 1", 40) == ["x = \\", f"    {name} \\", "    + 1"]
    # A string that just misses the width with its ` \\`: still whole, still Python.
    code = 'message = "a string of exactly the room it has" + suffix'
    lines = fold_code(code, 40)
    assert ast.dump(ast.parse("\n".join(lines))) == ast.dump(ast.parse(code))
    assert all(line == line.rstrip() for line in lines)

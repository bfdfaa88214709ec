"""The user's source lines, read once per file, so findings can quote the code they point at."""

from __future__ import annotations

import ast
import io
import linecache
import os
import re
import tokenize
from collections.abc import Mapping, Sequence
from pathlib import Path

from gradcheck_cli.errors import GradcheckError
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.source_code.bound_names import bound_name, simple_statements_by_line
from gradcheck_cli.source_code.files import PYTHON_SUFFIXES, bounded_text, in_system_folder
from gradcheck_cli.source_code.ignore_comments import IgnoreComment, ignore_comments
from gradcheck_cli.source_code.notebook import notebook_cell, read_notebook
from gradcheck_cli.source_code.op_expressions import called_name, parsed


class SourceLines:
    """The user's lines, by file. `roots`: when given, a file is quoted only if it is a regular
    Python file (or notebook) of bounded size under one of these folders, with no dot-folder on
    the way (`.git`): a crafted SavedModel's debug info names the files it likes
    (`/proc/self/environ`, `.git/config`), and the report must not print them. `texts`: files
    (by path) whose text is read from here instead (a fix checked before it is written)."""

    def __init__(
        self, roots: Sequence[Path] | None = None, texts: Mapping[str, str] | None = None
    ) -> None:
        self._roots = None if roots is None else [Path(os.path.realpath(r)) for r in roots]
        self._texts = {os.path.realpath(path): text for path, text in (texts or {}).items()}
        self._files: dict[str, list[str] | None] = {}
        self._notebooks: dict[str, dict[int, str]] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._statements: dict[str, dict[int, list[ast.stmt]]] = {}

    def tree(self, file: str) -> ast.Module | None:
        """The parsed file (or notebook cell); None when it cannot be read or parsed."""
        if file not in self._trees:
            if file not in self._files:
                self._files[file] = self._read(file)
            lines = self._files[file]
            self._trees[file] = None if lines is None else parsed("\n".join(lines))
        return self._trees[file]

    def statements_at(self, file: str, line: int) -> list[ast.stmt]:
        """The simple statements of `file` (or notebook cell) that span `line`, in order."""
        if file not in self._statements:
            tree = self.tree(file)
            self._statements[file] = {} if tree is None else simple_statements_by_line(tree)
        return self._statements[file].get(line, [])

    def segment(self, file: str, node: ast.AST) -> str | None:
        """The source text of `node` in `file`, as written."""
        lines = self._files.get(file)
        return None if lines is None else ast.get_source_segment("\n".join(lines), node)

    def line(self, location: SourceLocation | None) -> str | None:
        """The code at `location`, without its line break; None when the file is not readable.

        A notebook cell's location (`train.ipynb#cell3`) counts lines from the top of that cell.
        """
        if location is None:
            return None
        if location.file not in self._files:
            self._files[location.file] = self._read(location.file)
        lines = self._files[location.file]
        if lines is None or not 0 < location.line <= len(lines):
            return None
        return lines[location.line - 1]

    def ignore_comments(self, file: str) -> list[IgnoreComment]:
        """The `# gradcheck: ignore` comments of `file` (or notebook cell), if it is quotable."""
        if file not in self._files:
            self._files[file] = self._read(file)
        lines = self._files[file]
        return [] if lines is None else ignore_comments(file, "\n".join(lines) + "\n")

    def quotable(self, file: str) -> bool:
        """Whether the report may read `file` at all (see the class)."""
        try:
            real = Path(os.path.realpath(file))
        except (OSError, ValueError):
            return False
        if in_system_folder(str(real)):
            return False
        if self._roots is None:
            return True
        if real.suffix not in (*PYTHON_SUFFIXES, ".ipynb"):
            return False
        for root in self._roots:
            try:
                inside = real.relative_to(root)
            except ValueError:
                continue
            if not any(part.startswith(".") for part in inside.parts):
                return True
        return False

    def _read(self, file: str) -> list[str] | None:
        registered = _registered_source(file)
        if registered is not None:
            return registered
        cell = notebook_cell(file)
        if not self.quotable(cell[0] if cell is not None else file):
            return None
        if cell is None:
            text = self._texts.get(os.path.realpath(file))
            text = bounded_text(file) if text is None else text
            return None if text is None else text.splitlines()
        notebook, index = cell
        if notebook not in self._notebooks:
            try:
                cells, _ = read_notebook(Path(notebook))
            except GradcheckError:
                cells = []
            self._notebooks[notebook] = {code.index: code.source for code in cells}
        source = self._notebooks[notebook].get(index)
        return None if source is None else source.splitlines()


def _registered_source(file: str) -> list[str] | None:
    """The lines of code that this process ran from no file: a Jupyter cell, which IPython
    gives a file name it never writes and registers with linecache (watch() in a notebook)."""
    entry = linecache.cache.get(file)
    if entry is None or len(entry) < 3 or os.path.lexists(file):
        return None
    return [line.rstrip("\r\n") for line in entry[2]]


def created_name(source: SourceLines, location: SourceLocation | None) -> str | None:
    """The name the user's code binds what was created at `location` to (`weights_i` for
    `weights_i = tf.Variable(...)`, `self.proj` for `self.proj = layers.Dense(4)`), only when it
    is certainly that one's (`bound_name`); None otherwise, and the variable keeps its own
    TensorFlow or Keras name."""
    if location is None:
        return None
    statements = source.statements_at(location.file, location.line)
    return bound_name(statements, location.line, location.column)


def assignment(code: str | None) -> tuple[str, str] | None:
    """(target, value source) of a one-line assignment, with an outer tf.stop_gradient removed."""
    if code is None:
        return None
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return None
    statement = tree.body[0]
    source = code.strip()
    if len(statement.targets) != 1:
        return None
    target = ast.get_source_segment(source, statement.targets[0])
    value = statement.value
    if (
        isinstance(value, ast.Call)
        and called_name(value.func) == "stop_gradient"
        and len(value.args) == 1
    ):
        value = value.args[0]
    text = ast.get_source_segment(source, value)
    if target is None or text is None:
        return None
    return target, text


_LAYOUT = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)


def quoted_code(line: str) -> str:
    """`line` (one line of code) as a sentence quotes it: `x = model(images)` for
    `x   = model(images)   # forward`. Python's tokenizer finds the comment, so a `#` inside
    a string stays; one space stands wherever the line had any between two tokens, and
    strings keep their own spaces. A string that goes on below the line is kept as it is."""
    text = line.strip()
    parts: list[str] = []
    end = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in _LAYOUT or token.start[0] != 1:
                continue
            start = token.start[1]
            if parts and start > end:
                parts.append(" ")
            parts.append(token.string)
            end = token.end[1] if token.end[0] == 1 else len(text)
    except (tokenize.TokenError, SyntaxError):  # one line of a statement that spans several
        rest = text[end:].strip()
        if re.match(r"[A-Za-z]{0,2}['\"]", rest):  # a string that goes on below: kept whole
            parts.extend((" ", rest) if parts else (rest,))
    return "".join(parts) if parts else text

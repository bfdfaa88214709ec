"""The GitHub Action's `args` input as gradcheck's arguments: split as a shell splits words
(`shlex`, POSIX rules: a quoted argument stays one, line breaks and all), never run as code,
with the Action's own options (annotations, the SARIF report) put before a `--` so that a
training script's arguments never receive them.

`python -m gradcheck_cli.cli.action FILE` writes the arguments to FILE, each ended by a NUL
byte (what no argument can hold), for bash's `mapfile -d ''`. An input that does not split (an
unbalanced quote) is an error annotation and exit code 2: the step fails, the job with it.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def arguments(given: str, sarif_file: str) -> list[str]:
    """gradcheck's arguments for the `args` input; ValueError when it does not split."""
    words = shlex.split(given)
    own = ["--format", "github", "--also", f"sarif:{sarif_file}"]
    if "--" in words:
        cut = words.index("--")
        return [*words[:cut], *own, *words[cut:]]
    return [*words, *own]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gradcheck_cli.cli.action FILE", file=sys.stderr)
        return 2
    try:
        split = arguments(os.environ.get("GRADCHECK_ARGS", ""), os.environ["GRADCHECK_SARIF"])
    except ValueError as error:
        # A workflow command on stdout: the run shows it as an error annotation.
        print(f"::error title=gradcheck action::the args input does not split into words: {error}")
        return 2
    if any("\0" in word for word in split):
        print("::error title=gradcheck action::the args input holds a NUL character")
        return 2
    Path(argv[0]).write_bytes(b"".join(word.encode() + b"\0" for word in split))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

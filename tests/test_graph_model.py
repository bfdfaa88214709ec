"""The graph model's names: variables that share TensorFlow's name told apart one way."""

from __future__ import annotations

from gradcheck_cli.graph.model import CreationNames, make_names_unique, numbered_name


def test_names_are_numbered_past_the_names_taken() -> None:
    assert numbered_name("Variable", 0, set()) == "Variable"
    assert numbered_name("Variable", 2, {"Variable", "Variable_1"}) == "Variable_2"
    # A variable the script named `Variable_1` itself keeps it; the second `Variable` moves on.
    assert numbered_name("Variable", 1, {"Variable", "Variable_1"}) == "Variable_2"


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


def test_made_unique_never_into_a_name_another_has() -> None:
    items = [_Named(n) for n in ("Variable", "Variable", "Variable_1", "Variable", "dense/kernel")]
    make_names_unique(items)
    assert [i.name for i in items] == [
        "Variable",
        "Variable_2",
        "Variable_1",
        "Variable_3",
        "dense/kernel",
    ]


def test_creation_names_follow_creation_whatever_asks_first() -> None:
    """The script's variables are numbered by creation, a library's own after them, one the
    script created out of sight (not in `created`) after those; once named, always."""
    first, library, second, third = (_Named("Variable") for _ in range(4))
    created = [first, library, second]
    names = CreationNames(created, lambda v: v.name, lambda v: v is not library)
    assert names.name(second) == "Variable_1"
    assert names.name(library) == "Variable_2"
    created.append(third)  # created later: a model built by its first call
    assert names.name(third) == "Variable_3"
    assert names.name(first) == "Variable"
    assert names.name(second) == "Variable_1"
    assert names.name(_Named("Variable")) == "Variable_4"


def test_names_asked_without_creation_are_told_apart_as_asked() -> None:
    names = CreationNames.as_asked()
    assert [names.name(_Named(""), "w") for _ in range(3)] == ["w", "w_1", "w_2"]

"""The trainable variables a run's script created that no gradient request differentiates, and
which of them hold the values of a requested one (a target network, an EMA teacher): copies."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradcheck_cli.differentiability.rules import is_trainable_dtype
from gradcheck_cli.graph.model import Variable
from gradcheck_cli.run_mode.gradient_requests import CreatedVariables


@dataclass
class Untrained:
    """The trainable variables the script created that no gradient request differentiates."""

    variables: list[Variable]
    # (name, why) of those left out as a library's bookkeeping (GC009).
    left_out: list[tuple[str, str]]
    # (name, the name of the requested variable whose values it holds): copies (GC214).
    copies: list[tuple[str, str]]
    # Names of those a model holds, read as a fixed model: no request lists any variable a
    # model holds (the requests optimise inputs, as style transfer does).
    fixed: list[str] = field(default_factory=list)


def untrained(created: CreatedVariables, requested: set[int]) -> Untrained:
    """Trainable variables the script created that no gradient request differentiates; an
    integer variable (a counter, `tf.Variable(0)` left trainable) can never train and is no
    candidate. Those that hold the values of a requested variable (a target network, an EMA
    teacher: values equal now, before any weight changed) are told apart as copies."""
    from gradcheck_cli.tracing.keras_weights import (
        discarded_layer_weights,
        left_out_of_candidates,
        owned_variables,
        smallest_holders,
    )

    # What a library made for itself and no model of the script holds: an optimizer's or a
    # metric's variables, TF-MOT's discarded clones.
    main = vars(sys.modules["__main__"])
    discarded = discarded_layer_weights(created.keras)
    owned = owned_variables(main, created.keras, discarded)
    libraries = created.by_libraries - owned
    found = []
    unchecked = []
    for variable in created.variables:
        if id(variable) in requested or id(variable) in created.bookkeeping:
            continue
        if id(variable) in libraries:
            unchecked.append(variable)
            continue
        _, model = created.describe(variable)
        if model.trainable and is_trainable_dtype(model.dtype):
            found.append((variable, model))
    listed = [v for v in created.variables if id(v) in requested]
    holders = smallest_holders(main, created.keras)
    groups = _layer_then_model(created, {v: holder for v, (holder, _) in holders.items()})
    positions = {v: position for v, (_, position) in holders.items()}
    sources = copied_values([v for v, _ in found], listed, groups, positions)
    models = [model for _, model in found]
    names = {id(v): model.name for (v, _), model in zip(found, models)}
    requested_names = {id(v): created.describe(v)[1].name for v in listed}
    copies = [(names[i], requested_names[s]) for i, s in sources.items()]
    left = [model for (v, _), model in zip(found, models) if id(v) not in sources]
    told = left_out_of_candidates(unchecked, discarded, created.names, created.at)
    # Where no request lists a variable that a model holds (an image optimised through a
    # fixed feature extractor), the models the loss reads are fixed by the script's design.
    inputs_only = bool(listed) and not any(id(v) in owned for v in listed)
    fixed = [names[id(v)] for v, _ in found if inputs_only and id(v) in owned]
    return Untrained(left, told, copies, [name for name in fixed if name in {m.name for m in left}])


def _layer_then_model(
    created: CreatedVariables, holders: dict[int, int]
) -> Callable[[Any], tuple[Hashable, ...]]:
    """What a variable's constant value is judged with: its layer (else its creation line),
    then the model that holds it."""

    def keys(variable: Any) -> tuple[Hashable, ...]:
        owner = created.keras.owners.get(id(variable))
        if owner is not None:
            layer: Hashable = ("layer", owner)
        elif (where := created.at.get(id(variable))) is not None:
            layer = ("line", where.file, where.line)
        else:
            layer = ("variable", id(variable))
        holder = holders.get(id(variable))
        return layer, ("model", holder) if holder is not None else ("variable", id(variable))

    return keys


def copied_values(
    untrained: Sequence[Any],
    listed: Sequence[Any],
    groups: Callable[[Any], tuple[Hashable, ...]],
    positions: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """{id of an `untrained` variable: id of the `listed` one whose values it holds}. A value
    that varies (random weights) is a copy when a listed variable holds exactly its bytes; a
    constant one (a zero bias, a batch norm's scale of ones) proves nothing alone, and counts
    when a variable of one of its `groups` (its layer, then its model) copies a varying value
    of the group its own source is in; of equal sources, the one at its own position in its
    model (`positions`: a variable's index in its model's list) is named."""
    import numpy
    import tensorflow as tf

    def key(variable: Any) -> tuple[tuple[Any, ...], bool] | None:
        try:
            with tf.init_scope():  # the values now, even while a step is traced
                value = numpy.ascontiguousarray(variable.numpy())
        except Exception:  # a variable whose value cannot be read here
            return None
        digest = hashlib.sha256(value.tobytes()).digest()
        varies = value.size > 1 and bool(numpy.any(value != value.flat[0]))
        return (str(variable.dtype), value.shape, digest), varies

    shapes = {tuple(variable.shape) for variable in untrained}
    held: dict[tuple[Any, ...], list[Any]] = {}
    for variable in listed:
        if tuple(variable.shape) in shapes and (found := key(variable)) is not None:
            held.setdefault(found[0], []).append(variable)
    copies: dict[int, int] = {}
    constants: list[tuple[Any, list[Any]]] = []
    # the group of each copy -> the groups of the variables it copies
    copied_groups: dict[Hashable, set[Hashable]] = {}
    for variable in untrained:
        found = key(variable)
        if found is None or found[0] not in held:
            continue
        if found[1]:
            source = held[found[0]][0]
            copies[id(variable)] = id(source)
            for mine, theirs in zip(groups(variable), groups(source)):
                copied_groups.setdefault(mine, set()).add(theirs)
        else:
            constants.append((variable, held[found[0]]))
    for variable, sources in constants:
        for level, mine in enumerate(groups(variable)):
            of = copied_groups.get(mine, set())
            mine_at = (positions or {}).get(id(variable))
            source = min(
                (s for s in sources if groups(s)[level] in of),
                key=lambda s: (positions or {}).get(id(s)) != mine_at,
                default=None,
            )
            if source is not None:
                copies[id(variable)] = id(source)
                break
    return copies

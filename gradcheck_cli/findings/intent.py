"""Dead variables whose cut looks intended, and the true story of a quantizer's variables: the
findings, one-line reasons and advice that replace a dead variable's generic ones."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gradcheck_cli.analysis.verdicts import (
    Analysis,
    Status,
    StopGradientShape,
    Unreached,
    VariableVerdict,
)
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.names import common_prefix, common_scope
from gradcheck_cli.findings.report import Report
from gradcheck_cli.findings.rules import (
    NETWORK_NOT_TRAINED_BY_THIS_LOSS,
    QUANTIZER_OUTSIDE_STRAIGHT_THROUGH,
    Rule,
)
from gradcheck_cli.findings.source import SourceLines
from gradcheck_cli.graph.model import SourceLocation

# `quantized = z + tf.stop_gradient(nearest - z)`: the target, x and q of the user's estimator.
_STRAIGHT_THROUGH = re.compile(
    r"^\s*(?P<target>[\w.]+)\s*=\s*(?P<x>[\w.]+)\s*\+\s*"
    r"(?:tf\.|keras\.ops\.|ops\.)?stop_gradient\(\s*(?P<q>.+?)\s*-\s*(?P=x)\s*\)\s*(#.*)?$"
)
# Why a sub-model the loss does not read at all may still be meant to be there.
_ANOTHER_LOSS = {Unreached.NEVER_READ, Unreached.RECEIVED_NOT_READ, Unreached.READ_NOT_REACHING}


@dataclass(frozen=True)
class Intent:
    """What the report tells instead of the generic dead-variable story, by variable name."""

    # Dead variables whose cut looks intended, with the one-line reason (warnings, not errors).
    intended: dict[str, str] = field(default_factory=dict)
    # The advice, the same sentence for every variable of one pattern.
    fixes: dict[str, str] = field(default_factory=dict)
    # Findings that replace the variable's own findings about the same ops.
    findings: dict[str, tuple[Finding, ...]] = field(default_factory=dict)


def judge_intent(analysis: Analysis, source: SourceLines, *, requested: bool = False) -> Intent:
    """Teachers and target networks under one stop_gradient, the variables inside a
    straight-through estimator's quantizer, and whole sub-models this loss never uses.

    `requested` (`gradcheck run`): the variables are the ones the script asked gradients for,
    so none of them is meant to go untrained: a whole network under one stop_gradient stays
    an error, and what it looks like only shapes the advice."""
    intent = Intent()
    for shape in analysis.stop_gradients.values():
        if shape.straight_through:
            _inside_quantizer(intent, shape, analysis.verdicts, source)
        else:
            _whole_network(intent, shape, analysis.verdicts, requested=requested)
    _unused_networks(intent, analysis.verdicts)
    return intent


def _whole_network(
    intent: Intent,
    shape: StopGradientShape,
    verdicts: tuple[VariableVerdict, ...],
    *,
    requested: bool,
) -> None:
    """Every variable upstream of the stop_gradient is cut by it alone, none trains, they
    form a network of their own (a top-level name scope no other variable shares), and the loss
    trains something else (a loss that trains nothing is a bug, not a teacher)."""
    if not any(v.status is Status.OK for v in verdicts):
        return
    by_name = {v.name: v for v in verdicts}
    if not shape.upstream or any(name not in by_name for name in shape.upstream):
        return
    members = [by_name[name] for name in shape.upstream]
    if not members or not all(_cut_only_by(v, shape.op) for v in members):
        return
    owner = common_scope([v.name for v in members])
    network = owner.partition("/")[0] if owner else None
    upstream = set(shape.upstream)
    if network is not None and not any(
        _in_scope(v.name, network) for v in verdicts if v.name not in upstream
    ):
        assert owner is not None
        label, pattern = owner, f"{owner}/*"
        attribute = _attribute(members) or owner.rpartition("/")[2]
    else:
        # No name scope of its own (keras.applications layers are named `conv1_conv`...): the
        # Python object that holds them all, when it holds nothing else.
        attribute = _own_attribute(members, verdicts)
        if attribute is None:
            return  # a layer of the network this loss trains is no network of its own
        label, pattern = attribute, f"{attribute}.*"
    location = _location_of(shape.op, members)
    where = f" at line {location.line}" if location else f" ({shape.op})"
    if requested:
        fix = (
            f"the script asks gradients of this loss for `{label}`, whose whole output is "
            f"wrapped in tf.stop_gradient{where}: if it is meant to stay fixed, leave its "
            f"variables out of this request (or set `{attribute}.trainable = False`); if it "
            "should learn from this loss, remove the tf.stop_gradient"
        )
        intent.fixes.update(dict.fromkeys((v.name for v in members), fix))
        return
    reason = (
        f"this looks intended: `{label}` is a network this loss does not train (its whole "
        f"output is wrapped in tf.stop_gradient{where})"
    )
    fix = (
        f"if so, make it non-trainable (`{attribute}.trainable = False`) or accept it with "
        f'allow-dead = ["{pattern}"]'
    )
    intent.intended.update(dict.fromkeys((v.name for v in members), reason))
    _tell(intent, members, NETWORK_NOT_TRAINED_BY_THIS_LOSS, fix, shape.op, location, reason=reason)


def _inside_quantizer(
    intent: Intent,
    shape: StopGradientShape,
    verdicts: tuple[VariableVerdict, ...],
    source: SourceLines,
) -> None:
    """`x + tf.stop_gradient(q - x)` cuts the variables of q by design: they need a loss
    term of their own (a VQ-VAE's codebook loss). Still an error: they never train."""
    members = [
        v
        for v in verdicts
        if v.status is Status.BLOCKED
        and v.name not in shape.passed_to
        and any(b.op == shape.op for b in v.blockers)
    ]
    if not members:
        return
    location = _location_of(shape.op, members)
    line = source.line(location)
    parts = _STRAIGHT_THROUGH.match(line) if line else None
    x, q = (parts["x"], parts["q"]) if parts else ("x", "q(x)")
    where = f"at line {location.line}" if location else f"({shape.op})"
    estimator = f"`{line.strip()}` {where}" if parts and line else where
    fix = (
        f"the straight-through estimator {where} passes gradient to {x} only; the codebook "
        f"inside {q} needs a loss term of its own, e.g. the VQ-VAE codebook loss, added to "
        f"the loss:\n    codebook_loss = tf.reduce_mean((tf.stop_gradient({x}) - {q}) ** 2)"
    )
    _tell(
        intent,
        members,
        QUANTIZER_OUTSIDE_STRAIGHT_THROUGH,
        fix,
        shape.op,
        location,
        estimator=estimator,
    )


def _tell(
    intent: Intent,
    members: Sequence[VariableVerdict],
    rule: Rule,
    fix: str,
    op: str,
    location: SourceLocation | None,
    **data: object,
) -> None:
    """Each member's finding by `rule` about the cut `op`, and the one advice for them all."""
    for verdict in members:
        intent.fixes[verdict.name] = fix
        intent.findings[verdict.name] = (
            rule.finding(
                name=verdict.name,
                hint=fix,
                variable=verdict.name,
                op=op,
                location=location,
                **data,
            ),
        )


def _unused_networks(intent: Intent, verdicts: tuple[VariableVerdict, ...]) -> None:
    """A whole sub-model (`discriminator/...`) this loss never uses while others train: maybe
    another loss trains it. The error stays; the advice says to look there first."""
    if not any(v.status is Status.OK for v in verdicts):
        return
    # A network by its name scope (`discriminator/dense/kernel`), else by the attribute that
    # holds it (`discriminator.layers[1].kernel`: Keras 3 leaves the model out of the names).
    networks: dict[tuple[str, str], list[VariableVerdict]] = {}
    for verdict in verdicts:
        if not verdict.trainable:
            continue
        if verdict.name.count("/") >= 2:
            networks.setdefault((verdict.name.partition("/")[0], "/*"), []).append(verdict)
        elif (holder := _holder(verdict)) is not None:
            networks.setdefault((holder, ".*"), []).append(verdict)
    for (network, glob), members in networks.items():
        inside = {v.name for v in members}
        others = [v for v in verdicts if v.trainable and v.name not in inside]
        if any(_in_scope(v.name, network) or _holder(v) == network for v in others):
            continue
        if not all(v.status is Status.UNUSED and v.unreached in _ANOTHER_LOSS for v in members):
            continue
        fix = (
            f"if another loss trains {network} (a GAN discriminator, a critic, a probe), check "
            f'that loss, or accept it with allow-dead = ["{network}{glob}"]; if not, call '
            f"{network} in the forward pass, or delete it"
        )
        for verdict in members:
            intent.fixes.setdefault(verdict.name, fix)


def _holder(verdict: VariableVerdict) -> str | None:
    """The attribute that holds a variable's model, from its attribute path
    (`discriminator` for `discriminator.layers[1].kernel`), when it has one."""
    path = verdict.path
    if not path or path == verdict.name or "." not in path:
        return None
    return re.split(r"[.\[]", path, maxsplit=1)[0] or None


def trained_elsewhere(reports: Sequence[Report]) -> list[Report]:
    """`gradcheck run`: a variable one request lists but cannot train while another request
    trains it (a GAN discriminator, a critic, a probe) is still dead in this request, where
    the script asked its gradient: the advice names the request that trains it."""
    trains = [{v.name for v in report.variables if v.status is Status.OK} for report in reports]
    found = []
    for index, report in enumerate(reports):
        by_request: dict[int, list[VariableVerdict]] = {}
        for verdict in report.variables:
            trainer = next(
                (n for n, names in enumerate(trains) if n != index and verdict.name in names),
                None,
            )
            if verdict.dead and trainer is not None:
                by_request.setdefault(trainer, []).append(verdict)
        for trainer, members in by_request.items():
            report = _trained_by(report, reports[trainer], members)
        found.append(report)
    return found


def _trained_by(report: Report, other: Report, members: list[VariableVerdict]) -> Report:
    request = other.source.request
    location = request.location if request else None
    where = f"the gradient request at line {location.line}" if location else other.source.loss
    owner = common_scope([v.name for v in members])
    named = f"`{owner}`" if owner else "it"
    fix = (
        f"{where} trains {named}, but this request lists its variables too and gets no "
        f"gradient for them: leave them out of this request's variables"
    )
    names = {v.name for v in members}
    # The one fix of each variable is the hint of its findings, in every format.
    findings = tuple(
        replace(f, hint=fix)
        if f.variable in names and f.hint == report.fixes.get(f.variable)
        else f
        for f in report.findings
    )
    return replace(report, findings=findings, fixes={**report.fixes, **dict.fromkeys(names, fix)})


def _in_scope(name: str, scope: str) -> bool:
    return name.startswith(scope + "/")


def _cut_only_by(verdict: VariableVerdict, op: str) -> bool:
    return (
        verdict.status is Status.BLOCKED
        and {b.op for b in verdict.blockers} == {op}
        and not verdict.cuts_without_stop_gradient
    )


def _location_of(op: str, verdicts: Sequence[VariableVerdict]) -> SourceLocation | None:
    for verdict in verdicts:
        for blocker in verdict.blockers:
            if blocker.op == op and blocker.location is not None:
                return blocker.location
    return None


def _attribute(verdicts: Sequence[VariableVerdict]) -> str | None:
    """The Python attribute that holds the sub-model (`self.teacher`), from the variables'
    attribute paths (`teacher.dense.kernel`), when they all have one."""
    paths = [v.path for v in verdicts]
    if any(path is None or path == v.name for path, v in zip(paths, verdicts, strict=True)):
        return None
    return ".".join(common_prefix([str(path).split(".")[:-1] for path in paths])) or None


def _own_attribute(
    members: Sequence[VariableVerdict], verdicts: Sequence[VariableVerdict]
) -> str | None:
    """The attribute path (`teacher`, `self.teacher`) that holds every member and no other
    trainable variable; below the top level, only a sub-model of several layers counts (one
    layer of the trained model under tf.stop_gradient is no network of its own)."""
    attribute = _attribute(members)
    if attribute is None:
        return None
    names = {v.name for v in members}
    others = [str(v.path) for v in verdicts if v.trainable and v.path and v.name not in names]
    if any(path.startswith((f"{attribute}.", f"{attribute}[")) for path in others):
        return None
    layers = {str(v.path).rpartition(".")[0] for v in members}
    nested = "." in attribute or "[" in attribute
    return attribute if not nested or len(layers) >= 2 else None

"""One explanation per dead variable, built once and rendered by every format: its fix, and the
cuts that would still remain without its tf.stop_gradients."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradcheck_cli.analysis.verdicts import Blocker, VariableVerdict
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.findings.source import SourceLines

if TYPE_CHECKING:
    from gradcheck_cli.findings.advice.edits import CodeFix


@dataclass(frozen=True)
class Explanations:
    """Per dead variable name: what to change (`fixes`), and the sentence that says which cuts
    hide behind its tf.stop_gradients (`still_cut`), for the variables that have some."""

    fixes: dict[str, str]
    still_cut: dict[str, str]
    # The fixes that are code gradcheck can write (`--fix`), by dead variable name.
    code_fixes: dict[str, CodeFix]


def explain(
    verdicts: Iterable[VariableVerdict],
    source: SourceLines,
    told: Mapping[str, str],
    loss_dtype: str | None = None,
) -> Explanations:
    """The explanation of every dead variable; `told`: fixes that replace a variable's own (an
    intended cut, a quantizer's variables), by name; `loss_dtype`: the loss's, when known."""
    dead = [verdict for verdict in verdicts if verdict.dead]
    if not dead:  # nothing to advise on: a clean model's check loads no advice
        return Explanations(dict(told), {}, {})
    from gradcheck_cli.findings.advice.edits import code_fix
    from gradcheck_cli.findings.advice.fixes import variable_fix

    fixes = {
        verdict.name: fix
        for verdict in dead
        if (fix := variable_fix(verdict, source, loss_dtype)) is not None  # a right fix, or none
    }
    fixes.update(told)
    still_cut = {
        verdict.name: sentence
        for verdict in dead
        if (sentence := still_cut_sentence(verdict)) is not None
    }
    code_fixes = {
        verdict.name: fix
        for verdict in dead
        if verdict.name not in told and (fix := code_fix(verdict, source)) is not None
    }
    return Explanations(fixes, still_cut, code_fixes)


def still_cut_sentence(verdict: VariableVerdict) -> str | None:
    """`Even without the tf.stop_gradient at line 46, the Cast at line 40 ... would still cut
    it.`: removing the stop_gradients alone would not train the variable."""
    stops = [b for b in verdict.blockers if b.reason is Reason.STOP_GRADIENT]
    remaining = verdict.cuts_without_stop_gradient
    if not stops or not remaining:
        return None
    stop_text = _listed([_at("the tf.stop_gradient", b) for b in stops])
    rest = _listed([_at(f"the {b.op_type}", b) for b in remaining])
    return f"Even without {stop_text}, {rest} would still cut it."


def _at(what: str, blocker: Blocker) -> str:
    return f"{what} at line {blocker.location.line}" if blocker.location else f"{what} {blocker.op}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

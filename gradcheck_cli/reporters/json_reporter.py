"""The machine-readable report, schema `gradcheck/1`: a model's report, or why it has none."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gradcheck_cli.analysis.verdicts import Blocker
from gradcheck_cli.differentiability.reasons import Reason
from gradcheck_cli.errors import display_path
from gradcheck_cli.findings.finding import Finding
from gradcheck_cli.findings.report import Report, SourceInfo
from gradcheck_cli.graph.model import SourceLocation
from gradcheck_cli.reporters import CheckFailure

SCHEMA = "gradcheck/1"


def _location(location: SourceLocation | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return {"file": display_path(location.file), "line": location.line}


def _schema_reason(reason: Reason) -> str:
    # Schema gradcheck/1 names a value that leaves TensorFlow `other` (the message says how).
    return Reason.OTHER.value if reason is Reason.LEFT_TENSORFLOW else reason.value


def _blocker(blocker: Blocker) -> dict[str, Any]:
    return {
        "op": blocker.op,
        "op_type": blocker.op_type,
        "reason": _schema_reason(blocker.reason),
        "location": _location(blocker.location),
    }


def _source(source: SourceInfo) -> dict[str, Any]:
    found: dict[str, Any] = {"path": source.path, "kind": source.kind, "loss": source.loss}
    if source.request is not None:
        found["request"] = {
            "api": source.request.api,
            "location": _location(source.request.location),
        }
    return found


def _explained(report: Report, name: str) -> dict[str, Any]:
    """A dead variable's optional keys, its explanation as every format gives it: `intended`
    (why its cut looks intended), `still_cut` (the cuts its tf.stop_gradients hide), `fix`,
    and `code_fix` (the exact edits `--fix` writes, when its fix is such code)."""
    told: dict[str, Any] = {
        "intended": report.intended.get(name),
        "still_cut": report.still_cut.get(name),
        "fix": report.fixes.get(name),
    }
    if name in report.fixable:
        fix = report.code_fixes[name]
        told["code_fix"] = {
            "kind": fix.what,
            "edits": [
                {
                    "file": display_path(edit.location.file),
                    "line": edit.location.line,
                    "original": edit.original,
                    "replacement": edit.replacement,
                }
                for edit in fix.edits
            ],
        }
    return {key: text for key, text in told.items() if text is not None}


def as_dict(report: Report) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "source": _source(report.source),
        "variables": [
            {
                "name": v.name,
                "path": v.path,
                "trainable": v.trainable,
                "dtype": v.dtype,
                "shape": list(v.shape) if v.shape is not None else None,
                "status": v.status.value,
                "blockers": [_blocker(b) for b in v.blockers],
                # Cuts on the variable's other paths, which alone would train nothing.
                **({"side_cuts": [_blocker(b) for b in v.side_cuts]} if v.side_cuts else {}),
                **_explained(report, v.name),
            }
            for v in report.variables
        ],
        "findings": [
            {
                "code": f.code,
                "severity": f.severity.value,
                "message": f.message,
                "variable": f.variable,
                "op": f.op,
                "location": _location(f.location),
                **_suppressed(f),
            }
            for f in report.findings
        ],
        "summary": {
            **{
                key: report.summary[key]
                for key in ("trainable", "ok", "blocked", "unused", "frozen")
            },
            # Dead variables that fail the run, and those accepted (allow-dead or baseline;
            # an ignore comment).
            "dead": len(report.dead),
            "allowed": len(report.allowed),
            "suppressed": len(report.suppressed),
            # Dead variables whose fix is code `--fix` writes.
            "fixable": len(report.fixable),
        },
    }


def _suppressed(item: Finding) -> dict[str, Any]:
    """A suppressed finding's `suppressed` object: `in_source` (a `# gradcheck: ignore`
    comment) or `external` (allow-dead, the baseline), and why."""
    if item.suppression is None:
        return {}
    kind = "in_source" if item.suppression.kind == "inSource" else "external"
    return {"suppressed": {"kind": kind, "justification": item.suppression.justification}}


def failure_as_dict(failure: CheckFailure) -> dict[str, Any]:
    """A model that could not be checked: its path, its kind when known, and the error."""
    source: dict[str, Any] = {"path": failure.path}
    if failure.kind is not None:
        source["kind"] = failure.kind
    return {"schema": SCHEMA, "source": source, "error": failure.error}


def _entry(checked: Report | CheckFailure) -> dict[str, Any]:
    return failure_as_dict(checked) if isinstance(checked, CheckFailure) else as_dict(checked)


def render_json(checked: Report | CheckFailure) -> str:
    """One model: its `gradcheck/1` object (an `error` object when it could not be checked)."""
    return json.dumps(_entry(checked), indent=2) + "\n"


def render_json_array(checked: Sequence[Report | CheckFailure]) -> str:
    """Several models: a JSON array with one `gradcheck/1` object per model, in the order given."""
    return json.dumps([_entry(item) for item in checked], indent=2) + "\n"

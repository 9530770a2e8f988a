"""The audit report as HTML: one turn's audit laid out as a timeline a non-engineer can read.

The report follows the ten audit questions in order, opens with the verdict (verified, or what
failed), and shows the reply's blocks in the order the user saw them, each with its kind and its
author. It is one self-contained page: inline CSS, no script, nothing fetched. Every value in it
is data: the template autoescapes and nothing marks stored text safe, so a user's words, a
model's prose or text that looks like markup or template code always shows literally.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from turnframe_core.blocks import BlockKind
from turnframe_runtime.audit import Audit

__all__ = ["render_audit_html"]

_TEMPLATES: Final = Path(__file__).resolve().parent / "audit_templates"

#: Plain-language readings of the stored codes (a code without one is shown as it is stored).
_WORDS: Final[dict[str, dict[str, str]]] = {
    "kind": {
        "receipt": "Receipt",
        "notice": "Notice",
        "answer": "Answer",
        "transition": "Transition",
        "interaction": "Card",
        "artifact": "Document",
    },
    "author": {
        "server": "written by the server from stored facts and approved wording",
        "model": "written by the language model",
        "unknown": "a kind of block this version does not know",
    },
    "origin": {
        "direct_safe_user_act": "the user asked for it in their own words",
        "confirmed_interaction": "the user answered a card",
        "internal_policy": "the server's own rules",
        "external_callback": "an outside system's answer",
    },
    "outcome": {
        "committed": "done",
        "idempotent_replay": "already done before; not repeated",
        "revision_conflict": "not done: the record had changed in the meantime",
        "rejected": "refused",
        "failed": "failed",
        "outcome_unknown": "unknown: no answer in time, to be reconciled",
        "awaiting_confirmation": "waiting for the user to confirm on a card",
    },
    "resolution": {
        "exact": "found exactly one record",
        "ambiguous": "more than one record could be meant",
        "missing": "no matching record",
        "unauthorized": "a record the user may not act on",
        "stale": "the record had changed since the user saw it",
        "new": "a new record to create",
    },
    "phase": {
        "received": "received",
        "interpreted": "understood",
        "reduced": "planned",
        "executing": "carrying out changes",
        "committed": "changes saved",
        "composed": "reply written",
        "delivered": "reply delivered",
        "failed": "failed",
    },
}

_KNOWN_KINDS: Final = frozenset(kind.value for kind in BlockKind)


def _plain(value: Any) -> str:
    """A stored value as text: strings as they are, anything else as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _when(millis: Any) -> str:
    """Milliseconds since the epoch as a UTC date and time."""
    if not isinstance(millis, int) or isinstance(millis, bool):
        return "—"
    moment = _dt.datetime.fromtimestamp(millis / 1000, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _case(ref: Any) -> str:
    """A case reference as `workflow case_id (revision n)`."""
    if not isinstance(ref, dict):
        return _plain(ref)
    return f"{ref.get('workflow')} {ref.get('case_id')} (revision {ref.get('expected_revision')})"


def _say(code: Any, table: str) -> str:
    """A stored code in plain language, or the code itself when it has no reading."""
    return _WORDS[table].get(code, _plain(code)) if isinstance(code, str) else _plain(code)


def _author(block: Any) -> str:
    """Who wrote a block: its recorded author for a known kind, `unknown` otherwise."""
    if not isinstance(block, dict) or block.get("kind") not in _KNOWN_KINDS:
        return "unknown"
    return str(block.get("author") or "server")


_ENVIRONMENT: Final = Environment(
    loader=FileSystemLoader(_TEMPLATES),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENVIRONMENT.filters.update(plain=_plain, when=_when, case=_case, say=_say, author=_author)


def render_audit_html(audit: Audit) -> str:
    """The audit as one self-contained HTML page. Each reply block is an element carrying
    `data-block-id` and `data-block-index` (its place in the reply), in the reply's order."""
    understanding = audit.what_was_understood.get("understanding") or {}
    operations = {
        act.get("act_id"): act.get("operation")
        for act in understanding.get("acts", ())
        if isinstance(act, dict)
    }
    template = _ENVIRONMENT.get_template("report.html.j2")
    return template.render(
        audit=audit,
        failed=audit.failed(),
        understanding=understanding,
        operations=operations,
    )

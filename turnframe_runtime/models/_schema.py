"""What a model is offered as its answer's JSON schema, and how its answer is read back.

Each schema is built from the one request it answers and closes every choice with an enum: the
operations, handles, workflows, cards and options a brief offers; the moves, refs and phrasings
a narration request offers; a fact by its index among the allowed ones. A model constrained by
it cannot name what the request does not offer; one that ignores it is refused all the same,
since every answer is read through the parsers scripted ports go through
(`validate_understanding`, `parse_moves`, `parse_model_output`). The schemas keep to the subset
OpenAI's strict structured outputs accept (every property required, no additional ones), but
for string lengths, which Anthropic's tool schemas take and `strict_schema` leaves out for
OpenAI."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from turnframe_core.blocks import MalformedModelOutput
from turnframe_core.limits import MAX_MODEL_OUTPUT_CHARS, json_value_problem
from turnframe_core.moves import MAX_MOVES, REF_MOVES, REFERS_TO, MoveKind, Referable
from turnframe_core.understanding import (
    Brief,
    ConstraintKind,
    OfferedOperation,
    Understanding,
    ValueKind,
    ValueRule,
)
from turnframe_runtime.ports import AnswerRequest, ReviewVerdict, TransitionRequest

__all__ = [
    "checked",
    "decode",
    "draft_schema",
    "read_draft",
    "read_understanding",
    "read_verdict",
    "request_json",
    "review_schema",
    "strict_schema",
    "understanding_schema",
]

Schema = dict[str, Any]

_EVIDENCE: Schema = {
    "type": "object",
    "properties": {"quote": {"type": "string", "minLength": 1}},
    "required": ["quote"],
    "additionalProperties": False,
}


def _object(properties: Mapping[str, Schema]) -> Schema:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _one_of(values: Any) -> Schema:
    return {"type": "string", "enum": list(values)}


def _nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _array(items: Schema, max_items: int | None = None) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def _any(options: list[Schema]) -> Schema:
    return options[0] if len(options) == 1 else {"anyOf": options}


# --- the interpreter ----------------------------------------------------------------------------


def _value(rule: ValueRule | None) -> Schema:
    kind = rule.kind if rule is not None else ValueKind.TEXT
    if kind is ValueKind.ENUM and rule is not None:
        return _one_of(rule.choices)
    if kind is ValueKind.EMAIL:
        return {"type": "string", "format": "email"}
    if kind is ValueKind.DATE:
        return {"type": "string", "format": "date"}
    if kind is ValueKind.AMOUNT:
        return {"type": "string", "pattern": r"^-?[0-9]{1,15}(\.[0-9]{1,6})?$"}
    return {"type": "string", "minLength": 1}


def _targets(brief: Brief) -> list[Schema]:
    handles = [offered.handle for offered in brief.handles]
    targets: list[Schema] = []
    if handles:
        targets.append(_object({"kind": _one_of(["handle"]), "handle": _one_of(handles)}))
    if brief.new_record_workflows:
        targets.append(
            _object(
                {
                    "kind": _one_of(["new_record"]),
                    "workflow": _one_of(brief.new_record_workflows),
                }
            )
        )
    if brief.card_on_screen is not None:
        targets.append(_object({"kind": _one_of(["card"])}))
    if len(handles) >= 2:
        targets.append(
            _object({"kind": _one_of(["ambiguous"]), "handles": _array(_one_of(handles))})
        )
    return targets


def _act(offered: OfferedOperation, targets: list[Schema]) -> Schema:
    act_id = {"type": "string", "pattern": "^a[0-9]{1,4}$"}
    arguments = [
        _object(
            {
                "name": _one_of([name]),
                "value": _value(offered.rules.get(name)),
                "evidence": _EVIDENCE,
            }
        )
        for name in offered.arguments
    ]
    properties: dict[str, Schema] = {
        "act_id": act_id,
        "operation": _one_of([offered.operation]),
        "target": _any(targets),
    }
    if arguments:
        properties["arguments"] = _array(_any(arguments), len(arguments))
    properties |= {
        "evidence": _EVIDENCE,
        "corrects": _nullable(act_id),
        "cancels": _nullable(act_id),
    }
    return _object(properties)


def understanding_schema(brief: Brief) -> Schema:
    """The understandings `brief` admits, as a JSON schema."""
    properties: dict[str, Schema] = {}
    targets = _targets(brief)
    if brief.operations and targets:
        properties["acts"] = _array(_any([_act(o, targets) for o in brief.operations]))
    handles = [offered.handle for offered in brief.handles]
    properties["questions"] = _array(
        _object(
            {
                "question_id": {"type": "string", "pattern": "^q[0-9]{1,4}$"},
                "text": {"type": "string", "minLength": 1},
                "about": _array(_one_of(handles)) if handles else _array({"type": "string"}, 0),
                "hypothetical": {"type": "boolean"},
            }
        )
    )
    properties["constraints"] = _array(
        _object({"kind": _one_of(k.value for k in ConstraintKind), "evidence": _EVIDENCE})
    )
    if brief.records:
        properties["lookups"] = _array(
            _object(
                {
                    "record": _one_of(offered.record for offered in brief.records),
                    "reference": {"type": "string", "minLength": 1, "maxLength": 256},
                    "evidence": _EVIDENCE,
                }
            )
        )
    card = brief.card_on_screen
    if card is not None and card.accepts_text:
        properties["card_answers"] = _array(
            _object(
                {
                    "interaction_id": _one_of([card.interaction_id]),
                    "option_id": _one_of(card.option_ids),
                    "evidence": _EVIDENCE,
                }
            ),
            1,
        )
    return _object(properties)


def read_understanding(data: Any) -> Understanding:
    """The model's answer as an `Understanding` (to be validated against its brief), or
    `MalformedModelOutput`. The error never carries the model's words."""
    if not isinstance(data, Mapping):
        raise MalformedModelOutput("the interpreter's answer is not one JSON object")
    try:
        return Understanding.model_validate(dict(data))
    except ValidationError:
        raise MalformedModelOutput("the interpreter's answer is not an understanding") from None


# --- the narrator -------------------------------------------------------------------------------


def _move(kind: MoveKind, refs: tuple[Referable, ...], variants: int) -> Schema | None:
    fits = [r for r in refs if r.kind in REFERS_TO.get(kind, frozenset())]
    if variants <= 0 or (kind in REF_MOVES and not fits):
        return None
    options = sorted({o.option for r in fits for o in r.options})
    if kind is MoveKind.EXPLAIN and not options:
        return None
    return _object(
        {
            "move": _one_of([kind.value]),
            "ref": _one_of(r.ref for r in fits) if kind in REF_MOVES else {"type": "null"},
            "option": _one_of(options) if kind is MoveKind.EXPLAIN else {"type": "null"},
            "variant": {"type": "integer", "enum": list(range(variants))},
        }
    )


def draft_schema(request: TransitionRequest | AnswerRequest, *, structured: bool) -> Schema:
    """The drafts `request` admits: moves (structured) or text citing allowed facts by index."""
    kind = "answer" if isinstance(request, AnswerRequest) else "transition"
    properties: dict[str, Schema] = {"kind": _one_of([kind])}
    if isinstance(request, AnswerRequest):
        properties["question_id"] = _one_of([request.question_id])
    if structured:
        moves = [
            schema
            for move in request.moves
            if (schema := _move(move, request.refs, request.variants.get(move.value, 0)))
        ]
        if moves:
            properties["moves"] = _array(_any(moves), MAX_MOVES)
        else:
            properties["moves"] = _array({"type": "null"}, 0)
    else:
        properties["text"] = {"type": "string", "minLength": 1, "maxLength": 2000}
        facts = list(range(len(request.allowed_facts)))
        items: Schema = {"type": "integer", "enum": facts} if facts else {"type": "null"}
        properties["facts_used"] = _array(items, len(facts))
    return _object(properties)


def read_draft(
    data: Any, request: TransitionRequest | AnswerRequest, *, structured: bool
) -> Mapping[str, Any] | str:
    """The model's draft as the narrator port returns it, for the runtime's parsers: moves as
    sent (nulls left out); free text with each fact index replaced by the fact it names."""
    if not isinstance(data, Mapping):
        return data if isinstance(data, str) else json.dumps(data)
    draft = dict(data)
    if structured:
        moves = draft.get("moves")
        if isinstance(moves, list):
            draft["moves"] = [
                {k: v for k, v in m.items() if v is not None} if isinstance(m, Mapping) else m
                for m in moves
            ]
        return draft
    used = draft.get("facts_used", [])
    facts = request.allowed_facts
    if not isinstance(used, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(facts) for i in used
    ):
        raise MalformedModelOutput("the draft cites a fact it was not given")
    draft["facts_used"] = [facts[i].model_dump(mode="json") for i in dict.fromkeys(used)]
    return draft


# --- the reviewer -------------------------------------------------------------------------------


def review_schema() -> Schema:
    return _object(
        {
            "passed": {"type": "boolean"},
            "findings": _array({"type": "string", "maxLength": 300}, 8),
        }
    )


def read_verdict(data: Any) -> ReviewVerdict:
    if not isinstance(data, Mapping):
        raise MalformedModelOutput("the review is not one JSON object")
    try:
        return ReviewVerdict.model_validate(dict(data))
    except ValidationError:
        raise MalformedModelOutput("the review is not a verdict") from None


# --- the providers' subsets ---------------------------------------------------------------------

#: Keywords OpenAI's strict structured outputs refuse; the parsers enforce these limits anyway.
_NOT_STRICT = frozenset({"minLength", "maxLength"})


def strict_schema(schema: Any) -> Any:
    """`schema` without the keywords OpenAI's strict mode does not support, at any depth."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: Schema = {}
    for key, value in schema.items():
        if key in _NOT_STRICT:
            continue
        if key in ("properties", "$defs"):
            kept[key] = {name: strict_schema(inner) for name, inner in value.items()}
        elif key in ("items", "anyOf", "additionalProperties"):
            kept[key] = strict_schema(value)
        else:
            kept[key] = value
    return kept


# --- the wire -----------------------------------------------------------------------------------


def decode(text: Any) -> Any:
    """A model's answer text as JSON within the caps, or `MalformedModelOutput`."""
    if not isinstance(text, str) or len(text) > MAX_MODEL_OUTPUT_CHARS:
        raise MalformedModelOutput("the model's answer is empty or too long")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise MalformedModelOutput("the model's answer is not JSON") from None
    return checked(data)


def checked(data: Any) -> Any:
    """A model's JSON answer within the caps a stored value keeps, or `MalformedModelOutput`."""
    problem = json_value_problem(data)
    if problem is not None:
        raise MalformedModelOutput(f"the model's answer {problem}")
    return data


def request_json(request: Any) -> str:
    """What the model is given of a request: its JSON (a brief or a narration/review request)."""
    return json.dumps(request.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)

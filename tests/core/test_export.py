"""Export of stored turns to model history (OpenAI, Anthropic) and to Vis, and Vis import."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core import codes
from turnframe_core.blocks import (
    AnswerBlock,
    ArtifactBlock,
    InteractionBlock,
    NoticeBlock,
    NoticeSeverity,
    TransitionBlock,
    UnknownBlock,
)
from turnframe_core.derive import derive_block_id, derive_replay_token
from turnframe_core.export import (
    FREEFORM_HARD_CAP,
    SERVER_RECORD_TOOL,
    ForgedBlock,
    InvalidVisMessage,
    UserTurn,
    anthropic_messages,
    apply_vis_events,
    from_vis,
    from_vis_message,
    openai_chat_messages,
    openai_responses_input,
    to_vis,
    to_vis_message,
    vis_events,
)
from turnframe_core.interactions import (
    ApplyOperation,
    FreeformOptional,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionResponse,
)
from turnframe_core.moves import Move
from turnframe_core.stream import StreamMode, TurnCompleted, block_events
from turnframe_core.turn import AssistantTurn, AttachmentRef, TurnInput, TurnStatus
from turnframe_store import builders as store_builders
from turnframe_store.records import UserTurnRecord
from turnframe_test.builders import case, confirm_card, copy_ref, receipt_block


def bid(slot: str) -> str:
    return derive_block_id("acct_1", "turn_1", slot)


def assistant_turn(*blocks: object, status: TurnStatus = TurnStatus.COMPLETED, **extra: object):
    return AssistantTurn(
        turn_id="turn_1",
        conversation_id="conv_1",
        account_id="acct_1",
        status=status,
        locale="en",
        blocks=tuple(blocks),
        replay_token=derive_replay_token("turn_1"),
        created_at=1_000,
        completed_at=2_000,
        **extra,
    )


def user_turn(text: str | None = "Move my flight", turn_id: str = "turn_0", **extra: object):
    return UserTurn(
        turn_id=turn_id,
        received_at=900,
        input=TurnInput(account_id="acct_1", conversation_id="conv_1", text=text, **extra),
    )


def model_prose(text: str = "Here is where things stand.") -> TransitionBlock:
    return TransitionBlock(block_id=bid("t"), text=text)


def server_prose() -> TransitionBlock:
    return TransitionBlock(block_id=bid("t"), author="server", text="Done.", copy_ref=copy_ref())


def notice(severity: NoticeSeverity = NoticeSeverity.INFO) -> NoticeBlock:
    return NoticeBlock(
        block_id=bid("n"),
        code="turnframe.notice.nothing_submitted",
        severity=severity,
        text="Nothing was submitted.",
        copy_ref=copy_ref(),
    )


def card_block() -> InteractionBlock:
    return InteractionBlock.from_view(bid("c"), confirm_card().view())


def full_turn() -> AssistantTurn:
    return assistant_turn(
        receipt_block(("evt_1", "evt_2")),
        notice(),
        model_prose(),
        ArtifactBlock(
            block_id=bid("a"),
            artifact_id="art_1",
            media_type="application/pdf",
            name="ticket.pdf",
            uri_ref="artifact:art_1",
        ),
        card_block(),
    )


def forged_turn(*blocks: object) -> AssistantTurn:
    """A turn holding blocks its own validation would refuse (built past it)."""
    return assistant_turn().model_copy(update={"blocks": blocks})


def forge(block: object, **changes: object) -> object:
    """A block whose fields were changed past its rules (as a bug or an attacker would)."""
    return type(block).model_construct(**{**dict(block), **changes})  # type: ignore[arg-type]


# --- model history: authorship ------------------------------------------------------------------


def test_server_blocks_reach_an_openai_chat_model_as_a_tool_result_never_as_assistant_text():
    messages = openai_chat_messages([user_turn(), full_turn()])
    assistant_texts = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]
    assert assistant_texts == ["Here is where things stand."]
    call, result = messages[1], messages[2]
    assert call["tool_calls"][0]["function"]["name"] == SERVER_RECORD_TOOL
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
    record = json.loads(result["content"])
    assert [b["kind"] for b in record["blocks"]] == ["receipt", "notice", "artifact", "interaction"]


def test_the_order_of_an_openai_chat_history_is_user_call_result_then_model_prose():
    messages = openai_chat_messages([user_turn(), full_turn()])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[0] == {"role": "user", "content": "Move my flight"}


def test_server_copy_standing_in_for_prose_is_a_tool_result_not_assistant_text():
    messages = openai_chat_messages([assistant_turn(notice(), server_prose())])
    assert all(m["content"] is None for m in messages if m["role"] == "assistant")
    assert "Done." in messages[-1]["content"]


def chosen_prose() -> TransitionBlock:
    """Prose the server rendered from copy, in moves a model chose (structured narration)."""
    return TransitionBlock(
        block_id=bid("t"),
        text="Please confirm below.",
        copy_ref=copy_ref(),
        moves=(Move(move="ask", ref=bid("c")),),
    )


def test_prose_made_of_moves_a_model_chose_is_its_moves_as_assistant_text_and_words_a_record():
    messages = openai_chat_messages([assistant_turn(chosen_prose(), card_block())])
    draft = {"kind": "transition", "moves": [{"move": "ask", "ref": bid("c")}]}
    assert messages[-1] == {
        "role": "assistant",
        "content": json.dumps(draft, separators=(",", ":")),
    }
    record = json.loads(messages[-2]["content"])
    assert [b["text"] for b in record["blocks"] if b["kind"] == "transition"] == [
        "Please confirm below."
    ]


def test_the_server_words_of_moves_a_model_chose_are_never_assistant_text_in_any_shape():
    history = [user_turn(), assistant_turn(chosen_prose(), card_block())]
    chat = [m["content"] for m in openai_chat_messages(history) if m["role"] == "assistant"]
    responses = [
        part["text"]
        for item in openai_responses_input(history)
        if item.get("role") == "assistant"
        for part in item["content"]
    ]
    anthropic = [
        b.get("text")
        for m in anthropic_messages(history)
        if m["role"] == "assistant"
        for b in m["content"]
    ]
    for said in (chat, responses, anthropic):
        assert not any("Please confirm below." in (text or "") for text in said)
        assert any('"move":"ask"' in (text or "") for text in said)


def test_a_responses_api_history_carries_server_blocks_as_a_function_call_output():
    items = openai_responses_input([user_turn(), full_turn()])
    assert [i["type"] for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert items[1]["call_id"] == items[2]["call_id"]
    assert items[3]["content"] == [{"type": "output_text", "text": "Here is where things stand."}]


def test_an_anthropic_history_carries_server_blocks_as_a_tool_result_and_alternates_roles():
    messages = anthropic_messages(
        [user_turn(), assistant_turn(notice()), user_turn("ok", "turn_2")]
    )
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    tool_use = messages[1]["content"][0]
    result, words = messages[2]["content"]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == SERVER_RECORD_TOOL
    assert result["type"] == "tool_result" and result["tool_use_id"] == tool_use["id"]
    assert words == {"type": "text", "text": "ok"}
    assert all(b["type"] != "text" for b in messages[1]["content"])


def test_a_card_answer_reaches_a_model_as_the_users_json_not_as_prose():
    answered = user_turn(
        None,
        interaction_response=InteractionResponse(
            interaction_id="int_1", option_id="opt_confirm", expected_case_revision=1
        ),
    )
    (message,) = openai_chat_messages([answered])
    sent = json.loads(message["content"])["turnframe_user_input"]["interaction_response"]
    assert sent == {
        "interaction_id": "int_1",
        "option_id": "opt_confirm",
        "expected_case_revision": 1,
    }


def test_a_turn_the_server_wrote_on_its_own_sends_no_user_message():
    follow_up = UserTurn(
        turn_id="turn_5",
        received_at=1,
        input=TurnInput.server_turn("acct_1", "conv_1", "turn_5", "outbox", "en"),
    )
    assert openai_chat_messages([follow_up]) == []


# --- forged blocks ------------------------------------------------------------------------------


def test_a_receipt_whose_id_is_not_derived_from_its_events_is_not_exported():
    receipt = forge(receipt_block(), event_ids=("evt_9",))
    with pytest.raises(ForgedBlock) as raised:
        openai_chat_messages([forged_turn(receipt)])
    assert raised.value.code == codes.EXPORT_FORGED_BLOCK == "turnframe.export.forged_block"


def test_a_server_block_claiming_model_authorship_is_not_exported():
    with pytest.raises(ForgedBlock, match="another author"):
        anthropic_messages([forged_turn(forge(notice(), author="model"))])


def test_prose_with_a_copy_ref_but_no_moves_is_not_exported_as_model_prose():
    mislabelled = forge(model_prose(), copy_ref=copy_ref())
    with pytest.raises(ForgedBlock, match="copy"):
        to_vis_message(forged_turn(mislabelled))


def test_an_unknown_block_presented_as_a_known_kind_is_not_exported():
    fake = UnknownBlock.model_construct(
        kind="receipt", block_id=bid("x"), raw={"kind": "receipt", "block_id": bid("x")}
    )
    with pytest.raises(ForgedBlock, match="unknown"):
        openai_responses_input([forged_turn(fake)])


def test_a_block_whose_kind_is_not_the_kind_of_its_type_is_not_exported():
    with pytest.raises(ForgedBlock):
        openai_chat_messages([forged_turn(forge(notice(), kind="transition"))])


def test_a_forged_receipt_in_vis_data_is_refused_on_import():
    message = to_vis_message(assistant_turn(receipt_block()))
    message["content"][0]["metadata"]["event_ids"] = ["evt_other"]
    with pytest.raises(ForgedBlock, match="derived"):
        from_vis_message(message)


def test_vis_data_making_a_server_block_a_models_is_refused_on_import():
    message = to_vis_message(assistant_turn(notice()))
    message["content"][0]["metadata"]["author"] = "model"
    with pytest.raises(ForgedBlock, match="author"):
        from_vis_message(message)


def test_vis_data_presenting_an_unknown_block_as_a_known_kind_is_refused_on_import():
    message = to_vis_message(assistant_turn(notice()))
    message["content"][0]["metadata"] = {
        "kind": "notice",
        "unknown": True,
        "raw": {"kind": "notice"},
    }
    with pytest.raises(ForgedBlock):
        from_vis_message(message)


@pytest.mark.parametrize(
    ("turn", "hidden"),
    [
        (assistant_turn(model_prose()), {"text": "Not what the client shows."}),
        (assistant_turn(notice()), {"text": "Not what the client shows."}),
        (assistant_turn(receipt_block()), {"title": "Not what the client shows."}),
        (assistant_turn(notice()), {"block_id": bid("other")}),
        (assistant_turn(card_block()), {"title": "Not what the client shows."}),
    ],
)
def test_a_blocks_hidden_metadata_cannot_override_what_a_vis_client_shows(turn, hidden):
    message = to_vis_message(turn)
    message["content"][0]["metadata"].update(hidden)
    with pytest.raises(InvalidVisMessage):
        from_vis_message(message)


def test_a_user_turns_hidden_metadata_cannot_carry_words_the_client_does_not_show():
    message = to_vis_message(
        user_turn(None, attachments=(AttachmentRef(attachment_id="att_1", media_type="image/png"),))
    )
    message["metadata"]["text"] = "Words no client shows."
    with pytest.raises(InvalidVisMessage):
        from_vis_message(message)


def test_vis_data_that_does_not_export_back_to_itself_is_an_invalid_vis_message():
    message = to_vis_message(full_turn())
    message["content"][0]["extra"] = "shown by a client, lost on import"
    with pytest.raises(InvalidVisMessage, match="export"):
        from_vis_message(message)


def test_a_free_text_limit_above_the_hard_cap_is_refused_on_import():
    card = seat_card()
    message = to_vis_message(assistant_turn(InteractionBlock.from_view(bid("c"), card.view())))
    message["content"][0]["options"][0]["max_len"] = FREEFORM_HARD_CAP + 1
    with pytest.raises(InvalidVisMessage):
        from_vis_message(message)


def test_an_unknown_block_whose_kind_is_not_a_string_is_an_invalid_vis_message():
    message = to_vis_message(assistant_turn(notice()))
    message["content"][0]["metadata"] = {
        "kind": ["poll"],
        "unknown": True,
        "raw": {"kind": ["poll"]},
    }
    with pytest.raises(InvalidVisMessage):
        from_vis_message(message)


def test_vis_data_not_exported_here_is_an_invalid_vis_message():
    with pytest.raises(InvalidVisMessage) as raised:
        from_vis_message({"id": "turn_1", "role": "assistant", "content": [{"id": "b"}]})
    assert raised.value.code == codes.EXPORT_INVALID_VIS


# --- Vis envelope ------------------------------------------------------------------------------


def test_a_vis_envelope_has_the_seeds_fields_and_every_block_a_status_and_metadata():
    message = to_vis_message(full_turn(), provider="openai", model="gpt-test")
    assert {
        k: message[k]
        for k in ("id", "role", "status", "created_at", "completed_at", "provider", "model")
    } == {
        "id": "turn_1",
        "role": "assistant",
        "status": "completed",
        "created_at": 1_000,
        "completed_at": 2_000,
        "provider": "openai",
        "model": "gpt-test",
    }
    assert [b["type"] for b in message["content"]] == [
        "notice",
        "notice",
        "prose",
        "attachment",
        "interaction",
    ]
    assert all(b["status"] == "completed" and "metadata" in b for b in message["content"])
    prose = message["content"][2]
    assert prose["markdown"] == "Here is where things stand."
    assert prose["metadata"]["author"] == "model"


def test_the_provider_and_model_keys_are_left_out_when_the_record_names_none():
    message = to_vis_message(full_turn())
    assert "provider" not in message and "model" not in message


def test_an_error_notice_is_a_vis_error_block_that_is_not_retryable():
    (block,) = to_vis_message(assistant_turn(notice(NoticeSeverity.ERROR)))["content"]
    assert block["type"] == "error" and block["retryable"] is False
    assert block["code"] == "turnframe.notice.nothing_submitted"


def seat_card():
    """A stored card whose option takes free text up to its own limit, 80."""
    return store_builders.card(
        "int_2",
        account="acct_1",
        conversation="conv_1",
        case=case(),
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(
            title="Which seat?",
            options=(
                InteractionOption(
                    option_id="opt_other",
                    label="Other",
                    action=ApplyOperation(operation="pick", freeform_argument="seat"),
                    freeform=FreeformOptional(max_len=80),
                ),
            ),
        ),
        created_at=1,
    )


def test_a_freeform_option_carries_its_cards_max_len_or_the_hard_cap():
    card = seat_card()
    turn = assistant_turn(InteractionBlock.from_view(bid("c"), card.view()))
    told = to_vis_message(turn, interactions=[card])["content"][0]["options"][0]
    assert told == {
        "id": "opt_other",
        "label": "Other",
        "style": "secondary",
        "freeform": "optional",
        "max_len": 80,
    }
    assert from_vis_message(to_vis_message(turn, interactions=[card])) == turn
    untold = to_vis_message(turn)["content"][0]["options"][0]
    assert untold["max_len"] == FREEFORM_HARD_CAP
    assert "max_len" not in to_vis_message(assistant_turn(card_block()))["content"][0]["options"][0]


def test_a_user_turn_is_a_vis_user_message_with_prose_attachment_and_answer_blocks():
    given = user_turn(
        "see attached",
        attachments=(
            AttachmentRef(
                attachment_id="att_1", media_type="image/png", filename="a.png", size_bytes=3
            ),
        ),
        interaction_response=InteractionResponse(
            interaction_id="int_1", option_id="opt_confirm", expected_case_revision=2
        ),
    )
    message = to_vis_message(given)
    assert message["role"] == "user" and message["created_at"] == 900
    assert [b["type"] for b in message["content"]] == [
        "prose",
        "interaction_response",
        "attachment",
    ]
    assert from_vis_message(message) == given


def test_a_stored_turn_round_trips_through_vis_byte_for_byte():
    turn = full_turn()
    back = from_vis_message(to_vis_message(turn))
    assert back == turn and back.to_stored_json() == turn.to_stored_json()


def test_an_unknown_stored_block_round_trips_through_vis_unchanged():
    stored = json.loads(assistant_turn(notice()).to_stored_json())
    stored["blocks"].append({"kind": "poll", "block_id": bid("p"), "question": "?"})
    turn = AssistantTurn.from_stored_json(json.dumps(stored))
    message = to_vis_message(turn)
    assert message["content"][-1]["type"] == "poll"
    assert from_vis_message(message).to_stored_json() == turn.to_stored_json()


def test_a_conversation_round_trips_through_vis_in_order():
    history = [user_turn(), full_turn()]
    assert from_vis(to_vis(history, llm={"turn_1": ("anthropic", "claude-test")})) == history


# --- Vis streaming events ----------------------------------------------------------------------


def turn_events(turn: AssistantTurn, mode: StreamMode) -> list:
    events: list = []
    sequence = 3
    for index, block in enumerate(turn.blocks):
        made = block_events(
            block, index, turn_id=turn.turn_id, first_sequence=sequence, at=5, mode=mode
        )
        events.extend(made)
        sequence += len(made)
    events.append(TurnCompleted(turn_id=turn.turn_id, sequence=sequence, at=5, turn=turn))
    return events


def test_vis_events_carry_a_numeric_cursor_and_started_carries_the_block():
    out = vis_events(turn_events(full_turn(), StreamMode.TOKENS))
    assert all(type(e["sequence"]) is int for e in out)
    started = [e for e in out if e["type"] == "content.block.started"]
    assert started[0]["block"]["type"] == "notice" and started[0]["block"]["status"] == "streaming"
    prose = started[2]["block"]
    assert prose["type"] == "prose" and prose["markdown"] == ""
    delta = next(e for e in out if e["type"] == "content.block.delta")
    assert set(delta) == {"type", "turn_id", "sequence", "block_id", "delta_index", "field", "text"}
    assert delta["field"] == "markdown"
    completed = next(e for e in out if e["type"] == "content.block.completed")
    assert set(completed) == {"type", "turn_id", "sequence", "block_id"}
    assert out[-1] == {
        "type": "turn.completed",
        "turn_id": "turn_1",
        "sequence": out[-1]["sequence"],
        "status": "completed",
    }


@pytest.mark.parametrize("mode", list(StreamMode))
def test_applying_the_vis_events_rebuilds_the_envelopes_content(mode):
    turn = full_turn()
    rebuilt = apply_vis_events(vis_events(turn_events(turn, mode)))
    assert rebuilt == to_vis_message(turn)["content"]


def test_a_replayed_delta_is_applied_once():
    out = vis_events(turn_events(full_turn(), StreamMode.TOKENS))
    delta = next(e for e in out if e["type"] == "content.block.delta")
    assert apply_vis_events([*out, delta]) == apply_vis_events(out)


def started_event(sequence: object = 1, **block: object) -> dict:
    shown = {"id": "b1", "type": "prose", "status": "streaming", "markdown": "", **block}
    return {
        "type": "content.block.started",
        "turn_id": "turn_1",
        "sequence": sequence,
        "index": 0,
        "block": shown,
    }


@pytest.mark.parametrize(
    "events",
    [
        [{"type": "content.block.started", "turn_id": "turn_1", "block": {"id": "b1"}}],
        [started_event("x")],
        [started_event(True)],
        ["not an event"],
        [started_event(id=None)],
        [{**started_event(), "block": "b1"}],
        [
            started_event(markdown=3),
            {
                "type": "content.block.delta",
                "sequence": 2,
                "block_id": "b1",
                "delta_index": 0,
                "field": "markdown",
                "text": "x",
            },
        ],
        [
            started_event(),
            {
                "type": "content.block.delta",
                "sequence": 2,
                "block_id": "b1",
                "delta_index": "0",
                "field": "markdown",
                "text": "x",
            },
        ],
        [
            started_event(),
            {
                "type": "content.block.delta",
                "sequence": 2,
                "block_id": "b1",
                "delta_index": 0,
                "field": "markdown",
                "text": 5,
            },
        ],
        [started_event(), {"type": "content.block.completed", "sequence": 2, "block_id": ["b1"]}],
        [started_event(), {"type": 7, "sequence": 2}],
    ],
)
def test_vis_events_of_the_wrong_shape_are_an_invalid_vis_message(events):
    with pytest.raises(InvalidVisMessage):
        apply_vis_events(events)


def test_a_forged_block_in_a_stream_is_not_exported():
    events = turn_events(assistant_turn(receipt_block()), StreamMode.WHOLE)
    started = events[0]
    forged = started.model_copy(update={"fields": {**started.fields, "event_ids": ["evt_x"]}})
    with pytest.raises(ForgedBlock):
        vis_events([forged])


# --- property: export, import, equal -------------------------------------------------------------

words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30
)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


@st.composite
def turns(draw):
    blocks: list = []
    for ids, code in draw(
        st.lists(
            st.tuples(st.lists(ident, min_size=1, max_size=3, unique=True), ident),
            max_size=2,
            unique_by=lambda t: t[1],
        )
    ):
        blocks.append(receipt_block(tuple("evt_" + i for i in ids), status_code=f"test.{code}"))
    for i in range(draw(st.integers(0, 2))):
        blocks.append(
            NoticeBlock(
                block_id=bid(f"n{i}"),
                code=f"turnframe.notice.n{i}",
                text=draw(words),
                severity=draw(st.sampled_from(list(NoticeSeverity))),
                copy_ref=copy_ref(),
            )
        )
    for i in range(draw(st.integers(0, 2))):
        blocks.append(AnswerBlock(block_id=bid(f"a{i}"), question_id=f"q{i}", text=draw(words)))
    transition = draw(st.sampled_from(["none", "model", "server", "moves"]))
    if transition == "model":
        blocks.append(TransitionBlock(block_id=bid("t"), text=draw(words)))
    elif transition == "server":
        blocks.append(
            TransitionBlock(
                block_id=bid("t"), author="server", text=draw(words), copy_ref=copy_ref()
            )
        )
    elif transition == "moves":
        blocks.append(
            TransitionBlock(
                block_id=bid("t"),
                text=draw(words),
                copy_ref=copy_ref(),
                moves=(Move(move="greet"),),
            )
        )
    if draw(st.booleans()):
        blocks.append(card_block())
    status = draw(st.sampled_from([s for s in TurnStatus if s.is_terminal]))
    turn = assistant_turn(
        *blocks,
        status=status,
        subjects=tuple(draw(st.lists(st.builds(lambda c: case(case_id=c), ident), max_size=2))),
    )
    if not draw(st.booleans()):
        return turn
    stored = json.loads(turn.to_stored_json())
    stored["blocks"].append({"kind": "poll", "block_id": bid("p"), "question": draw(words)})
    return AssistantTurn.from_stored_json(json.dumps(stored))


@settings(max_examples=80, deadline=None)
@given(turns())
def test_every_generated_turn_round_trips_through_vis(turn):
    back = from_vis_message(json.loads(json.dumps(to_vis_message(turn))))
    assert back == turn and back.to_stored_json() == turn.to_stored_json()


@settings(max_examples=80, deadline=None)
@given(turns())
def test_no_generated_turns_server_words_are_ever_assistant_text(turn):
    free = [
        b.text
        for b in turn.blocks
        if isinstance(b, AnswerBlock | TransitionBlock) and b.author == "model" and not b.moves
    ]
    chosen = [b for b in turn.blocks if isinstance(b, TransitionBlock) and b.moves]
    server_texts = {b.text for b in turn.blocks if isinstance(b, NoticeBlock)} | {
        b.text for b in turn.blocks if isinstance(b, TransitionBlock) and b.author == "server"
    }
    server_texts |= {b.text for b in chosen}
    texts = [
        b["text"]
        for message in anthropic_messages([turn])
        if message["role"] == "assistant"
        for b in message["content"]
        if b["type"] == "text"
    ]
    drafts = [t for t in texts if t not in free]
    assert [t for t in texts if t in free] == free
    assert [json.loads(d)["moves"] for d in drafts] == [[{"move": "greet"}]] * len(chosen)
    said = [
        m["content"]
        for m in openai_chat_messages([turn])
        if m["role"] == "assistant" and m["content"]
    ]
    assert said == (["\n\n".join(texts)] if texts else [])
    assert not (server_texts - set(free)) & set(texts)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | words | ident,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words | ident, inner, max_size=4),
    max_leaves=20,
)


def near_vis_messages():
    """Exported messages with one value replaced by arbitrary JSON, and arbitrary JSON."""

    @st.composite
    def mangled(draw):
        message = json.loads(json.dumps(to_vis_message(draw(turns()))))
        path, node = [], message
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
            path.append(key)
            node = node[key]
        if not path:
            return draw(json_values)
        parent = message
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = draw(json_values)
        return message

    return mangled() | json_values


@settings(max_examples=150, deadline=None)
@given(st.lists(near_vis_messages(), max_size=3) | json_values)
def test_arbitrary_json_read_as_vis_messages_is_refused_or_read_never_crashes(messages):
    with contextlib.suppress(InvalidVisMessage, ForgedBlock):
        from_vis(messages)


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values | st.builds(started_event, json_values), max_size=5) | json_values)
def test_arbitrary_json_read_as_vis_events_is_refused_or_applied_never_crashes(events):
    with contextlib.suppress(InvalidVisMessage):
        apply_vis_events(events)


def test_a_user_turn_as_the_store_returns_it_is_exported_like_the_cores_own():
    ours = user_turn()
    stored = UserTurnRecord(
        account_id="acct_1",
        conversation_id="conv_1",
        turn_id=ours.turn_id,
        received_at=ours.received_at,
        input=ours.input,
    )
    assert openai_chat_messages([stored, full_turn()]) == openai_chat_messages([ours, full_turn()])
    assert from_vis(to_vis([stored])) == [ours]


def test_a_schema_1_0_turns_server_copy_labelled_model_is_exported_as_server_written():
    stored = json.loads(assistant_turn(notice()).to_stored_json())
    del stored["schema_version"]
    stored["blocks"].append(
        {
            **model_prose("Nothing was sent.").model_dump(mode="json"),
            "copy_ref": copy_ref().model_dump(mode="json"),
        }
    )
    old = AssistantTurn.from_stored_json(json.dumps(stored))
    assert old.schema_version == "1.0"
    messages = openai_chat_messages([old])
    assert [m["role"] for m in messages] == ["assistant", "tool"]
    assert "Nothing was sent." in messages[1]["content"]
    assert from_vis_message(to_vis_message(old)).to_stored_json() == old.to_stored_json()

"""Every stable code Turnframe emits, as constants.

A code is a lowercase dotted string. It appears in notices, errors, metrics and logs alike and
never changes meaning once released. `ALL_CODES` lists them; a test checks they are unique and
well formed.
"""

from __future__ import annotations

#: the code of a `TurnframeError` that names none of its own
ERROR = "turnframe.error"

# --- notices (server-authored blocks) -----------------------------------------------------------
NOTICE_COMMAND_FAILED = "turnframe.notice.command_failed"
NOTICE_VERIFICATION_IN_PROGRESS = "turnframe.notice.verification_in_progress"
NOTICE_OUTCOME_UNCERTAIN = "turnframe.notice.outcome_uncertain"
NOTICE_RESULT_UNCONFIRMED = "turnframe.notice.result_unconfirmed"
NOTICE_REVISION_CONFLICT = "turnframe.notice.revision_conflict"
NOTICE_INTERACTION_UNAVAILABLE = "turnframe.notice.interaction_unavailable"
NOTICE_CASE_REFRESH_UNAVAILABLE = "turnframe.notice.case_refresh_unavailable"
NOTICE_INSTRUCTION_DECLINED = "turnframe.notice.instruction_declined"
NOTICE_NOTHING_SUBMITTED = "turnframe.notice.nothing_submitted"
NOTICE_NOTHING_DELETED = "turnframe.notice.nothing_deleted"
NOTICE_NO_EXTERNAL_EFFECTS = "turnframe.notice.no_external_effects"
NOTICE_PARTIAL_RESULT = "turnframe.notice.partial_result"
NOTICE_ACT_REFUSED = "turnframe.notice.act_refused"
NOTICE_ALREADY_ANSWERED = "turnframe.notice.already_answered"
NOTICE_NOT_UNDERSTOOD = "turnframe.notice.not_understood"
NOTICE_MESSAGE_UNREADABLE = "turnframe.notice.message_unreadable"
NOTICE_STALE_INTERACTION = "turnframe.notice.stale_interaction"
NOTICE_INTERACTION_CLOSED = "turnframe.notice.interaction_closed"
NOTICE_TURN_INTERRUPTED = "turnframe.notice.turn_interrupted"

# --- claim guard violations ---------------------------------------------------------------------
CLAIM_RECEIPT_WITHOUT_EVENTS = "turnframe.claim.receipt_without_events"
CLAIM_DUPLICATE_RECEIPT_ID = "turnframe.claim.duplicate_receipt_id"
CLAIM_UNBACKED_OUTCOME = "turnframe.claim.unbacked_operational_outcome"
CLAIM_INTERACTION_NOT_IN_TURN = "turnframe.claim.interaction_not_in_turn"
CLAIM_VIOLATION = "turnframe.claim.violation"
# the wording guard: a model-written sentence claims what no block of the turn backs
CLAIM_PROSE_CREATION = "turnframe.claim.prose_creation"
CLAIM_PROSE_UPDATE = "turnframe.claim.prose_update"
CLAIM_PROSE_DELETION = "turnframe.claim.prose_deletion"
CLAIM_PROSE_SUBMISSION = "turnframe.claim.prose_submission"
CLAIM_PROSE_ACCEPTANCE = "turnframe.claim.prose_acceptance"
CLAIM_PROSE_DELIVERY = "turnframe.claim.prose_delivery"
CLAIM_PROSE_COMPLETION = "turnframe.claim.prose_completion"
CLAIM_PROSE_INTERACTION_VISIBILITY = "turnframe.claim.prose_interaction_visibility"
CLAIM_PROSE_FUTURE_NOTIFICATION = "turnframe.claim.prose_future_notification"
CLAIM_UNKNOWN_ID = "turnframe.claim.unknown_id"
CLAIM_UNJUDGED_LANGUAGE = "turnframe.claim.unjudged_language"
#: free prose names a value (a number, date, time, amount, code, email, name) the turn's facts,
#: blocks and the user's words do not hold
CLAIM_UNGROUNDED_VALUE = "turnframe.claim.ungrounded_value"
#: text the rules cannot read as a person would (hidden characters, markup, another script)
CLAIM_UNREADABLE_TEXT = "turnframe.claim.unreadable_text"
#: an independent claim review refused a model-written block
CLAIM_REVIEW_FAILED = "turnframe.claim.review_failed"

# --- structured narration: a narrator's moves the server will not render ---------------------
#: the draft writes words of its own (structured mode renders only moves)
NARRATION_FREE_TEXT = "turnframe.narration.free_text"
NARRATION_UNKNOWN_MOVE = "turnframe.narration.unknown_move"
#: a known move this turn does not offer (e.g. `explain` with no card shown)
NARRATION_MOVE_NOT_OFFERED = "turnframe.narration.move_not_offered"
#: a move names a block, fact, obligation, operation or option this turn does not hold
NARRATION_REF_NOT_IN_TURN = "turnframe.narration.ref_not_in_turn"
NARRATION_VARIANT_OUT_OF_RANGE = "turnframe.narration.variant_out_of_range"
#: the turn's locale has no copy that renders the move
NARRATION_COPY_MISSING = "turnframe.narration.copy_missing"
#: the draft is not one draft of moves of its kind
NARRATION_BAD_SHAPE = "turnframe.narration.bad_shape"

# --- blocks, authorship and turns ---------------------------------------------------------------
AUTHORSHIP_FORBIDDEN_KIND = "turnframe.authorship.forbidden_kind"
AUTHORSHIP_MALFORMED_OUTPUT = "turnframe.authorship.malformed_output"
BLOCK_INVALID = "turnframe.block.invalid"
TURN_TERMINAL_STATUS = "turnframe.turn.terminal_status"
TURN_INVALID_INPUT = "turnframe.turn.invalid_input"
TURN_UNSUPPORTED_SCHEMA_VERSION = "turnframe.turn.unsupported_schema_version"

# --- export (turnframe_core.export) -------------------------------------------------------------
#: a block that could not have come from the runtime is never exported (nor imported)
EXPORT_FORGED_BLOCK = "turnframe.export.forged_block"
#: Vis data that is not a message this library exported
EXPORT_INVALID_VIS = "turnframe.export.invalid_vis"

# --- canonical JSON and ids ---------------------------------------------------------------------
CANONICAL_UNREPRESENTABLE = "turnframe.canonical.unrepresentable"
ID_INVALID = "turnframe.id.invalid"

# --- evaluation (`turnframe eval`) --------------------------------------------------------------
EVAL_CORPUS_INVALID = "turnframe.eval.corpus_invalid"

# --- commands and policy ------------------------------------------------------------------------
POLICY_ALLOWED = "turnframe.policy.allowed"
POLICY_TRUSTED_ORIGIN_REQUIRED = "turnframe.policy.trusted_origin_required"
POLICY_HUMAN_REVIEW_REQUIRED = "turnframe.policy.human_review_required"
COMMAND_IDEMPOTENCY_KEY_MISMATCH = "turnframe.command.idempotency_key_mismatch"
COMMAND_SCOPE_VIOLATION = "turnframe.command.scope_violation"

# --- interactions -------------------------------------------------------------------------------
INTERACTION_NOT_FOUND = "turnframe.interaction.not_found"
INTERACTION_ALREADY_ANSWERED = "turnframe.interaction.already_answered"
INTERACTION_NOT_ACTIVE = "turnframe.interaction.not_active"
INTERACTION_EXPIRED = "turnframe.interaction.expired"
INTERACTION_UNKNOWN_OPTION = "turnframe.interaction.unknown_option"
INTERACTION_STALE = "turnframe.interaction.stale"
INTERACTION_FREEFORM_NOT_ALLOWED = "turnframe.interaction.freeform_not_allowed"
INTERACTION_FREEFORM_REQUIRED = "turnframe.interaction.freeform_required"
INTERACTION_FREEFORM_TOO_LONG = "turnframe.interaction.freeform_too_long"
INTERACTION_PAYLOAD_CORRUPT = "turnframe.interaction.payload_corrupt"
INTERACTION_ILLEGAL_TRANSITION = "turnframe.interaction.illegal_transition"
INTERACTION_INVALID_SPEC = "turnframe.interaction.invalid_spec"

# --- workflow view invariants -------------------------------------------------------------------
WORKFLOW_DUPLICATE_OBLIGATION = "turnframe.workflow.duplicate_obligation"
WORKFLOW_MISSING_BLOCKING_INTERACTION = "turnframe.workflow.missing_blocking_interaction"
WORKFLOW_BLOCKING_ON_NON_USER_PHASE = "turnframe.workflow.blocking_interaction_on_non_user_phase"
WORKFLOW_NON_BLOCKING_IN_BLOCKING_SLOT = (
    "turnframe.workflow.non_blocking_requirement_in_blocking_slot"
)
WORKFLOW_OUTCOME_ON_NON_TERMINAL_PHASE = "turnframe.workflow.outcome_on_non_terminal_phase"
WORKFLOW_TERMINAL_WITHOUT_OUTCOME = "turnframe.workflow.terminal_phase_without_outcome"
WORKFLOW_OUTCOME_WITH_OBLIGATIONS = "turnframe.workflow.outcome_with_obligations"
WORKFLOW_INVARIANT_VIOLATION = "turnframe.workflow.invariant_violation"

# --- understanding (model proposals) ------------------------------------------------------------
UNDERSTANDING_REJECTED = "turnframe.understanding.rejected"
UNDERSTANDING_UNKNOWN_OPERATION = "turnframe.understanding.unknown_operation"
UNDERSTANDING_UNKNOWN_HANDLE = "turnframe.understanding.unknown_handle"
UNDERSTANDING_UNKNOWN_ARGUMENT = "turnframe.understanding.unknown_argument"
UNDERSTANDING_EVIDENCE_NOT_IN_TEXT = "turnframe.understanding.evidence_not_in_text"
UNDERSTANDING_UNKNOWN_INTERACTION = "turnframe.understanding.unknown_interaction"
UNDERSTANDING_UNKNOWN_OPTION = "turnframe.understanding.unknown_option"
UNDERSTANDING_DUPLICATE_ID = "turnframe.understanding.duplicate_id"
UNDERSTANDING_DANGLING_REFERENCE = "turnframe.understanding.dangling_reference"
UNDERSTANDING_UNFIT_VALUE = "turnframe.understanding.unfit_value"
UNDERSTANDING_VALUE_NOT_GROUNDED = "turnframe.understanding.value_not_grounded"
UNDERSTANDING_VALUE_NOT_PARSED = "turnframe.understanding.value_not_parsed"

# --- execution (domain executor outcomes) -----------------------------------------------------
EXECUTION_REVISION_CONFLICT = "turnframe.execution.revision_conflict"
EXECUTION_REJECTED = "turnframe.execution.rejected"
EXECUTION_TIMEOUT = "turnframe.execution.timeout"
EXECUTION_FAILED = "turnframe.execution.failed"
EXECUTION_DECLINED = "turnframe.execution.declined"
EXECUTION_CARD_INVALIDATED = "turnframe.execution.card_invalidated"
EXECUTION_UNTRUSTED_RESULT = "turnframe.execution.untrusted_result"
#: reconciliation: the executor holds no effect for the key, and never will
EXECUTION_NOT_APPLIED = "turnframe.execution.not_applied"
#: the executor does not tell what became of a command (`Executor.outcome` not overridden)
EXECUTION_OUTCOME_UNTOLD = "turnframe.execution.outcome_untold"

# --- runtime ------------------------------------------------------------------------------------
RUNTIME_TURN_IN_PROGRESS = "turnframe.runtime.turn_in_progress"
RUNTIME_MISSING_COPY = "turnframe.runtime.missing_copy"
#: a template that exists could not render with its parameters (the caller fell back)
COPY_RENDER_FAILED = "turnframe.copy.render_failed"
RUNTIME_UNKNOWN_WORKFLOW = "turnframe.runtime.unknown_workflow"
RUNTIME_TURN_FAILED = "turnframe.runtime.turn_failed"
RUNTIME_STORES_WITHOUT_TRANSACTIONS = "turnframe.runtime.stores_without_transactions"
RUNTIME_IDEMPOTENCY_KEY_REUSED = "turnframe.runtime.idempotency_key_reused"
RUNTIME_REVIEWER_REQUIRED = "turnframe.runtime.reviewer_required"
RUNTIME_TURN_INTERRUPTED = "turnframe.runtime.turn_interrupted"
RUNTIME_CONVERSATION_BUSY = "turnframe.runtime.conversation_busy"

OPERATION_NOT_PROPOSABLE = "turnframe.operation.not_proposable"

# --- targets ------------------------------------------------------------------------------------
TARGET_MISSING = "turnframe.target.missing"

# --- case lookup --------------------------------------------------------------------------------
# case lookup: a case found by a reference the user names (decision 0033)
#: no case of that kind and reference this account may reach; another account's record and a
#: record that does not exist answer with this same code
CASE_LOOKUP_NOT_FOUND = "turnframe.case_lookup.not_found"
#: the reference does not have the form its workflow declares; nothing was looked up
CASE_LOOKUP_MALFORMED_REFERENCE = "turnframe.case_lookup.malformed_reference"
#: the conversation made as many lookups as its window allows; nothing was looked up
CASE_LOOKUP_RATE_LIMITED = "turnframe.case_lookup.rate_limited"
#: an understanding names a kind of record its brief did not offer
UNDERSTANDING_UNKNOWN_RECORD = "turnframe.understanding.unknown_record"

# --- replay -------------------------------------------------------------------------------------
REPLAY_CHAIN_BROKEN = "turnframe.replay.chain_broken"
#: audit chain findings (turnframe_core.audit_chain)
AUDIT_RECORD_ALTERED = "turnframe.audit.record_altered"
AUDIT_RECORD_MISSING = "turnframe.audit.record_missing"
AUDIT_RECORD_UNLINKED = "turnframe.audit.record_unlinked"
AUDIT_LINK_ALTERED = "turnframe.audit.link_altered"
AUDIT_LINK_MISSING = "turnframe.audit.link_missing"
AUDIT_LINK_OUT_OF_ORDER = "turnframe.audit.link_out_of_order"

# --- erasure (runtime.erase, runtime.export_subject) --------------------------------------------
#: the account holds no such subject (also when another account does: nothing is revealed)
ERASURE_UNKNOWN_SUBJECT = "turnframe.erasure.unknown_subject"
#: the subject or account is not a well-formed id
ERASURE_INVALID_SUBJECT = "turnframe.erasure.invalid_subject"

# --- stream -------------------------------------------------------------------------------------
STREAM_EXPIRED = "turnframe.stream.expired"
STREAM_INTERRUPTED = "turnframe.stream.interrupted"
STREAM_INVALID_LAST_EVENT_ID = "turnframe.stream.invalid_last_event_id"
STREAM_TOO_MANY_FOLLOWERS = "turnframe.stream.too_many_followers"

# --- understanding (continued) ------------------------------------------------------------------
UNDERSTANDING_UNKNOWN_WORKFLOW = "turnframe.understanding.unknown_workflow"
UNDERSTANDING_DUPLICATE_ARGUMENT = "turnframe.understanding.duplicate_argument"

# --- outbox -------------------------------------------------------------------------------------
#: a destination's answer could not be recorded (a code or reference no store can hold, or a
#: workflow's `external_answer` that raised): the row ends `failed`, the user is told once
OUTBOX_ANSWER_UNRECORDABLE = "turnframe.outbox.answer_unrecordable"
#: an attempt still ran when its claim's lease ended: its actor stopped waiting for it
OUTBOX_ATTEMPT_OVERRAN = "turnframe.outbox.attempt_overran"

# --- providers ----------------------------------------------------------------------------------
#: a failure whose own code is not one of the library's (a provider's, an adopter's: it may
#: echo anything, so it is never shown)
PROVIDER_ERROR = "turnframe.provider.error"
#: a model did not answer in time
MODEL_TIMEOUT = "turnframe.model.timeout"
#: a provider refused the call for its rate or quota limits
MODEL_RATE_LIMITED = "turnframe.model.rate_limited"
#: a model declined to answer (a refusal or a content filter)
MODEL_REFUSED = "turnframe.model.refused"
#: a model's answer was cut off at its output limit
MODEL_TRUNCATED = "turnframe.model.truncated"
#: a provider refused the call's credentials (401, 403): a wrong, revoked or unpermitted key
MODEL_UNAUTHORIZED = "turnframe.model.unauthorized"
#: a provider could not be reached or failed (a connection, a server or a client error)
MODEL_UNAVAILABLE = "turnframe.model.unavailable"
#: a model adapter was built without its extra installed (`turnframe[openai]`, ...)
MODEL_MISSING_EXTRA = "turnframe.model.missing_extra"
#: a model adapter was built without an API key (given, or in its environment variable)
MODEL_MISSING_API_KEY = "turnframe.model.missing_api_key"

# --- server events ------------------------------------------------------------------------------
#: an event named an origin the runtime does not know, or its signature did not verify
SERVER_EVENT_ORIGIN_NOT_VERIFIED = "turnframe.server_event.origin_not_verified"
#: the domain refused the event's operation on its case (or no origin could authorize it)
SERVER_EVENT_REFUSED = "turnframe.server_event.refused"

# --- store --------------------------------------------------------------------------------------
STORE_ERROR = "turnframe.store.error"
STORE_NOT_FOUND = "turnframe.store.not_found"
STORE_CONFLICT = "turnframe.store.conflict"
STORE_INVALID_RECORD = "turnframe.store.invalid_record"
STORE_TIMEOUT = "turnframe.store.timeout"
STORE_UNAVAILABLE = "turnframe.store.unavailable"
STORE_CORRUPT = "turnframe.store.corrupt"
STORE_BUSY = "turnframe.store.busy"
STORE_MISSING_ROLE = "turnframe.store.missing_role"
STORE_NO_SNAPSHOT = "turnframe.store.no_snapshot"
STORE_MISSING_EXTRA = "turnframe.store.missing_extra"
STORE_INVALID_DATABASE_URL = "turnframe.store.invalid_database_url"
STORE_FOREIGN_EVENT_LOOP = "turnframe.store.foreign_event_loop"


# --- http ---------------------------------------------------------------------------------------
#: the request carries no account the adopter's `authenticate` hook accepts
HTTP_UNAUTHENTICATED = "turnframe.http.unauthenticated"
#: the request cannot be read at all (a body that is not JSON, a bad `mode` or `limit`)
HTTP_MALFORMED_REQUEST = "turnframe.http.malformed_request"
#: the body is larger than `HttpLimits.max_body_bytes`; it was not read to its end
HTTP_BODY_TOO_LARGE = "turnframe.http.body_too_large"
#: the body nests arrays or objects deeper than `HttpLimits.max_depth`; it was not parsed
HTTP_BODY_TOO_DEEP = "turnframe.http.body_too_deep"


def _collect() -> tuple[str, ...]:
    return tuple(
        value
        for name, value in sorted(globals().items())
        if name.isupper() and isinstance(value, str) and value.startswith("turnframe.")
    )


ALL_CODES: tuple[str, ...] = _collect()
_KNOWN: frozenset[str] = frozenset(ALL_CODES)


def code_of(failure: BaseException, default: str | None = None) -> str:
    """How a failure may be named outside the process (a metric label, a span's status, a log
    field, the replay record, a stream's `turn.failed`): its code when that is one of the
    library's own (`ALL_CODES`); a code of any other origin, which may echo a user's words, as
    `default` or else `PROVIDER_ERROR`; a failure without a text code (none, or an HTTP
    library's number) as `default` or else its type."""
    code = getattr(failure, "code", None)
    if isinstance(code, str) and code in _KNOWN:
        return code
    if default is not None:
        return default
    return PROVIDER_ERROR if isinstance(code, str) and code else type(failure).__name__

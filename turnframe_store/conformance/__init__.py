"""The store conformance suite: named checks every implementation of the store roles passes.

    report = await run_all(factory)   # factory() -> Awaitable[Stores]; a fresh store per check
    assert report.passed, report.describe()

Each check is a plain `async def check_<sentence>(stores)` that uses only the roles' public methods,
so any implementation (memory, SQLite, PostgreSQL, an adopter's own) runs the same suite. A failed
expectation raises `AssertionError`; `run_all` and `run_check` record it and never raise.
The checks choose every time they pass in (`created_at`, `now`, …); the store clock is never
assumed, so a store stamping lifecycle times with the wall clock passes too.

The checks live in one module per section (`turns`, `stream`, `interactions`, `journal`,
`events`, `outbox`, `timers`, `replay`, `erasure`, `ordering`, `bundle`, `arguments`,
`transactions`);
`CHECKS` lists them all, in that order.
"""

from typing import Final

from turnframe_store.conformance.arguments import (
    check_a_limit_is_a_whole_number_from_one_to_the_maximum,
    check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_reader,
    check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_writer,
    check_times_and_revisions_are_whole_numbers_in_their_range,
)
from turnframe_store.conformance.bundle import (
    check_a_commit_bundle_accepts_a_turn_and_journals_its_commands_once,
    check_a_commit_bundle_applies_its_items_in_the_normative_order,
    check_a_commit_bundle_stores_the_assistant_turn_once,
    check_a_commit_bundle_with_an_invalid_item_writes_nothing,
    check_each_bundle_item_is_judged_on_the_state_its_own_stage_left,
)
from turnframe_store.conformance.erasure import (
    check_a_running_turn_keeps_its_words_and_a_foreign_one_is_not_found,
    check_erasing_a_turn_rewrites_its_words_and_keeps_its_digests,
    check_the_retention_sweep_lists_final_turns_still_holding_words_oldest_first,
)
from turnframe_store.conformance.events import (
    check_a_duplicate_event_id_appends_nothing,
    check_case_history_is_read_since_a_revision,
    check_events_append_in_order_and_read_back_by_id,
    check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows,
)
from turnframe_store.conformance.interactions import (
    check_a_blocking_card_is_replaced_only_while_it_is_active,
    check_a_second_open_blocking_card_for_a_case_is_a_conflict,
    check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted,
    check_interaction_payloads_are_immutable,
    check_revision_invalidation_spares_revision_independent_cards,
    check_the_expiry_sweep_expires_only_due_active_cards,
)
from turnframe_store.conformance.journal import (
    check_a_reused_idempotency_key_with_a_different_command_is_refused,
    check_a_settled_journal_entry_is_replayed_not_readmitted,
    check_journal_admission_is_fresh_exactly_once_per_key_under_interleaving,
    check_journal_completion_is_compare_and_swap,
)
from turnframe_store.conformance.ordering import (
    check_another_accounts_records_are_not_found_exactly_like_missing_ones,
    check_lists_follow_their_named_sort_keys,
    check_store_errors_carry_their_stable_codes,
)
from turnframe_store.conformance.outbox import (
    check_a_begun_attempt_holds_its_claim_a_lease_from_its_start,
    check_a_rescheduled_outbox_row_waits_until_it_is_due,
    check_a_workers_claims_in_flight_are_counted,
    check_an_attempt_begins_once,
    check_an_outbox_row_is_claimed_by_one_worker_only,
    check_an_unused_claim_is_handed_back_without_counting_an_attempt,
    check_only_the_claims_own_attempt_settles_it,
    check_outbox_enqueue_refuses_duplicates_and_non_pending_rows,
    check_the_reaper_records_that_a_begun_attempt_never_answered,
    check_the_reaper_releases_expired_claims,
    check_unknown_outcomes_are_leased_to_one_reconciler_at_a_time,
)
from turnframe_store.conformance.replay import (
    check_a_commit_bundle_links_the_record_it_makes_final,
    check_a_record_is_linked_into_its_conversations_chain_once_when_final,
    check_a_replay_record_is_upserted_until_its_phase_is_terminal,
    check_an_auditor_finds_the_accounts_of_a_token_and_of_a_conversation,
)
from turnframe_store.conformance.runner import (
    Check,
    CheckResult,
    ConformanceReport,
    NotOffered,
    StoresFactory,
    all_checks,
    run_all,
    run_check,
    run_one,
)
from turnframe_store.conformance.stream import (
    check_a_commit_bundle_logs_its_stream_events_after_its_assistant_turn,
    check_a_different_event_at_a_logged_sequence_is_a_conflict,
    check_a_logged_stream_event_repeated_unchanged_is_accepted_and_not_logged_again,
    check_a_stream_event_that_leaves_a_gap_is_a_conflict,
    check_a_stream_is_logged_only_beside_its_user_turn,
    check_a_stream_is_read_after_a_sequence_at_most_limit_events_at_a_time,
    check_an_invalid_stream_batch_is_refused_and_writes_nothing,
    check_another_accounts_stream_is_invisible,
    check_nothing_is_logged_after_a_terminal_event,
    check_stream_events_are_logged_in_order_and_read_back_equal,
    check_the_prune_sweep_deletes_only_logs_that_ended_before_the_cutoff,
    check_the_prune_sweep_keeps_the_log_of_a_turn_that_has_not_ended,
    check_the_stream_tail_is_the_last_logged_event,
)
from turnframe_store.conformance.timers import (
    check_a_claim_whose_lease_ran_out_is_claimed_again,
    check_a_conversations_timers_are_listed_by_due_time,
    check_a_due_timer_is_claimed_by_one_worker_only,
    check_a_timer_is_cancelled_until_it_fires,
    check_a_timer_is_scheduled_once_and_another_under_its_id_is_a_conflict,
    check_another_accounts_timers_are_not_found_exactly_like_missing_ones,
    check_only_the_claiming_worker_marks_a_timer_fired,
    check_timer_arguments_are_refused_before_anything_is_written,
)
from turnframe_store.conformance.transactions import (
    check_a_failed_call_dooms_its_transaction_even_when_caught,
    check_a_failed_savepoint_undoes_only_its_own_writes,
    check_a_snapshot_reads_one_moment_and_writes_nothing,
    check_a_transaction_commits_its_writes_together_and_sees_them_inside,
    check_a_transaction_whose_block_raises_leaves_nothing,
    check_nobody_else_sees_an_open_transactions_writes,
)
from turnframe_store.conformance.turns import (
    check_a_user_turn_is_recorded_once_with_its_received_phase,
    check_an_assistant_turn_is_written_once_and_reloads_identical,
    check_recent_turns_are_the_last_replies_oldest_first,
    check_the_feed_reads_a_conversations_replies_in_commit_order_after_a_position,
    check_the_phase_marker_never_leaves_a_terminal_phase,
    check_unfinished_turns_are_listed_after_an_interruption,
)

__all__ = [
    "CHECKS",
    "Check",
    "CheckResult",
    "ConformanceReport",
    "NotOffered",
    "StoresFactory",
    "run_all",
    "run_check",
    "run_one",
    # turns
    "check_a_user_turn_is_recorded_once_with_its_received_phase",
    "check_an_assistant_turn_is_written_once_and_reloads_identical",
    "check_the_phase_marker_never_leaves_a_terminal_phase",
    "check_unfinished_turns_are_listed_after_an_interruption",
    "check_recent_turns_are_the_last_replies_oldest_first",
    "check_the_feed_reads_a_conversations_replies_in_commit_order_after_a_position",
    # stream
    "check_stream_events_are_logged_in_order_and_read_back_equal",
    "check_a_stream_is_read_after_a_sequence_at_most_limit_events_at_a_time",
    "check_the_stream_tail_is_the_last_logged_event",
    "check_a_logged_stream_event_repeated_unchanged_is_accepted_and_not_logged_again",
    "check_a_different_event_at_a_logged_sequence_is_a_conflict",
    "check_a_stream_event_that_leaves_a_gap_is_a_conflict",
    "check_nothing_is_logged_after_a_terminal_event",
    "check_an_invalid_stream_batch_is_refused_and_writes_nothing",
    "check_a_stream_is_logged_only_beside_its_user_turn",
    "check_another_accounts_stream_is_invisible",
    "check_the_prune_sweep_deletes_only_logs_that_ended_before_the_cutoff",
    "check_the_prune_sweep_keeps_the_log_of_a_turn_that_has_not_ended",
    "check_a_commit_bundle_logs_its_stream_events_after_its_assistant_turn",
    # interactions
    "check_a_second_open_blocking_card_for_a_case_is_a_conflict",
    "check_a_blocking_card_is_replaced_only_while_it_is_active",
    "check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted",
    "check_interaction_payloads_are_immutable",
    "check_revision_invalidation_spares_revision_independent_cards",
    "check_the_expiry_sweep_expires_only_due_active_cards",
    # journal
    "check_journal_admission_is_fresh_exactly_once_per_key_under_interleaving",
    "check_a_settled_journal_entry_is_replayed_not_readmitted",
    "check_a_reused_idempotency_key_with_a_different_command_is_refused",
    "check_journal_completion_is_compare_and_swap",
    # events
    "check_events_append_in_order_and_read_back_by_id",
    "check_a_duplicate_event_id_appends_nothing",
    "check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows",
    "check_case_history_is_read_since_a_revision",
    # outbox
    "check_outbox_enqueue_refuses_duplicates_and_non_pending_rows",
    "check_an_outbox_row_is_claimed_by_one_worker_only",
    "check_a_rescheduled_outbox_row_waits_until_it_is_due",
    "check_an_unused_claim_is_handed_back_without_counting_an_attempt",
    "check_an_attempt_begins_once",
    "check_the_reaper_records_that_a_begun_attempt_never_answered",
    "check_a_workers_claims_in_flight_are_counted",
    "check_a_begun_attempt_holds_its_claim_a_lease_from_its_start",
    "check_only_the_claims_own_attempt_settles_it",
    "check_unknown_outcomes_are_leased_to_one_reconciler_at_a_time",
    "check_the_reaper_releases_expired_claims",
    # timers
    "check_a_timer_is_scheduled_once_and_another_under_its_id_is_a_conflict",
    "check_a_conversations_timers_are_listed_by_due_time",
    "check_another_accounts_timers_are_not_found_exactly_like_missing_ones",
    "check_a_due_timer_is_claimed_by_one_worker_only",
    "check_a_claim_whose_lease_ran_out_is_claimed_again",
    "check_only_the_claiming_worker_marks_a_timer_fired",
    "check_a_timer_is_cancelled_until_it_fires",
    "check_timer_arguments_are_refused_before_anything_is_written",
    # replay
    "check_a_replay_record_is_upserted_until_its_phase_is_terminal",
    "check_a_record_is_linked_into_its_conversations_chain_once_when_final",
    "check_a_commit_bundle_links_the_record_it_makes_final",
    "check_an_auditor_finds_the_accounts_of_a_token_and_of_a_conversation",
    # erasure
    "check_erasing_a_turn_rewrites_its_words_and_keeps_its_digests",
    "check_a_running_turn_keeps_its_words_and_a_foreign_one_is_not_found",
    "check_the_retention_sweep_lists_final_turns_still_holding_words_oldest_first",
    # ordering
    "check_lists_follow_their_named_sort_keys",
    "check_another_accounts_records_are_not_found_exactly_like_missing_ones",
    "check_store_errors_carry_their_stable_codes",
    # bundle
    "check_a_commit_bundle_applies_its_items_in_the_normative_order",
    "check_a_commit_bundle_with_an_invalid_item_writes_nothing",
    "check_each_bundle_item_is_judged_on_the_state_its_own_stage_left",
    "check_a_commit_bundle_accepts_a_turn_and_journals_its_commands_once",
    "check_a_commit_bundle_stores_the_assistant_turn_once",
    # arguments
    "check_a_limit_is_a_whole_number_from_one_to_the_maximum",
    "check_times_and_revisions_are_whole_numbers_in_their_range",
    "check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_reader",
    "check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_writer",
    # transactions
    "check_a_transaction_commits_its_writes_together_and_sees_them_inside",
    "check_a_transaction_whose_block_raises_leaves_nothing",
    "check_a_failed_call_dooms_its_transaction_even_when_caught",
    "check_nobody_else_sees_an_open_transactions_writes",
    "check_a_failed_savepoint_undoes_only_its_own_writes",
    "check_a_snapshot_reads_one_moment_and_writes_nothing",
]

#: Every check, in the order `run_all` runs them.
CHECKS: Final[tuple[str, ...]] = all_checks()

"""Runtime configuration (conservative defaults)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from turnframe_core.wording import DEFAULT_GUARD, GuardConfig

__all__ = ["OutboxConfig", "RuntimeConfig"]


@dataclass(frozen=True)
class RuntimeConfig:
    """How a runtime behaves where the design leaves a choice.

    - `locales`: the languages served; the runtime refuses to start while server copy lacks any.
    - `restore_card_after_failed_command`: a card whose command failed becomes answerable again
      (True) or ends `failed` (False).
    - `max_selection_candidates`: a selection card lists at most this many cases.
    - `conversation_wait_ms`: how long a turn waits for the turn before it in the same
      conversation to end (turns of one conversation never interleave); past it the turn is
      refused with `ConversationBusy`, having written nothing.
    - `stream_retention_ms`: how long a finished turn's stream log stays readable by
      `resume_stream` (`prune_streams` deletes older ones).
    - `turn_retention_ms`: how long a finished turn keeps its words (None, the default: as long
      as the store keeps it). Older turns are erased by `erase_expired`, which `turnframe
      worker` runs with each recovery sweep: the same erasure as `erase` (decision 0032), so
      their audit still verifies.
    - `stream_poll_ms`: how often a reader following a turn that runs in another process reads
      its log again (a turn running in this process wakes its readers at once); while the log
      stays still the wait doubles, up to `stream_poll_max_ms`.
    - `stream_followers_per_turn`: how many readers may follow one turn's stream at a time in
      this process; one more is refused with `TooManyFollowers`.
    - `feed_followers_per_conversation`: how many readers may follow one conversation's feed
      (`follow_conversation`) at a time in this process; one more is refused with
      `TooManyFollowers`. They share one reader of the store, so the bound is on memory and
      wake-ups, not on queries.
    - `stream_every_turn`: log the stream of every turn, `handle_turn`'s and the outbox's
      follow-up turns too, so any turn can be followed and resumed. False (the default, decision
      0028) logs only the turns `stream_turn` runs: a turn nobody streams writes no log (on
      PostgreSQL the log costs a fifth to a third of the turns per second:
      benchmarks/stream_log.py).
    - `narration`: how a narrator's prose is made (decision 0022). `"structured"` (the default):
      the narrator chooses moves and the server renders each through its own copy, so nothing a
      model wrote is shown. `"free"`: the narrator writes text, shown when an explicitly passed
      `ClaimReviewer` passes it and every value in it is grounded in the turn.
    - `timer_lease_ms`: how long a worker's claim on a due timer lasts (`fire_due_events`);
      a timer whose worker died holding it is claimed again once the lease ran out, and its
      event meets the turn the first claim began (so a lease shorter than a turn takes only
      costs a wasted wait, never a second effect). It is also how old an unfinished event
      turn must be before a repeat of its event finishes it (younger: `TurnInProgress`, since
      another process may be running it). `timer_poll_ms`: how often `turnframe worker` looks
      for due timers.
    - `guard`: how the wording guard reads free prose's languages (`GuardConfig`: ordinary
      words to add per language, the shortest text judged foreign, languages whose language
      check is off); its claim rules and value grounding always run.
    - `lookups_per_conversation`, `lookup_window_ms`: a conversation may look up at most this
      many records the user names (`Workflow.nameable`) in any window of this length; one more
      is refused with `turnframe.case_lookup.rate_limited`. Counted in this process (decision
      0033).
    """

    locales: tuple[str, ...] = ("en",)
    restore_card_after_failed_command: bool = True
    max_selection_candidates: int = 5
    conversation_wait_ms: int = 10_000
    stream_retention_ms: int = 7 * 24 * 3_600_000
    turn_retention_ms: int | None = None
    stream_poll_ms: int = 250
    stream_poll_max_ms: int = 5_000
    stream_followers_per_turn: int = 256
    feed_followers_per_conversation: int = 64
    stream_every_turn: bool = False
    narration: Literal["structured", "free"] = "structured"
    guard: GuardConfig = DEFAULT_GUARD
    timer_lease_ms: int = 60_000
    timer_poll_ms: int = 1_000
    lookups_per_conversation: int = 10
    lookup_window_ms: int = 600_000

    def __post_init__(self) -> None:
        if self.narration not in ("structured", "free"):
            raise ValueError('RuntimeConfig.narration is "structured" or "free"')
        if not isinstance(self.guard, GuardConfig):
            raise ValueError("RuntimeConfig.guard is a GuardConfig")
        _at_least_one(
            self,
            "stream_retention_ms",
            "stream_poll_ms",
            "stream_poll_max_ms",
            "stream_followers_per_turn",
            "feed_followers_per_conversation",
            "timer_lease_ms",
            "timer_poll_ms",
            "lookups_per_conversation",
            "lookup_window_ms",
        )
        if self.turn_retention_ms is not None:
            _at_least_one(self, "turn_retention_ms")


@dataclass(frozen=True)
class OutboxConfig:
    """How outbox rows are carried out (DESIGN §7).

    - `backoff_initial_ms`, `backoff_max_ms`, `max_attempts`: a retryable failure is sent again
      after `backoff_initial_ms`, doubling up to `backoff_max_ms`; the `max_attempts`-th failure
      is final. An attempt is a claim whose message left for a worker.
    - `send_timeout_ms`: a sender that has not answered by then has an unknown outcome (never
      sent again blindly: reconciliation settles it).
    - `reconcile_after_ms`: how long after an unknown outcome (and between tries) reconciliation
      asks the destination.
    - `claim_lease_ms`: a claim older than this belongs to a dead worker; the reaper returns
      the row to pending.
    - `poll_ms`: the relay's longest wait between claims (PostgreSQL wakes it sooner with
      LISTEN/NOTIFY); `batch_size`: rows claimed at a time.
    - `max_in_flight`: the most claims one relay holds at once (published and not yet settled,
      handed back or reaped). A claim waits in the broker until a worker thread takes it, and
      its lease runs meanwhile: a relay that claimed every due row would have most of them
      reaped and published again before a thread reached them, flooding the broker with stale
      messages. None: twice the worker's consuming threads (`OutboxWorker`), or `batch_size`
      for a relay whose worker does not consume.
    """

    backoff_initial_ms: int = 1_000
    backoff_max_ms: int = 60_000
    max_attempts: int = 5
    send_timeout_ms: int = 10_000
    reconcile_after_ms: int = 5_000
    claim_lease_ms: int = 60_000
    poll_ms: int = 1_000
    batch_size: int = 100
    max_in_flight: int | None = None

    def __post_init__(self) -> None:
        _at_least_one(self, *(f.name for f in fields(self) if f.name != "max_in_flight"))
        if self.max_in_flight is not None:
            _at_least_one(self, "max_in_flight")
        if self.claim_lease_ms <= self.send_timeout_ms:
            raise ValueError(
                "OutboxConfig.claim_lease_ms exceeds send_timeout_ms (else every slow send is "
                "reaped while it runs)"
            )
        if self.backoff_max_ms < self.backoff_initial_ms:
            raise ValueError("OutboxConfig.backoff_max_ms is at least backoff_initial_ms")

    def backoff_ms(self, attempt: int) -> int:
        """The wait before attempt `attempt + 1` after attempt `attempt` failed retryably."""
        doubled: int = self.backoff_initial_ms * 2 ** max(attempt - 1, 0)
        return min(doubled, self.backoff_max_ms)


def _at_least_one(config: object, *names: str) -> None:
    """Each named setting is a whole number (never a bool) of at least 1."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{type(config).__name__}.{name} is a whole number of at least 1")

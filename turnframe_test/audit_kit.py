"""Audit checks for tests: every turn a conversation holds replays verified, its chain intact."""

from __future__ import annotations

from turnframe_runtime.audit import audit_conversation
from turnframe_store.bundle import Stores

__all__ = ["AuditFailed", "assert_conversation_audited", "audit_problems"]


class AuditFailed(AssertionError):
    """A conversation whose chain broke or a turn whose audit did not verify."""


async def audit_problems(
    stores: Stores, account_id: str, conversation_id: str
) -> tuple[int, list[str]]:
    """Audit every turn of the conversation read-only, in one snapshot of the stores: how many
    turns were audited, and each chain finding and failed check, one line each (empty:
    everything verified)."""
    chain, audits = await audit_conversation(stores, account_id, conversation_id)
    problems = [f"chain: {f.code} ({f.turn_id or f.position}): {f.detail}" for f in chain.findings]
    for audit in audits:
        problems.extend(f"{audit.turn_id}: {c.name}: {c.detail}" for c in audit.failed())
    return len(chain.records), problems


async def assert_conversation_audited(stores: Stores, account_id: str, conversation_id: str) -> int:
    """`audit_problems`, raising `AuditFailed` naming each problem. Returns how many turns were
    audited."""
    audited, problems = await audit_problems(stores, account_id, conversation_id)
    if problems:
        raise AuditFailed(
            f"{account_id}/{conversation_id} does not audit:\n  " + "\n  ".join(problems)
        )
    return audited

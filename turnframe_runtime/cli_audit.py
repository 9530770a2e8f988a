"""`turnframe replay TOKEN --db URL` and `turnframe audit-export --db URL --conversation ID`.

Both open the database read-only (`SqlConfig(read_only=True)`): they execute nothing, call no
model and write nothing, not even a migration. `replay` answers the ten audit questions for one
turn and verifies every digest (`--json` prints the whole audit, `--html FILE` writes a report a
person can read); it exits 0 when the audit is verified, 1 when it is not. `audit-export` writes
a conversation's records, its audit chain and the chain's verdict as JSON lines, for an
auditor's own tools. An auditor who knows only the token (or the conversation id) need not name
the account, unless several accounts hold it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from turnframe_runtime.audit import AUDIT_QUESTIONS, Audit, audit_turn, read_chain
from turnframe_store import InvalidDatabaseUrl, MissingExtra, SqlConfig, SqlStores
from turnframe_store.errors import NotFound

__all__ = ["register_export", "register_replay"]

_READ_ONLY = SqlConfig(read_only=True, pool_min_size=0, pool_size=2, lock_pool_size=1)


def register_replay(commands: Any) -> None:
    parser = commands.add_parser("replay", help="audit one turn by its replay token (read-only)")
    parser.add_argument("token", metavar="TOKEN", help="the turn's replay token (rpl_…)")
    parser.add_argument("--db", metavar="URL", required=True, help="the store's database")
    parser.add_argument("--account", metavar="ID", help="the account (when several hold TOKEN)")
    parser.add_argument("--json", action="store_true", help="print the whole audit as JSON")
    parser.add_argument("--html", metavar="FILE", help="also write the audit as an HTML report")
    parser.set_defaults(run=_replay)


def register_export(commands: Any) -> None:
    parser = commands.add_parser(
        "audit-export",
        help="write a conversation's replay records and chain verdict as JSON lines (read-only)",
    )
    parser.add_argument("--db", metavar="URL", required=True, help="the store's database")
    parser.add_argument("--conversation", metavar="ID", required=True, help="the conversation")
    parser.add_argument("--account", metavar="ID", help="only this account's conversation")
    parser.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    parser.set_defaults(run=_export)


class _Usage(Exception):
    """What the command line got wrong, in one line (exit 2)."""


class _Missing(Exception):
    """The database holds nothing the command was asked for, in one line (exit 1)."""


def _said(command: str, failure: _Usage | _Missing) -> int:
    """The one line a command prints for what it could not do: 2 for a usage error, else 1."""
    print(f"turnframe {command}: {failure}", file=sys.stderr)
    return 2 if isinstance(failure, _Usage) else 1


def _replay(args: argparse.Namespace) -> int:
    try:
        audit = asyncio.run(_audit(args.db, args.token, args.account))
    except (_Usage, _Missing) as failure:
        return _said("replay", failure)
    if args.html:
        from turnframe_runtime.audit_html import render_audit_html

        Path(args.html).write_text(render_audit_html(audit), encoding="utf-8")
    if args.json:
        print(audit.model_dump_json(indent=2))
    else:
        _summary(audit, sys.stdout)
    return 0 if audit.verified else 1


async def _audit(db: str, token: str, account: str | None) -> Audit:
    stores = await _open(db)
    try:
        if account is None:
            holders = await stores.replay.accounts_with_token(token)
            if not holders:
                raise _Missing(f"no turn has the replay token {token}")
            if len(holders) > 1:
                raise _Usage(f"several accounts hold {token}: {', '.join(holders)}; name --account")
            (account,) = holders
        try:
            return await audit_turn(stores, account, token)
        except NotFound:
            raise _Missing(f"{account} holds no turn {token}") from None
    finally:
        await stores.aclose()


def _export(args: argparse.Namespace) -> int:
    try:
        lines = asyncio.run(_export_lines(args.db, args.conversation, args.account))
    except (_Usage, _Missing) as failure:
        return _said("audit-export", failure)
    text = "".join(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n" for line in lines)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    intact = all(line["intact"] for line in lines if line["type"] == "verdict")
    return 0 if intact else 1


async def _export_lines(db: str, conversation_id: str, account: str | None) -> list[dict[str, Any]]:
    stores = await _open(db)
    try:
        accounts = (
            (account,)
            if account is not None
            else await stores.replay.accounts_with_conversation(conversation_id)
        )
        if not accounts:
            raise _Missing(f"no records of the conversation {conversation_id}")
        if len(accounts) > 1:  # as replay does: never one account's records for another's
            raise _Usage(
                f"several accounts hold {conversation_id}: {', '.join(accounts)}; name --account"
            )
        lines: list[dict[str, Any]] = []
        for holder in accounts:
            chain = await read_chain(stores, holder, conversation_id)
            records, links, findings = chain.records, chain.links, chain.findings
            if not records and not links and not chain.turn_ids:
                raise _Missing(f"{holder} holds no conversation {conversation_id}")
            lines.extend(
                {"type": "record", "account_id": holder, "record": r.model_dump(mode="json")}
                for r in records
            )
            lines.extend({"type": "link", **k.model_dump(mode="json")} for k in links)
            lines.append(
                {
                    "type": "verdict",
                    "account_id": holder,
                    "conversation_id": conversation_id,
                    "intact": not findings,
                    "records": len(records),
                    "links": len(links),
                    "findings": [f.model_dump(mode="json") for f in findings],
                }
            )
        return lines
    finally:
        await stores.aclose()


async def _open(db: str) -> SqlStores:
    try:
        return await SqlStores.connect(db, _READ_ONLY)
    except (InvalidDatabaseUrl, MissingExtra) as unusable:
        raise _Usage(str(unusable)) from None


def _summary(audit: Audit, out: TextIO) -> None:
    """The audit in a few lines for a terminal. Stored text is shown escaped: a control
    character in it (an escape sequence) can never move the cursor or rewrite the verdict."""

    def line(text: str) -> None:
        out.write(_printable(text) + "\n")

    verdict = "verified" if audit.verified else "NOT VERIFIED"
    line(f"turn {audit.turn_id} ({audit.replay_token}) of {audit.account_id}/"
         f"{audit.conversation_id}: {verdict}")  # fmt: skip
    sent = audit.what_the_user_sent
    cause = sent.get("server_turn")
    if cause is not None:
        line(f"  sent: nothing; the server wrote this turn ({cause})")
    else:
        said = sent["input"].get("text") or sent["input"].get("interaction_response")
        line(f"  sent: {said!r} ({sent['locale']})")
    cases = audit.which_state_was_loaded["cases"]
    line(f"  loaded: {', '.join(_case(c) for c in cases) or 'nothing'}")
    line(f"  model calls: {len(audit.which_model_calls_produced_it)}")
    for decision in audit.which_policy_applied_and_what_authorized_each_command:
        allowed = "allowed" if decision["allowed"] else "refused"
        line(f"  policy: {decision['command_type']} {allowed} ({decision['reason_code']})")
    for command in audit.what_committed["commands"]:
        line(f"  command: {command['command_type']} -> {command['outcome']['kind']}")
    for block in audit.what_was_returned["blocks"]:
        words = block.get("title") or block.get("text") or ""
        line(f"  [{block['kind']} · {block.get('author', '?')}] {words}")
    progress = audit.how_far_the_turn_got
    line(f"  phase: record {progress['record_phase']}, marker {progress['marker_phase']}")
    chain = audit.chain
    line(f"  chain: position {chain['position']} of {chain['length']}, "
         f"{len(chain['findings'])} finding(s)")  # fmt: skip
    for check in audit.checks:
        mark = "ok  " if check.passed else "FAIL"
        line(f"  {mark} {check.name}{': ' + check.detail if check.detail else ''}")
    line(f"  ({len(AUDIT_QUESTIONS)} questions answered; --json for all of it)")


def _printable(text: str) -> str:
    """`text` with every character a terminal would act on (C0 and C1 controls, DEL, line and
    paragraph separators, bidirectional overrides) written as an escape instead."""
    return "".join(c if c.isprintable() or c == " " else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _case(case: dict[str, Any]) -> str:
    return f"{case['workflow']}/{case['case_id']}@{case['expected_revision']}"

"""Conformance checks: replay records."""

from __future__ import annotations

from turnframe_core.audit_chain import verify_links
from turnframe_core.derive import derive_replay_token
from turnframe_core.replay import TurnPhase
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import CommitBundle


@check
async def check_a_replay_record_is_upserted_until_its_phase_is_terminal(stores: Stores) -> None:
    replay = stores.replay
    first = build.replay_record("turn_1")
    await replay.put(first)
    await replay.put(first)
    equal(await replay.get(ACCOUNT_A, "turn_1"), first, "the first record")
    committed = first.advanced(TurnPhase.COMMITTED, at=T0 + 10, event_ids=("evt_1",))
    await replay.put(committed)
    equal(await replay.get(ACCOUNT_A, "turn_1"), committed, "the upserted record")
    equal(
        await replay.get_by_token(ACCOUNT_A, first.replay_token), committed, "the record by token"
    )
    final = committed.advanced(TurnPhase.DELIVERED, at=T0 + 20)
    await replay.put(final)
    await replay.put(final)
    await refused(
        Conflict,
        replay.put(final.model_copy(update={"failure_code": "conformance.late"})),
        "changing a final record",
    )
    await refused(Conflict, replay.put(committed), "moving a final record back")
    equal(await replay.get(ACCOUNT_A, "turn_1"), final, "the final record")
    forged = build.replay_record("turn_2").model_copy(
        update={"replay_token": derive_replay_token("turn_3")}
    )
    await refused(InvalidRecord, replay.put(forged), "a token not derived from its turn")
    await refused(NotFound, replay.get(ACCOUNT_A, "turn_2"), "the refused record")


@check
async def check_a_record_is_linked_into_its_conversations_chain_once_when_final(
    stores: Stores,
) -> None:
    replay = stores.replay
    first = build.replay_record("turn_1", phase=TurnPhase.DELIVERED)
    await replay.put(first)
    await replay.put(first)  # a repeat links nothing more
    failed = build.replay_record("turn_2", phase=TurnPhase.FAILED, recorded_at=T0 + 5)
    await replay.put(failed)
    await replay.put(first)  # a repeat behind a newer link links nothing either
    elsewhere = build.replay_record("turn_3", conversation="conv_2", phase=TurnPhase.DELIVERED)
    await replay.put(elsewhere)
    await replay.put(build.replay_record("turn_4", recorded_at=T0 + 9))  # in flight: no link yet
    chain = await replay.chain(ACCOUNT_A, "conv_1")
    equal([(link.position, link.turn_id) for link in chain], [(0, "turn_1"), (1, "turn_2")],
           "the chain's entries")  # fmt: skip
    equal([link.record_digest for link in chain], [first.digest(), failed.digest()],
           "the digests the links vouch for")  # fmt: skip
    equal([link.previous for link in chain], [None, chain[0].link_digest], "each link's previous")
    equal([link.turn_id for link in await replay.chain(ACCOUNT_A, "conv_2")], ["turn_3"],
           "another conversation's chain")  # fmt: skip
    equal(await replay.chain("acct_other", "conv_1"), (), "another account's chain")
    records = await replay.for_conversation(ACCOUNT_A, "conv_1")
    equal(verify_links(records, chain), [], "the chain verified")


@check
async def check_a_commit_bundle_links_the_record_it_makes_final(stores: Stores) -> None:
    await start_turn(stores, "turn_1")
    received = build.replay_record("turn_1", phase=TurnPhase.RECEIVED)
    await stores.commits.commit(CommitBundle(
        account_id=ACCOUNT_A, conversation_id="conv_1", turn_id="turn_1", replay=received,
    ))  # fmt: skip
    equal(await stores.replay.chain(ACCOUNT_A, "conv_1"), (), "the chain while the turn runs")
    final = received.advanced(TurnPhase.DELIVERED, at=T0 + 20)
    bundle = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=build.assistant_turn("turn_1"),
        replay=final,
        phase=TurnPhase.DELIVERED,
    )
    await stores.commits.commit(bundle)
    (link,) = await stores.replay.chain(ACCOUNT_A, "conv_1")
    equal((link.position, link.turn_id, link.record_digest), (0, "turn_1", final.digest()),
           "the link the final bundle wrote")  # fmt: skip
    equal(link.linked_at, final.recorded_at, "the link's time")


@check
async def check_an_auditor_finds_the_accounts_of_a_token_and_of_a_conversation(
    stores: Stores,
) -> None:
    for account in ("acct_b", ACCOUNT_A, "acct_c"):
        await stores.replay.put(
            build.replay_record("turn_1", account=account, conversation="conv_9")
        )
    await stores.replay.put(build.replay_record("turn_2", account="acct_d"))
    token = derive_replay_token("turn_1")
    holding = tuple(sorted((ACCOUNT_A, "acct_b", "acct_c")))
    equal(await stores.replay.accounts_with_token(token), holding, "the accounts of the token")
    equal(
        await stores.replay.accounts_with_conversation("conv_9"),
        holding,
        "the accounts holding the conversation",
    )
    unknown = derive_replay_token("turn_5")
    equal(await stores.replay.accounts_with_token(unknown), (), "an unknown token")

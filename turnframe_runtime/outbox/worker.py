"""dramatiq as the outbox's transport: the dispatch and reconcile actors, the relay that feeds
them, and the brokers (Redis in production, dramatiq's StubBroker embedded; RabbitMQ with the
`rabbitmq` extra).

A message is built by hand as `dramatiq.Message(message_id=outbox_id)` (dramatiq's
`send_with_options` ignores a caller's id) and carries the row's id and the attempt its claim
made; the actor body is `runtime.outbox.dispatch(outbox_id, attempt)`. The actors run on
dramatiq's worker threads and hand their work to the event loop that owns the runtime's stores.
dramatiq's own retries are off: a failed dispatch leaves its claim, which the reaper returns, so
the database (never the broker) decides what is sent again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import dramatiq
from dramatiq.brokers.stub import StubBroker

from turnframe_core import codes
from turnframe_runtime import observe
from turnframe_runtime.config import OutboxConfig
from turnframe_runtime.erasure import erase_expired
from turnframe_runtime.outbox.dispatch import DispatchOutcome
from turnframe_runtime.outbox.relay import Relay
from turnframe_store.errors import MissingExtra
from turnframe_store.records import OutboxEntry

if TYPE_CHECKING:  # a runtime import would be circular
    from turnframe_runtime.runtime import TurnRuntime

__all__ = [
    "DISPATCH_ACTOR",
    "OUTBOX_QUEUE",
    "RECONCILE_ACTOR",
    "OutboxWorker",
    "connect_broker",
]

OUTBOX_QUEUE: Final = "turnframe_outbox"
DISPATCH_ACTOR: Final = "turnframe_outbox_dispatch"
RECONCILE_ACTOR: Final = "turnframe_outbox_reconcile"

_log = logging.getLogger("turnframe_runtime.outbox")


def connect_broker(url: str, *, heartbeat_timeout_ms: int | None = None) -> dramatiq.Broker:
    """The broker a URL names: `redis://…` (RedisBroker), `amqp://…` (RabbitmqBroker, with the
    `rabbitmq` extra) or `stub://` (in this process only: the embedded mode)."""
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("redis", "rediss", "unix"):
        from dramatiq.brokers.redis import RedisBroker

        options: dict[str, Any] = {"url": url}
        if heartbeat_timeout_ms is not None:
            options["heartbeat_timeout"] = heartbeat_timeout_ms
        return RedisBroker(**options)  # type: ignore[no-untyped-call]
    if scheme in ("amqp", "amqps"):
        try:
            from dramatiq.brokers.rabbitmq import RabbitmqBroker
        except ImportError as missing:
            raise MissingExtra("RabbitMQ", "rabbitmq") from missing
        return RabbitmqBroker(url=url)
    if scheme == "stub":
        return StubBroker()
    raise ValueError(f"no broker for {scheme!r} URLs (redis://, amqp:// or stub://)")


class AttemptFailed(Exception):
    """An outbox attempt failed in an actor (its row's claim stays for the reaper); named by the
    failure's code or type only, since dramatiq logs it."""


class OutboxWorker:
    """One runtime's outbox carried out through one broker: the actors (on dramatiq worker
    threads, in this process) and the relay (a task on the runtime's event loop).

        worker = OutboxWorker(runtime, connect_broker("redis://127.0.0.1:6379/0"))
        await worker.start()      # on the loop that owns runtime.stores
        ...
        await worker.stop()

    `consume=False` runs the relay only (the actors run in other processes)."""

    def __init__(
        self,
        runtime: TurnRuntime,
        broker: dramatiq.Broker,
        *,
        threads: int = 8,
        relay: bool = True,
        consume: bool = True,
    ) -> None:
        self._dispatcher = runtime.outbox
        self.broker = broker
        self._threads = threads
        self._with_relay = relay
        self._consume = consume
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: dramatiq.Worker | None = None
        self._stop = asyncio.Event()
        self._relay_task: asyncio.Task[None] | None = None
        self._running_relay: Relay | None = None
        broker.declare_queue(OUTBOX_QUEUE)
        for name, body in (
            (DISPATCH_ACTOR, self._dispatch_sync),
            (RECONCILE_ACTOR, self._reconcile_sync),
        ):
            register = dramatiq.actor(
                actor_name=name, queue_name=OUTBOX_QUEUE, broker=broker, max_retries=0
            )
            register(body)

    @property
    def config(self) -> OutboxConfig:
        return self._dispatcher.config

    def relay(self) -> Relay:
        """A relay publishing to this worker's broker. It holds at most `max_in_flight` claims:
        the config's, else twice this worker's consuming threads (a relay whose worker does not
        consume: `batch_size`)."""
        bound = self.config.max_in_flight
        if bound is None:
            bound = 2 * self._threads if self._consume else self.config.batch_size
        return Relay(
            self._dispatcher.kernel.stores,
            self.publish,
            self.publish_reconcile,
            config=self.config,
            clock=self._dispatcher.kernel.clock,
            max_in_flight=bound,
        )

    # --- publishing ------------------------------------------------------------------------------

    def _message(self, actor: str, row: OutboxEntry, *args: Any) -> dramatiq.Message[Any]:
        return dramatiq.Message(
            queue_name=OUTBOX_QUEUE,
            actor_name=actor,
            args=(row.outbox_id, *args),
            kwargs={},
            options={},
            message_id=row.outbox_id,
            message_timestamp=int(time.time() * 1000),
        )

    async def publish(self, rows: Sequence[OutboxEntry]) -> list[bool]:
        """Hand claimed rows to the dispatch actor, in one hop to a thread; for each, whether
        the broker took it (after a refusal the rest are not tried)."""
        messages = [self._message(DISPATCH_ACTOR, row, row.attempt_count) for row in rows]
        return await asyncio.to_thread(self._enqueue, messages)

    async def publish_reconcile(self, rows: Sequence[OutboxEntry]) -> list[bool]:
        messages = [self._message(RECONCILE_ACTOR, row) for row in rows]
        return await asyncio.to_thread(self._enqueue, messages)

    def _enqueue(self, messages: Sequence[dramatiq.Message[Any]]) -> list[bool]:
        taken: list[bool] = []
        for message in messages:
            try:
                self.broker.enqueue(message)
            except Exception as failure:
                observe.failure(_log, "outbox.publish_failed", failure, logging.WARNING)
                break
            taken.append(True)
        return taken + [False] * (len(messages) - len(taken))

    # --- the actors ------------------------------------------------------------------------------

    def _run(self, work: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the outbox worker is not running")
        future: concurrent.futures.Future[DispatchOutcome] = asyncio.run_coroutine_threadsafe(
            work, loop
        )
        # An error fails the message; the row's claim stays for the reaper. An attempt ends by
        # the send timeout whatever its sender does; one still running when its claim's lease
        # ran out is given up here too, so this thread always comes back.
        try:
            future.result(timeout=self.config.claim_lease_ms / 1000)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AttemptFailed(codes.OUTBOX_ATTEMPT_OVERRAN) from None
        except Exception as failure:
            # dramatiq logs what an actor raises, message and traceback: it gets the failure's
            # code (or type) alone, never a message that may quote a user or a secret.
            raise AttemptFailed(codes.code_of(failure)) from None
        finally:  # this thread can take another message: the relay may claim one more
            relay = self._running_relay
            if relay is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(relay.settled)

    def _dispatch_sync(self, outbox_id: str, attempt: int) -> None:
        self._run(self._dispatcher.dispatch(outbox_id, attempt))

    def _reconcile_sync(self, outbox_id: str) -> None:
        self._run(self._dispatcher.reconcile(outbox_id))

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the actors' worker threads and the relay, on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._stop.clear()
        if self._consume:
            self._worker = dramatiq.Worker(
                self.broker, worker_threads=self._threads, worker_timeout=100
            )
            self._worker.start()
        if self._with_relay:
            self._relay_task = asyncio.create_task(self._relay_and_sweep())

    async def _relay_and_sweep(self) -> None:
        """The relay, and a recovery sweep every claim lease: a follow-up turn whose worker died
        after recording its answer (or any turn a crashed process left) is finished by the
        next sweep once its marker is older than the lease; stream logs past their retention
        are pruned with it, and turns past `RuntimeConfig.turn_retention_ms` erased."""
        lease_ms = self.config.claim_lease_ms

        async def sweep() -> None:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), lease_ms / 1000)
                if self._stop.is_set():
                    break
                try:
                    await self._dispatcher.kernel.recovery().sweep(older_than_ms=lease_ms)
                except Exception as failure:
                    observe.failure(_log, "outbox.recovery_sweep_failed", failure)
                try:  # finished turns' stream logs past their retention
                    await self._dispatcher.kernel.followers.prune(self._dispatcher.kernel.clock())
                except Exception as failure:
                    observe.failure(_log, "outbox.stream_prune_failed", failure)
                try:  # finished turns' words past their retention (decision 0032)
                    kernel = self._dispatcher.kernel
                    await erase_expired(
                        kernel.stores,
                        kernel.config.turn_retention_ms,
                        now=kernel.clock(),
                        limit=1_000,
                    )
                except Exception as failure:
                    observe.failure(_log, "outbox.retention_sweep_failed", failure)

        relay = self._running_relay = self.relay()
        try:
            await asyncio.gather(relay.run(self._stop), sweep())
        finally:
            self._running_relay = None

    async def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until the outbox holds no open row (or `timeout_s` passed); True when drained.
        For the embedded mode and tests: production workers simply run."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await self._dispatcher.kernel.stores.outbox.pending_count() == 0:
                return True
            await asyncio.sleep(0.02)
        return False

    async def stop(self) -> None:
        """Stop the relay, then the actors (each finishes the message it holds)."""
        self._stop.set()
        if self._relay_task is not None:
            with contextlib.suppress(Exception):
                await self._relay_task
            self._relay_task = None
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await asyncio.to_thread(worker.stop)

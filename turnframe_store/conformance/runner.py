"""The conformance runner: the check registry, results and reports ."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final, TypeVar

from turnframe_store.bundle import Stores

StoresFactory = Callable[[], Awaitable[Stores]]
Check = Callable[[Stores], Awaitable[None]]

#: The section modules in the order the suite runs them; in each, its checks in source order.
SECTIONS: Final = (
    "turns",
    "stream",
    "interactions",
    "journal",
    "events",
    "outbox",
    "timers",
    "replay",
    "erasure",
    "ordering",
    "bundle",
    "arguments",
    "transactions",
)

_REGISTRY: dict[str, Check] = {}


def check(function: Check) -> Check:
    """Register `function` as a check of the suite (a decorator)."""
    _REGISTRY[function.__name__] = function
    return function


def all_checks() -> tuple[str, ...]:
    """Every registered check, section by section."""

    def section(name: str) -> int:
        return SECTIONS.index(_REGISTRY[name].__module__.rsplit(".", 1)[-1])

    return tuple(sorted(_REGISTRY, key=section))


# --- report -------------------------------------------------------------------------------------


class NotOffered(Exception):
    """Raised by a check about something its subject does not offer: the check is skipped (it
    proves nothing), neither passed nor failed."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""
    duration_ms: float = 0.0
    #: the subject does not offer what the check is about (`passed` holds; it proves nothing)
    skipped: bool = False


@dataclass(frozen=True)
class ConformanceReport:
    results: tuple[CheckResult, ...]
    #: what was checked ("store", "executor"), as the description names it
    subject: str = "store"

    @property
    def passed(self) -> bool:
        """No check failed (a skipped check did not fail, but proves nothing: `skipped_names`)."""
        return all(result.passed for result in self.results)

    @property
    def skipped_names(self) -> tuple[str, ...]:
        return tuple(result.name for result in self.results if result.skipped)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(result for result in self.results if not result.passed)

    @property
    def failed_names(self) -> tuple[str, ...]:
        return tuple(result.name for result in self.failures)

    def describe(self) -> str:
        """One line per check (PASS/FAIL, name, and why it failed), after a count."""
        passed = sum(result.passed and not result.skipped for result in self.results)
        head = f"{passed}/{len(self.results)} {self.subject} conformance checks passed"
        skipped = len(self.skipped_names)
        lines = [head + (f", {skipped} skipped (not offered)" if skipped else "")]
        for result in self.results:
            mark = "SKIP" if result.skipped else "PASS" if result.passed else "FAIL"
            why = f": {result.detail}" if result.detail else ""
            lines.append(f"{mark} {result.name} ({result.duration_ms:.1f} ms){why}")
        return "\n".join(lines)


S = TypeVar("S")


async def run_one(
    name: str,
    check: Callable[[S], Awaitable[None]] | None,
    factory: Callable[[], Awaitable[S]],
    close: Callable[[S], Awaitable[object]],
    *,
    subject: str = "store",
    timeout_s: float = 60.0,
) -> CheckResult:
    """Run one check on a fresh subject from `factory`, then `close` it; every failure is
    captured, never raised (any conformance suite's runner: stores here, executors in the
    test kit)."""
    if check is None:
        return CheckResult(name, False, f"no such {subject} conformance check")
    started = time.perf_counter()

    def result(detail: str = "", skipped: bool = False) -> CheckResult:
        elapsed = (time.perf_counter() - started) * 1000
        return CheckResult(name, skipped or not detail, detail, elapsed, skipped)

    try:
        made = await factory()
    except Exception as exc:
        return result(f"the {subject} factory failed: {type(exc).__name__}: {exc}")
    try:
        await asyncio.wait_for(check(made), timeout_s)
    except NotOffered as exc:
        return result(str(exc), skipped=True)
    except AssertionError as exc:
        return result(str(exc) or "an expectation failed")
    except TimeoutError:
        return result(f"did not finish within {timeout_s} s")
    except Exception as exc:
        return result(f"unexpected {type(exc).__name__}: {exc}")
    finally:
        with contextlib.suppress(Exception):  # closing is best effort; the verdict stands
            await close(made)
    return result()


async def _close_stores(stores: Stores) -> None:
    await stores.aclose()


async def run_check(name: str, factory: StoresFactory, *, timeout_s: float = 60.0) -> CheckResult:
    """Run one check on a fresh store from `factory`; every failure is captured, never raised."""
    return await run_one(name, _REGISTRY.get(name), factory, _close_stores, timeout_s=timeout_s)


async def run_all(
    factory: StoresFactory, *, names: Iterable[str] | None = None, timeout_s: float = 60.0
) -> ConformanceReport:
    """Run every check (or the named ones), each on a fresh store; never raises."""
    selected = tuple(names) if names is not None else all_checks()
    results = [await run_check(name, factory, timeout_s=timeout_s) for name in selected]
    return ConformanceReport(tuple(results))

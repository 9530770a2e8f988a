"""Loading an adopter's runtime for the command line (`--app MODULE:FACTORY`)."""

from __future__ import annotations

import importlib
import inspect

from turnframe_runtime.runtime import TurnRuntime
from turnframe_store.errors import InvalidDatabaseUrl, MissingExtra

__all__ = ["Unusable", "load_runtime"]


class Unusable(Exception):
    """What the command line names cannot work (the command exits 2, saying why). Raised only
    while a command starts: a failure once it runs is not a usage error."""


async def load_runtime(app: str, db: str) -> TurnRuntime:
    """`FACTORY(db)` from `MODULE`: a `TurnRuntime` (or an awaitable of one) on stores opened
    from the database URL. `Unusable` when the app cannot be loaded, returns something else,
    or the database URL cannot work (the stores, or the app itself, refused it)."""
    module_name, _, factory_name = app.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
        if not callable(factory):
            raise Unusable(f"cannot load {app}: it is not a factory")
        runtime = factory(db)
        if inspect.isawaitable(runtime):
            runtime = await runtime
    except (InvalidDatabaseUrl, MissingExtra, ValueError) as unusable:  # the app refused the URL
        raise Unusable(str(unusable)) from None
    except (ImportError, AttributeError) as missing:
        raise Unusable(f"cannot load {app}: {missing}") from None
    if not isinstance(runtime, TurnRuntime):
        raise Unusable(f"cannot load {app}: it did not return a TurnRuntime")
    return runtime

"""Loading an adopter's runtime for the command line (`--app MODULE:FACTORY`)."""

from __future__ import annotations

import importlib
import inspect

from turnframe_runtime.runtime import TurnRuntime

__all__ = ["load_runtime"]


async def load_runtime(app: str, db: str) -> TurnRuntime:
    """`FACTORY(db)` from `MODULE`: a `TurnRuntime` (or an awaitable of one) on stores opened
    from the database URL. `ImportError` / `AttributeError` when the app cannot be loaded or
    returns something else."""
    module_name, _, factory_name = app.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    runtime = factory(db)
    if inspect.isawaitable(runtime):
        runtime = await runtime
    if not isinstance(runtime, TurnRuntime):
        raise AttributeError(f"{app} did not return a TurnRuntime")
    return runtime

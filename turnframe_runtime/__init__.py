"""turnframe_runtime: the turn pipeline (composition, copy, narration, streaming, recovery,
outbox)."""

__all__: list[str] = []

"""turnframe_test: the test kit shipped to adopters (builders, sample domain, scripted ports,
fault points, scenarios, chaos harness). Nothing outside this package imports it."""

from turnframe_test.builders import (
    card_payload,
    confirm_card,
    copy_ref,
    envelope,
    event,
    receipt_block,
)

__all__ = ["card_payload", "confirm_card", "copy_ref", "envelope", "event", "receipt_block"]

"""Examples that run on the library (not shipped in the wheel)."""

"""Shared fixtures. Backends for service tests are chosen in tests/services.py (DESIGN §13)."""

pytest_plugins = ("services",)

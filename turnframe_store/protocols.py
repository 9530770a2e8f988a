"""The role types under their historical module: each is the role's abstract base class in
`turnframe_store.roles`, which carries the contract."""

from turnframe_store.roles import *  # noqa: F403
from turnframe_store.roles import __all__ as _role_names

__all__ = [name for name in _role_names if name != "Role"]

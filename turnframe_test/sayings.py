"""The scripted sayings' old home: `turnframe_test.sample.sayings`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import sayings as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.sayings import *  # noqa: F403

sys.modules[__name__] = _moved

"""The fake airline's old home: `turnframe_test.sample.airline`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import airline as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.airline import *  # noqa: F403

sys.modules[__name__] = _moved

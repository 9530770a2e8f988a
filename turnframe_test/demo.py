"""`turnframe demo`'s old home: `turnframe_test.sample.demo`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import demo as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.demo import *  # noqa: F403

sys.modules[__name__] = _moved

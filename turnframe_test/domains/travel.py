"""The sample travel domain's old home: `turnframe_test.sample.travel`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import travel as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.travel import *  # noqa: F403

sys.modules[__name__] = _moved

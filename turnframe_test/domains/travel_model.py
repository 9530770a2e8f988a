"""The travel desk's state model's old home: `turnframe_test.sample.travel_model`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import travel_model as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.travel_model import *  # noqa: F403

sys.modules[__name__] = _moved

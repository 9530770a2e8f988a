"""The PostgreSQL travel desk's old home: `turnframe_test.sample.travel_pg`
under this name too (the same module object)."""

import sys
from typing import TYPE_CHECKING

from turnframe_test.sample import travel_pg as _moved

if TYPE_CHECKING:
    from turnframe_test.sample.travel_pg import *  # noqa: F403

sys.modules[__name__] = _moved

"""turnframe_runtime.http: the library's web layer (`pip install 'turnframe[http]'`): an ASGI
app over a `TurnRuntime` that serves turns, card answers, their streams and a conversation's
turns, to run alone or mount in an adopter's Starlette or FastAPI app (docs/http.md).

Nothing else in turnframe_runtime imports this package (or Starlette)."""

from turnframe_runtime.http._app import Authenticate, RuntimeSource, create_app
from turnframe_runtime.http._options import CorsConfig, HttpLimits
from turnframe_runtime.http.errors import STATUS, Unauthenticated

__all__ = [
    "STATUS",
    "Authenticate",
    "CorsConfig",
    "HttpLimits",
    "RuntimeSource",
    "Unauthenticated",
    "create_app",
]

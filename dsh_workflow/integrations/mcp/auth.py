"""Bearer-token access to the MCP server's HTTP endpoint (``dsh-workflow mcp --http``).

Contract of :func:`require_bearer`:

- Every HTTP request must carry ``Authorization: Bearer <token>`` with the server's token
  (the scheme name in any case; the token compared in constant time). Any other request gets
  ``401`` with ``WWW-Authenticate: Bearer`` and a short JSON body, and reaches nothing of the
  wrapped application: no session is made, no tool listed, no tool called, no run resumed.
- A WebSocket connection is closed before it is accepted (the server offers none).
- ``lifespan`` messages pass through, so the application still starts and stops.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

__all__ = ["require_bearer"]

_AUTHORIZATION = b"authorization"
_REFUSED = json.dumps({"error": "unauthorized: send the server's token as "
                                "'Authorization: Bearer <token>'"}).encode()


def _bearer(scope: dict[str, Any]) -> bytes | None:
    """The token of the request's ``Authorization: Bearer`` header, or None."""
    values = [v for k, v in scope.get("headers", ()) if k.lower() == _AUTHORIZATION]
    if len(values) != 1:
        return None
    scheme, _, credentials = bytes(values[0]).strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return None
    return credentials.strip()


def require_bearer(app: Any, token: str) -> Any:
    """Wrap the ASGI ``app`` so only requests bearing ``token`` reach it (module docstring)."""
    if not token:
        raise ValueError("the token must not be empty")
    expected = token.encode("utf-8")

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await app(scope, receive, send)
            return
        given = _bearer(scope)
        if given is not None and hmac.compare_digest(given, expected):
            await app(scope, receive, send)
            return
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(_REFUSED)).encode()),
                                (b"www-authenticate", b'Bearer realm="dsh-workflow"')]})
        await send({"type": "http.response.body", "body": _REFUSED})

    return asgi

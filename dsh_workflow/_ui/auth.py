"""Who may use the viewer: the holder of its token, from the viewer's own pages only.

Contract of :class:`ViewerGuard` (an ASGI middleware, SECURITY.md "Local servers: the token"):

- **The token.** A request is let in when it carries the viewer's token: the cookie
  :func:`cookie_name` (set by the viewer itself), an ``Authorization: Bearer <token>`` header
  (for scripts), or a ``?token=`` query parameter. Every comparison is constant-time.
- **The exchange.** A request with a valid ``?token=`` is answered as usual (so the printed
  link opens its page at once, ``200``), and the answer sets the cookie ``HttpOnly;
  SameSite=Strict; Path=/``; the page's own script (``static/token.js``) then takes the token
  out of the address bar and the history (``history.replaceState``). The cookie holds
  :func:`cookie_value` (a keyed digest of the token, always cookie-safe), not the token.
  Every answer carries ``Referrer-Policy: no-referrer``.
- **Refused.** Any other request gets ``401`` and reaches nothing (no page, no JSON, no event
  stream), except :data:`PUBLIC_PATHS` and ``/static/``: the viewer's own script, style and
  vendored files, which hold no data of any run.
- **Origin.** A request with a method that may change state (anything but ``GET``, ``HEAD``,
  ``OPTIONS``) must also carry an ``Origin`` header naming this server itself (``http://`` +
  its ``Host``); otherwise ``403``, even with a valid token. So a page of another site cannot
  make the browser act on the viewer with the user's cookie. Every route added to the viewer
  (such as a future cancel button's ``POST``) gets both checks by this one middleware.

Pure ASGI (no buffering), so the event stream flows through unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["PUBLIC_PATHS", "SAFE_METHODS", "ViewerGuard", "cookie_name", "cookie_value",
           "token_in"]

#: Paths anyone may fetch: they hold no run data.
PUBLIC_PATHS = frozenset({"/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
#: Methods that change nothing; every other method also needs a same-origin ``Origin``.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
COOKIE_PREFIX = "dsh_workflow_viewer_"
QUERY_PARAM = "token"

_REFUSED = (b"This viewer needs its token: open the address `dsh-workflow ui` printed "
            b"(http://127.0.0.1:PORT/?token=...).\n")
_NO_REFERRER = (b"referrer-policy", b"no-referrer")
_CROSS_ORIGIN = b"Refused: this request did not come from the viewer's own pages.\n"


def cookie_name(port: int) -> str:
    """The cookie of the viewer on ``port`` (cookies do not tell ports apart: one name each)."""
    return f"{COOKIE_PREFIX}{port}"


def cookie_value(token: str) -> str:
    """What the viewer's cookie holds for ``token``: HMAC-SHA256 of a fixed label, keyed by the
    token, in hex (only the token's holder can make it; safe in a cookie whatever the token)."""
    return hmac.new(token.encode("utf-8"), b"dsh-workflow viewer cookie",
                    hashlib.sha256).hexdigest()


def _headers(scope: dict[str, Any]) -> dict[bytes, list[bytes]]:
    found: dict[bytes, list[bytes]] = {}
    for key, value in scope.get("headers", ()):
        found.setdefault(bytes(key).lower(), []).append(bytes(value))
    return found


def _same(given: str | bytes | None, expected: bytes) -> bool:
    if given is None:
        return False
    raw = given.encode("utf-8", "surrogateescape") if isinstance(given, str) else given
    return hmac.compare_digest(raw, expected)


def token_in(scope: dict[str, Any], token: str, cookie: str) -> tuple[bool, bool]:
    """``(allowed, from_query)``: whether the request carries ``token`` (cookie ``cookie``,
    bearer header or query), and whether a valid one came in the query string."""
    expected = token.encode("utf-8")
    expected_cookie = cookie_value(token).encode()
    headers = _headers(scope)
    for raw in headers.get(b"cookie", []):
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw.decode("latin-1"))
        except CookieError:
            continue
        if cookie in jar and _same(jar[cookie].value, expected_cookie):
            return True, False
    for raw in headers.get(b"authorization", []):
        scheme, _, credentials = raw.strip().partition(b" ")
        if scheme.lower() == b"bearer" and _same(credentials.strip(), expected):
            return True, False
    query = parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"),
                      keep_blank_values=True)
    given = [value for key, value in query if key == QUERY_PARAM]
    if len(given) == 1 and _same(given[0], expected):
        return True, True
    return False, False


def _same_origin(scope: dict[str, Any]) -> bool:
    """Whether the request's ``Origin`` names the server it was sent to (scheme and host:port
    of its ``Host`` header; the host itself is checked by the trusted-host middleware)."""
    headers = _headers(scope)
    origins = headers.get(b"origin", [])
    hosts = headers.get(b"host", [])
    if len(origins) != 1 or len(hosts) != 1:
        return False
    return hmac.compare_digest(origins[0].strip().lower(), b"http://" + hosts[0].strip().lower())


async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"cache-control", b"no-store"), *headers]})
    await send({"type": "http.response.body", "body": body})


class ViewerGuard:
    """The viewer's access check (module docstring), around the ASGI ``app``."""

    def __init__(self, app: Any, *, token: str, port: int) -> None:
        if not token:
            raise ValueError("the token must not be empty")
        self.app = app
        self.token = token
        self.cookie = cookie_name(port)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # the viewer has none
            await send({"type": "websocket.close", "code": 1008})
            return
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        if method not in SAFE_METHODS and not _same_origin(scope):
            await _answer(send, 403, _CROSS_ORIGIN, [])
            return
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            await self.app(scope, receive, send)
            return
        allowed, from_query = token_in(scope, self.token, self.cookie)
        if not allowed:
            await _answer(send, 401, _REFUSED,
                          [(b"www-authenticate", b'Bearer realm="dsh-workflow viewer"'),
                           _NO_REFERRER])
            return
        extra = [_NO_REFERRER]
        if from_query:
            extra.append((b"set-cookie", (f"{self.cookie}={cookie_value(self.token)}; "
                                          "HttpOnly; SameSite=Strict; Path=/").encode()))

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

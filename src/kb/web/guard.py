"""Who may use the web page, checked before any route runs.

A browser is an awkward client to trust: any page it has open may send requests to
127.0.0.1, and a DNS-rebinding name can make such a request look same-origin. So:

- only GET and HEAD (the page changes nothing, and a form on another site cannot POST);
- the Host header must be a name this server answers to (loopback names, the address it
  listens on, or names given with --allow-host): a rebinding name gets nothing;
- a request another site's page makes (its Origin, or Sec-Fetch-Site: cross-site) gets
  nothing either, except a plain navigation to the front page;
- with a token (KB_SERVE_TOKEN), every request carries it: as a bearer header, or as the
  cookie a first visit with `?token=` sets (HttpOnly, SameSite=Strict).
"""

from __future__ import annotations

from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kb.services.access import Access, host_refusal, token_matches

COOKIE = "kb_serve_token"
# Scripts, styles and images only from this server; no frame may hold the page.
_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    # The URL holds the query: no other site learns it from a link followed.
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def refusal(
    method: str, path: str, headers: Headers, scheme: str, rules: Access
) -> tuple[int, str] | None:
    """Why a request is refused (status and one line), or None to let it through."""
    if method not in ("GET", "HEAD"):
        return 405, "kb's web page only reads: use GET"
    host = headers.get("host", "")
    if refused := host_refusal(host, rules):
        return refused
    origin = headers.get("origin")
    if origin is not None and origin != f"{scheme}://{host}":
        return 403, "requests from another site's page are refused"
    navigation = headers.get("sec-fetch-mode") == "navigate"
    if headers.get("sec-fetch-site") == "cross-site" and not (navigation and path == "/"):
        return 403, "requests from another site's page are refused"
    return None


def carries_token(headers: Headers, token: str) -> bool:
    expected = token.encode()
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token_matches(credentials.strip().encode(), expected):
        return True
    cookies = SimpleCookie()
    try:
        cookies.load(headers.get("cookie", ""))
    except Exception:
        return False
    given = cookies.get(COOKIE)
    return given is not None and token_matches(given.value.encode(), expected)


class Guard:
    """The ASGI middleware that applies an `Access` to every HTTP request, and adds the
    headers that keep a browser from mixing the page with another site's."""

    def __init__(self, app: ASGIApp, rules: Access) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        response = self._stopped(scope, headers)
        if response is not None:
            await self._secured(response)(scope, receive, send)
            return
        await self.app(scope, receive, self._secured_send(send))

    def _stopped(self, scope: Scope, headers: Headers) -> Response | None:
        why = refusal(scope["method"], scope["path"], headers, scope["scheme"], self.rules)
        if why is not None:
            return PlainTextResponse(why[1] + "\n", status_code=why[0])
        token = self.rules.token
        if token is None or carries_token(headers, token):
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = dict(query).get("token")
        if given is not None and token_matches(given.encode(), token.encode()):
            # The token leaves the address bar (and the history) for a cookie.
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            back = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), 303)
            back.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return back
        return PlainTextResponse(
            "this kb server needs its token: open the address `kb serve` printed "
            "(with ?token=…), or send Authorization: Bearer <token>\n",
            status_code=401,
            headers={"www-authenticate": "Bearer"},
        )

    @staticmethod
    def _secured(response: Response) -> Response:
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @staticmethod
    def _secured_send(send: Send) -> Send:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode())
                    for k, v in _HEADERS.items()
                    if k.encode() not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return secured

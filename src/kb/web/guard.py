"""Who may use the web page, checked before any route runs.

A browser is an awkward client to trust: any page it has open may send requests to
127.0.0.1, and a DNS-rebinding name can make such a request look same-origin. So:

- only GET and HEAD (the page changes nothing, and a form on another site cannot POST);
- the Host header must be a name this server answers to (loopback names, the address it
  listens on, or names given with --allow-host): a rebinding name gets nothing;
- a request another site's page makes (its Origin, or Sec-Fetch-Site: cross-site) gets
  nothing either, except a plain navigation to the front page, and the JSON API's answers to
  the Obsidian app (`app://obsidian.md`, an origin no web page can take), whose plugin
  streams answers with `fetch`: CORS lets it read them, the token still required;
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
# The one other origin whose calls are answered: the Obsidian app's (kb's plugin), on the
# JSON API only. A browser sets Origin itself, so no web page can claim it.
OBSIDIAN = "app://obsidian.md"
API = "/api/"
_CORS = {
    "access-control-allow-origin": OBSIDIAN,
    "access-control-allow-methods": "GET",
    # The token travels as a bearer header: the app's fetch sends no cookie of this server.
    "access-control-allow-headers": "authorization",
    "access-control-max-age": "600",
    # Chromium's Private Network Access asks before an app's page calls this machine.
    "access-control-allow-private-network": "true",
    "vary": "origin",
}


def from_obsidian(path: str, headers: Headers) -> bool:
    """A call of the JSON API from the Obsidian app, which the API answers with CORS."""
    return headers.get("origin") == OBSIDIAN and path.startswith(API)


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
    app = from_obsidian(path, headers)
    if origin is not None and origin != f"{scheme}://{host}" and not app:
        return 403, "requests from another site's page are refused"
    navigation = headers.get("sec-fetch-mode") == "navigate"
    cross_site = headers.get("sec-fetch-site") == "cross-site"
    if cross_site and not app and not (navigation and path == "/"):
        return 403, "requests from another site's page are refused"
    return None


def _refused(why: tuple[int, str]) -> Response:
    return PlainTextResponse(why[1] + "\n", status_code=why[0])


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
        # The app reads every answer of the API, a refusal too: a 401 is then "the token",
        # not a network error.
        extra = {**_HEADERS, **_CORS} if from_obsidian(scope["path"], headers) else _HEADERS
        if scope["method"] == "OPTIONS" and extra is not _HEADERS:
            # The app's fetch asks first whether it may send its bearer header: a preflight
            # carries no token and reads nothing, its Host checked as the GET's will be.
            why = refusal("GET", scope["path"], headers, scope["scheme"], self.rules)
            answer = Response(status_code=204) if why is None else _refused(why)
            await self._secured(answer, extra)(scope, receive, send)
            return
        response = self._stopped(scope, headers)
        if response is not None:
            await self._secured(response, extra)(scope, receive, send)
            return
        await self.app(scope, receive, self._secured_send(send, extra))

    def _stopped(self, scope: Scope, headers: Headers) -> Response | None:
        why = refusal(scope["method"], scope["path"], headers, scope["scheme"], self.rules)
        if why is not None:
            return _refused(why)
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
    def _secured(response: Response, added: dict[str, str]) -> Response:
        for name, value in added.items():
            response.headers.setdefault(name, value)
        return response

    @staticmethod
    def _secured_send(send: Send, added: dict[str, str]) -> Send:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode()) for k, v in added.items() if k.encode() not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return secured

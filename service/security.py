"""Access control in front of every route: ``Host`` check, API keys and scopes, declared content types.

Every route declares what it needs where it is declared, in its decorator:
``openapi_extra=access(scope, *media_types)`` names its scope (``public``,
``read`` or ``write``; write implies read) and, for a POST/PUT/PATCH, the
request media types it accepts. `service.app.create_app` reads the
declarations with `route_rules` once the routers are included and hands the
table to `SecurityMiddleware`; a route without a declaration (or with one that
does not fit its method) stops ``create_app``: closed by default. At run time
a path no route matches, or a route added after ``create_app``, needs
``read`` for GET and ``write`` otherwise. `document_security` turns the same
declarations into the OpenAPI document's security and error responses.

`SecurityMiddleware` (pure ASGI, before any route reads the body):

1. ``Host`` (without port) must be one of the allowed hosts (`allowed_hosts`),
   else 400 ``bad_host`` on ``host``: a DNS-rebinding page reaches us under
   its own name.
2. With keys configured, ``Authorization: Bearer <key>``: missing or unknown
   key 401 (``WWW-Authenticate: Bearer``), a key without the route's scope
   403. The key is compared with every configured key in constant time
   (`hmac.compare_digest`, no early exit). ``request.state.principal`` is the
   key's id (`key_id`), ``None`` when no keys are configured.
3. POST/PUT/PATCH with a media type the route does not declare: 415 on
   ``content-type``, bodiless POSTs included (a cross-site form or
   ``text/plain`` request cannot change state). DELETE needs none. Routes
   that accept several media types dispatch on them; none checks again.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import error_response
from service.payloads import JSON_MEDIA_TYPE

PUBLIC, READ, WRITE = "public", "read", "write"
SCOPES = (PUBLIC, READ, WRITE)
KEY_SCOPES = (READ, WRITE)
#: the keys of an `access` declaration in a route's ``openapi_extra``
SCOPE_KEY, MEDIA_TYPES_KEY = "x-scope", "x-media-types"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class Rule:
    """What a route needs: a scope and, for a state change with a body, its accepted media types."""

    scope: str
    media_types: tuple[str, ...] = ()


def access(scope: str, *media_types: str) -> dict:
    """A route's declaration of what it needs, given as its decorator's ``openapi_extra``: ``scope``
    (public, read or write) and, for a POST/PUT/PATCH, the request media types it accepts, in the order
    a 415 names them. Merge it with other ``openapi_extra`` entries by ``{**access(...), **other}``."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    return {SCOPE_KEY: scope, MEDIA_TYPES_KEY: [media_type.lower() for media_type in media_types]}


def declared_rule(extra: dict | None) -> Rule | None:
    """The rule an `access` declaration gives; ``extra`` is a route's ``openapi_extra`` or an operation
    of the OpenAPI document (where FastAPI merges it). None without a declaration."""
    if not extra or SCOPE_KEY not in extra:
        return None
    return Rule(extra[SCOPE_KEY], tuple(extra.get(MEDIA_TYPES_KEY) or ()))


def key_id(key: str) -> str:
    """The id of an API key in logs and ``request.state.principal``: 8 hex digits of its SHA-256."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


def parse_key_entries(entries: Iterable[str]) -> list[tuple[str, str]]:
    """``(key, scope)`` pairs from ``key:scope`` strings; a ValueError (never echoing a key) if one is
    malformed: no colon, an empty key, a scope other than read or write, a key given twice."""
    pairs: list[tuple[str, str]] = []
    for position, entry in enumerate(entries, start=1):
        key, sep, scope = entry.strip().rpartition(":")
        key, scope = key.strip(), scope.strip().lower()
        if not sep:
            raise ValueError(f"api_keys entry {position} is not key:scope (scope read or write)")
        if not key:
            raise ValueError(f"api_keys entry {position} has an empty key")
        if scope not in KEY_SCOPES:
            raise ValueError(f"api_keys entry {position} (key id {key_id(key)}) has scope {scope!r}; "
                             "use read or write")
        if any(hmac.compare_digest(key.encode(), other.encode()) for other, _ in pairs):
            raise ValueError(f"api_keys entry {position} (key id {key_id(key)}) repeats an earlier key")
        pairs.append((key, scope))
    return pairs


def allowed_hosts(settings) -> list[str]:
    """The ``Host`` names served: ``settings.allowed_hosts``, or by default the bound host and the
    loopback names (lower case, without brackets)."""
    hosts = settings.allowed_hosts or [settings.host, *LOOPBACK_HOSTS]
    return sorted({host.strip().strip("[]").rstrip(".").lower() for host in hosts if host.strip()})


def host_name(header: str) -> str:
    """The host of a ``Host`` header without its port: ``[::1]:8000`` -> ``::1``, ``A.example.:80``
    -> ``a.example``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:
        header = header.split(":", 1)[0]
    return header.rstrip(".")


def host_allowed(name: str, allowed: Iterable[str]) -> bool:
    """Whether host ``name`` matches an allowed entry: equal, ``*``, or ``*.suffix`` for a subdomain."""
    for pattern in allowed:
        if pattern == "*" or pattern == name:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


@dataclass(frozen=True)
class _CompiledRule:
    method: str
    template: str
    pattern: re.Pattern
    rule: Rule


def _compile(rules: dict[tuple[str, str], Rule]) -> list[_CompiledRule]:
    return [_CompiledRule(method, template, compile_path(template)[0], rule)
            for (method, template), rule in rules.items()]


def _declaration_fault(method: str, rule: Rule | None) -> str | None:
    if rule is None:
        return "no access declaration (openapi_extra=service.security.access(...))"
    if rule.scope not in SCOPES:
        return f"scope {rule.scope!r} is not one of {', '.join(SCOPES)}"
    if method in BODY_METHODS and not rule.media_types:
        return "names no request media type (a state change with a body must name the ones it accepts)"
    if method not in BODY_METHODS and rule.media_types:
        return f"names request media types, but a {method} reads no body"
    return None


def route_rules(app) -> dict[tuple[str, str], Rule]:
    """``(method, path template) -> Rule`` for every HTTP route of ``app`` (HEAD left out: it follows
    GET), read from the routes' `access` declarations. A RuntimeError naming every route without a
    declaration, with a scope that is not public, read or write, with media types that do not fit its
    method, or that is not an HTTP route with methods (a mount, a websocket)."""
    from fastapi.routing import iter_route_contexts  # FastAPI >= 0.137.2: routers stay nested, this walks them

    rules: dict[tuple[str, str], Rule] = {}
    faults: list[str] = []
    for context in iter_route_contexts(app.routes):
        path = context.path or repr(context.original_route)
        methods = sorted(set(context.methods or ()) - {"HEAD"})
        if not methods:
            faults.append(f"{path}: not an HTTP route with methods, so it cannot declare its access")
        rule = declared_rule(getattr(context, "openapi_extra", None))
        for method in methods:
            fault = _declaration_fault(method, rule)
            if fault is not None:
                faults.append(f"{method} {path}: {fault}")
            elif rule is not None:  # always, without a fault: a missing declaration is one
                rules.setdefault((method, path), rule)  # the router answers with the first one too
    if faults:
        raise RuntimeError("routes without a valid access declaration: " + "; ".join(faults))
    return rules


def route_path(scope: Scope) -> str:
    """The path the router matches a request by: the ASGI scope's ``path`` less its ``root_path`` (a
    proxy's prefix) where the path begins with it as whole segments, else the path as it is (what
    starlette's router does; tests/service/test_framework_internals.py holds the two to the same
    answers). O(path)."""
    path: str = scope["path"]
    root_path = scope.get("root_path", "")
    if not root_path or not path.startswith(root_path):
        return path
    if path == root_path:
        return ""
    return path[len(root_path):] if path[len(root_path)] == "/" else path


class SecurityMiddleware:
    """Host check, API key and scope, and declared content types, in that order (see the module)."""

    def __init__(self, app: ASGIApp, keys: list[tuple[str, str]], hosts: list[str],
                 rules: dict[tuple[str, str], Rule]):
        self.app = app
        self.keys = [(key.encode("utf-8"), scope, key_id(key)) for key, scope in keys]
        self.hosts = hosts
        self.rules = _compile(rules)

    def rule_for(self, method: str, path: str) -> Rule | None:
        """The rule of the route ``method path`` matches (HEAD as GET; ``path`` as the router sees it,
        without the root path); None if no route matches."""
        method = "GET" if method == "HEAD" else method
        for compiled in self.rules:
            if compiled.method == method and compiled.pattern.match(path):
                return compiled.rule
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        rule = self.rule_for(method, route_path(scope))  # without a proxy's root path
        if rule is None:  # no such route: the router answers 404/405, after the key check
            rule = Rule(READ if method in ("GET", "HEAD", "OPTIONS") else WRITE)
        headers = Headers(scope=scope)
        refusal = (self._check_host(headers, rule) or self._check_key(scope, headers, rule)
                   or self._check_media_type(method, headers, rule))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check_host(self, headers: Headers, rule: Rule):
        if rule.scope == PUBLIC:
            return None
        header = headers.get("host")
        if header is None:
            return error_response(400, "bad_host", "the Host header is missing", "host")
        name = host_name(header)
        if host_allowed(name, self.hosts):
            return None
        return error_response(
            400, "bad_host",
            f"the Host header names {name[:100]!r}, which this service does not answer to; "
            "the allowed hosts are set with KPCA_ALLOWED_HOSTS", "host")

    def _check_key(self, scope: Scope, headers: Headers, rule: Rule):
        state = scope.setdefault("state", {})
        state["principal"] = None
        if not self.keys or rule.scope == PUBLIC:
            return None
        challenge = {"WWW-Authenticate": "Bearer"}
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return error_response(401, "unauthorized", "an API key is required: send the header "
                                  "'Authorization: Bearer <key>'", "authorization", challenge)
        presented = token.strip().encode("utf-8", "surrogateescape")
        found = None
        for key, key_scope, ident in self.keys:  # every key, no early exit: constant time
            if hmac.compare_digest(presented, key):
                found = (key_scope, ident)
        if found is None:
            return error_response(401, "unauthorized", "the API key is not valid", "authorization",
                                  {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        key_scope, ident = found
        state["principal"] = ident
        if rule.scope == WRITE and key_scope != WRITE:
            return error_response(403, "forbidden", f"{scope['method']} {scope['path']} needs an API key "
                                  f"with write scope; this key (id {ident}) has {key_scope}", "authorization")
        return None

    def _check_media_type(self, method: str, headers: Headers, rule: Rule):
        if method not in BODY_METHODS or not rule.media_types:
            return None
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type in rule.media_types:
            return None
        return error_response(
            415, "unsupported_media_type",
            f"Content-Type must be {' or '.join(rule.media_types)}, not {media_type[:100] or 'absent'}"
            + (" (a request without a body sends Content-Type: application/json too)"
               if rule.media_types == (JSON_MEDIA_TYPE,) else ""),
            "content-type")


def document_security(openapi: dict, keys_configured: bool) -> dict:
    """Turn the routes' `access` declarations in an OpenAPI document (FastAPI merges ``openapi_extra``
    into each operation) into what `SecurityMiddleware` answers: 400 (Host), 401/403 and the bearer
    scheme (with keys), 415 on routes that declare media types, and an optional JSON body on bodiless
    JSON state changes (cancel, resume, commit) so clients know to send ``Content-Type``. The
    declarations themselves are taken out of the document."""
    error_ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    has_error_body = "ErrorBody" in openapi.get("components", {}).get("schemas", {})

    def response(description: str) -> dict:
        return {"description": description, **({"content": error_ref} if has_error_body else {})}

    if keys_configured:
        openapi.setdefault("components", {}).setdefault("securitySchemes", {})["bearer"] = {
            "type": "http", "scheme": "bearer", "description": "an API key (KPCA_API_KEYS)"}
    for operations in openapi.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict):
                continue
            rule = declared_rule(operation)
            operation.pop(SCOPE_KEY, None)
            operation.pop(MEDIA_TYPES_KEY, None)
            if rule is None:
                continue
            responses = operation.setdefault("responses", {})
            if rule.scope != PUBLIC:
                responses.setdefault("400", response("the Host header is not an allowed host"))
                if keys_configured:
                    operation["security"] = [{"bearer": []}]
                    responses.setdefault("401", response("missing or invalid API key"))
                    if rule.scope == WRITE:
                        responses.setdefault("403", response("the API key lacks write scope"))
            if rule.media_types and method.upper() in BODY_METHODS:
                responses.setdefault("415", response(f"Content-Type is not {' or '.join(rule.media_types)}"))
                if "requestBody" not in operation and rule.media_types == (JSON_MEDIA_TYPE,):
                    operation["requestBody"] = {"required": False, "content": {
                        JSON_MEDIA_TYPE: {"schema": {"type": "object"}}}}
    return openapi

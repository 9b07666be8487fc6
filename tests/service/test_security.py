"""Access control (service/security.py) against a real server with API keys and CORS configured, a second
real server with nothing configured (the defaults), and ``python -m service`` run as a process.

Each test names the attack or careless use it defends against.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, Request

from service import Settings, create_app
from service.security import WRITE, access, key_id, route_rules
from tests.api_checks import assert_error
from tests.waiting import PATIENCE_S, answers_healthz, wait_until

READ_KEY = "r-0123456789abcdef-read"
WRITE_KEY = "w-fedcba9876543210-write"
OTHER_READ_KEY = "r2-another-reader"
ALLOWED_ORIGIN = "http://dashboard.example"
SERVER_SETTINGS = {
    "api_keys": f"{READ_KEY}:read, {WRITE_KEY}:write,{OTHER_READ_KEY}:read",
    "cors_origins": ALLOWED_ORIGIN,
}
JSON = {"Content-Type": "application/json"}
REPO = Path(__file__).resolve().parents[2]


def _client(server: str, key: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=server, timeout=60.0, headers=headers)


@pytest.fixture(scope="module")
def anonymous(server):
    with _client(server) as client:
        yield client


@pytest.fixture(scope="module")
def reader(server):
    with _client(server, READ_KEY) as client:
        yield client


@pytest.fixture(scope="module")
def writer(server):
    with _client(server, WRITE_KEY) as client:
        yield client


def _whoami(request: Request) -> dict:
    return {"principal": request.state.principal}


@contextlib.contextmanager
def _serve_without_lifespan(settings: Settings, root_path: str = ""):
    """A real uvicorn server on a free loopback port, without lifespan: the security middleware answers
    before any route, so no dask cluster is needed (routes that need one say 503). It has one more
    route, ``GET /v1/whoami`` (no rule: read), which returns ``request.state.principal``. ``root_path``:
    uvicorn's ``--root-path``, as behind a proxy that serves the service under that prefix."""
    app = create_app(settings)
    app.add_api_route("/v1/whoami", _whoami, methods=["GET"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", root_path=root_path))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    def started() -> bool:
        assert thread.is_alive(), "the server exited during its start"
        return uv.started

    wait_until(started, what="the server to start")
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        uv.should_exit = True
        thread.join(timeout=30)
        listener.close()


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """A real server with the default settings: no keys, no CORS, no allowed hosts."""
    with _serve_without_lifespan(Settings(data_dir=tmp_path_factory.mktemp("open"))) as base_url:
        yield base_url


def test_principal_is_the_key_id_or_none(open_server, tmp_path):
    # what per-key limits count on: the id of the key, never the key itself; None without keys
    with _client(open_server) as client:
        assert client.get("/v1/whoami").json() == {"principal": None}
    with _serve_without_lifespan(Settings(data_dir=tmp_path, api_keys=SERVER_SETTINGS["api_keys"])) as keyed:
        for key in (READ_KEY, WRITE_KEY):
            with _client(keyed, key) as client:
                assert client.get("/v1/whoami").json() == {"principal": key_id(key)}
        with _client(keyed) as client:
            assert client.get("/v1/whoami").status_code == 401


# ------------------------------------------------------------------ keys and scopes


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/datasets"), ("GET", "/metrics"), ("GET", "/openapi.json"),
    ("POST", "/v1/datasets"), ("DELETE", "/v1/datasets/anything"), ("GET", "/v1/no-such-route"),
])
def test_no_key_is_401_with_a_bearer_challenge(anonymous, method, path):
    # the schemathesis run that deleted everything sent no credentials
    response = anonymous.request(method, path, json={} if method == "POST" else None)
    assert_error(response, 401, "unauthorized", "authorization")
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("authorization", [
    f"Bearer {READ_KEY[:-1]}",  # a prefix of a real key
    f"Bearer {READ_KEY}x",  # a real key and more
    f"Bearer {READ_KEY.upper()}",
    f"Basic {READ_KEY}",  # the right secret in the wrong scheme
    "Bearer",
    READ_KEY,  # no scheme
    "Bearer ".encode() + "é".encode() * 8,  # not ASCII
])
def test_wrong_key_is_401(anonymous, authorization):
    response = anonymous.get("/v1/datasets", headers={"Authorization": authorization})
    assert_error(response, 401, "unauthorized", "authorization")
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_healthz_needs_no_key(anonymous):
    assert anonymous.get("/healthz").status_code == 200


def test_the_docs_page_needs_no_key_but_the_document_does(anonymous):
    # the page holds no data and asks for a key; the OpenAPI document stays behind the read scope
    assert anonymous.get("/docs").status_code == 200
    assert anonymous.get("/docs/assets/docs.js").status_code == 200
    assert anonymous.get("/openapi.json").status_code == 401
    assert anonymous.head("/openapi.json").status_code == 401


def test_every_configured_key_is_accepted_and_bearer_is_case_insensitive(anonymous):
    # compared against every key, not just the first
    for key in (READ_KEY, WRITE_KEY, OTHER_READ_KEY):
        assert anonymous.get("/v1/datasets", headers={"Authorization": f"bearer {key}"}).status_code == 200


def test_read_key_reads_but_cannot_change_state(reader, writer):
    writer.post("/v1/datasets", json={"name": "guarded", "n_features": 2}).raise_for_status()
    assert reader.get("/v1/datasets/guarded").status_code == 200
    assert reader.get("/metrics").status_code == 200
    for method, path, kwargs in [
        ("DELETE", "/v1/datasets/guarded", {}),
        ("POST", "/v1/datasets", {"json": {"name": "sneaky", "n_features": 2}}),
        ("PUT", "/v1/datasets/guarded/chunks/0", {"json": {"rows": [[1.0, 2.0]]}}),
        ("POST", "/v1/datasets/guarded/commit", {"json": {}}),
        ("POST", "/v1/models/any/cancel", {"json": {}}),
        ("POST", "/v1/models/any/resume", {"json": {}}),
        ("DELETE", "/v1/models/any", {}),
        ("POST", "/v1/models/any/transform", {"json": {}}),
        ("POST", "/v1/clusterings/any/cancel", {"json": {}}),
        ("POST", "/v1/datasets/img/from-image", {"content": b"x", "headers": {"Content-Type": "image/png"}}),
    ]:
        response = reader.request(method, path, **kwargs)
        message = assert_error(response, 403, "forbidden", "authorization")["message"]
        assert key_id(READ_KEY) in message and "write" in message, message
    assert reader.get("/v1/datasets/guarded").status_code == 200  # the DELETE did nothing
    assert reader.get("/v1/datasets/sneaky").status_code == 404


def test_read_key_may_serve_models(reader):
    # project, reconstruct, denoise, predict and events are reads: past the key check to the route's 404
    for path in ("/v1/models/absent/project", "/v1/models/absent/reconstruct", "/v1/models/absent/denoise",
                 "/v1/clusterings/absent/predict"):
        assert_error(reader.post(path, json={"rows": [[0.0]]}), 404, "not_found", "name")
    assert reader.get("/v1/models/absent/events").status_code == 404


def test_write_key_implies_read_and_deletes(writer):
    writer.post("/v1/datasets", json={"name": "doomed", "n_features": 2}).raise_for_status()
    assert writer.get("/v1/datasets/doomed").status_code == 200
    assert writer.delete("/v1/datasets/doomed").status_code == 204


def test_openapi_documents_the_bearer_scheme_and_the_errors(reader):
    assert reader.head("/openapi.json").status_code == 200
    document = reader.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    cancel = document["paths"]["/v1/models/{name}/cancel"]["post"]
    assert {"401", "403", "415"} <= set(cancel["responses"])
    assert cancel["requestBody"]["required"] is False  # a bodiless POST still declares JSON
    assert "403" not in document["paths"]["/v1/datasets"]["get"]["responses"]
    assert "security" not in document["paths"]["/healthz"]["get"]
    # the declarations became the entries above; they are not left in the document
    assert not [(path, method) for path, operations in document["paths"].items()
                for method, operation in operations.items() if {"x-scope", "x-media-types"} & set(operation)]


# ------------------------------------------------------------------ every route has a scope


def test_every_route_declares_a_scope():
    # create_app reads every route's access declaration and refuses to build an app with a route that has
    # none (see the next test), so this fails when a declaration is removed; the scopes follow the policy
    app = create_app(Settings(data_dir="/nonexistent-not-created"))
    rules = route_rules(app)
    assert len(rules) > 30 and ("GET", "/openapi.json") in rules and ("GET", "/docs/assets/{asset}") in rules
    for (method, path), rule in rules.items():
        if method in ("DELETE", "PUT") or path.endswith(("/cancel", "/resume", "/commit", "/transform")):
            assert rule.scope == WRITE, (method, path)


@pytest.mark.parametrize("method, extra, fault", [
    ("POST", None, "no access declaration"),
    ("GET", {"summary": "an openapi_extra without a scope"}, "no access declaration"),
    ("POST", access(WRITE), "names no request media type"),
    ("GET", access(WRITE, "application/json"), "names request media types, but a GET reads no body"),
    ("DELETE", {"x-scope": "admin"}, "scope 'admin' is not one of"),
])
def test_a_route_without_a_valid_declaration_stops_the_app(method, extra, fault):
    # closed by default: a router added without declarations, or with one that does not fit, is no silent fallback
    app = create_app(Settings(data_dir="/nonexistent-not-created"))
    extra_router = APIRouter(prefix="/v1")
    extra_router.add_api_route("/danger", lambda: None, methods=[method], openapi_extra=extra)
    app.include_router(extra_router)
    with pytest.raises(RuntimeError) as refused:
        route_rules(app)
    message = str(refused.value)
    assert f"{method} /v1/danger: {fault}" in message and "; " not in message, message  # that route only


def test_a_scope_outside_the_three_is_refused_where_it_is_declared():
    with pytest.raises(ValueError, match="'admin'"):
        access("admin")


def test_an_undeclared_route_needs_write(reader, writer):
    # fallback for paths no rule matches: read keys cannot POST, so a forgotten rule fails closed
    assert_error(reader.post("/v1/undeclared", json={}), 403, "forbidden", "authorization")
    assert writer.post("/v1/undeclared", json={}).status_code == 404


# ------------------------------------------------------------------ content types


@pytest.mark.parametrize("path", ["/v1/models/absent/cancel", "/v1/models/absent/resume",
                                  "/v1/clusterings/absent/cancel", "/v1/datasets/absent/commit"])
@pytest.mark.parametrize("headers", [{}, {"Content-Type": "text/plain"},
                                     {"Content-Type": "application/x-www-form-urlencoded"},
                                     {"Content-Type": "multipart/form-data; boundary=x"}])
def test_bodiless_state_changes_need_json(writer, path, headers):
    # a cross-site <form> or fetch(..., {mode: "no-cors"}) can send these without a preflight
    response = writer.post(path, headers=headers, content=b"a=1" if headers else None)
    assert_error(response, 415, "unsupported_media_type", "content-type")
    # the same request as JSON reaches the route: empty body or {}
    assert_error(writer.post(path, headers=JSON), 404, "not_found", "name")
    assert_error(writer.post(path, json={}), 404, "not_found", "name")


def test_json_routes_accept_a_charset_and_refuse_lookalikes(writer):
    body = b'{"name": "charset", "n_features": 2}'
    created = writer.post("/v1/datasets", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert created.status_code == 201, created.text
    for content_type in ("text/json", "application/jsonp", "text/plain; a=application/json"):
        response = writer.post("/v1/datasets", content=body, headers={"Content-Type": content_type})
        assert_error(response, 415, "unsupported_media_type", "content-type")


def test_chunk_and_image_routes_keep_their_declared_types(writer, reader):
    writer.post("/v1/datasets", json={"name": "typed", "n_features": 2}).raise_for_status()
    assert writer.put("/v1/datasets/typed/chunks/0", content=b"1,2\n3,4\n",
                      headers={"Content-Type": "text/csv"}).status_code == 200
    form = writer.put("/v1/datasets/typed/chunks/1", content=b"1,2\n", headers={"Content-Type": "text/plain"})
    assert_error(form, 415, "unsupported_media_type", "content-type")
    image = writer.post("/v1/datasets/img/from-image", content=b"x", headers={"Content-Type": "text/plain"})
    assert_error(image, 415, "unsupported_media_type", "content-type")
    project = reader.post("/v1/models/absent/project", content=b'{"rows": [[1]]}', headers={"Content-Type": "text/plain"})
    assert_error(project, 415, "unsupported_media_type", "content-type")
    # the routes that read their body themselves leave the refusal to the middleware, which names the types
    for client, method, path, content_type, accepted in (
            (writer, "POST", "/v1/models/import", "application/gzip", "application/x-tar or application/octet-stream"),
            (reader, "POST", "/v1/models/absent/denoise-image", "image/jpeg", "image/png or application/octet-stream"),
            (writer, "PUT", "/v1/datasets/typed/chunks/1", "application/x-npy",
             "application/octet-stream or application/json or text/csv")):
        response = client.request(method, path, content=b"x", headers={"Content-Type": content_type})
        message = assert_error(response, 415, "unsupported_media_type", "content-type")["message"]
        assert f"must be {accepted}, not {content_type}" in message, message
    assert writer.delete("/v1/datasets/typed").status_code == 204  # DELETE needs no content type


def test_the_key_is_checked_before_the_content_type(anonymous):
    response = anonymous.post("/v1/models/absent/cancel", headers={"Content-Type": "text/plain"})
    assert_error(response, 401, "unauthorized", "authorization")


def test_behind_a_root_path_every_route_keeps_its_rule(tmp_path):
    # uvicorn --root-path puts the proxy's prefix in front of scope["path"]; matched on that, no rule applied:
    # public pages asked for a key, reads needed write, and no content type was checked
    settings = Settings(data_dir=tmp_path, api_keys=SERVER_SETTINGS["api_keys"])
    with _serve_without_lifespan(settings, root_path="/kpca") as base_url:
        with _client(base_url) as anonymous:
            assert anonymous.get("/healthz").status_code == 200
            assert anonymous.get("/docs").status_code == 200
            assert_error(anonymous.get("/openapi.json"), 401, "unauthorized", "authorization")
        with _client(base_url, READ_KEY) as reader:
            assert reader.get("/openapi.json").json()["servers"][0] == {"url": "/kpca"}
            assert reader.post("/v1/models/m/project", json={"rows": [[1.0]]}).status_code == 503  # past the key
            assert_error(reader.post("/v1/models/m/cancel", json={}), 403, "forbidden", "authorization")
        with _client(base_url, WRITE_KEY) as writer:
            for method, path in (("PUT", "/v1/datasets/d/chunks/0"), ("POST", "/v1/datasets/d/from-image"),
                                 ("POST", "/v1/models/m/denoise-image"), ("POST", "/v1/models/import"),
                                 ("POST", "/v1/models/m/cancel")):
                response = writer.request(method, path, content=b"1\n", headers={"Content-Type": "text/plain"})
                assert_error(response, 415, "unsupported_media_type", "content-type")


# ------------------------------------------------------------------ Host


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example",
                                  "localhost.evil.example", "[::2]:80", ""])
def test_foreign_host_is_400_even_with_a_valid_key(writer, host):
    # DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends Host: <attacker>
    response = writer.get("/v1/datasets", headers={"Host": host})
    assert_error(response, 400, "bad_host", "host")
    response = writer.delete("/v1/datasets/whatever", headers={"Host": host})
    assert_error(response, 400, "bad_host", "host")


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:1234", "127.0.0.1", "[::1]:8000", "localhost."])
def test_loopback_hosts_are_served(reader, host):
    assert reader.get("/v1/datasets", headers={"Host": host}).status_code == 200


def test_healthz_answers_any_host(anonymous):
    assert anonymous.get("/healthz", headers={"Host": "probe.internal:8000"}).status_code == 200


def test_open_server_checks_host_too(open_server):
    # the default (no keys) is where rebinding matters most: nothing else stands in the way
    with _client(open_server) as client:
        assert_error(client.post("/v1/datasets", json={"name": "x", "n_features": 1},
                                 headers={"Host": "rebind.evil.example"}), 400, "bad_host", "host")
        assert client.get("/v1/datasets").status_code == 503  # no keys needed; no lifespan here
        assert_error(client.post("/v1/models/m/cancel", headers={"Content-Type": "text/plain"}),
                     415, "unsupported_media_type", "content-type")


def test_configured_hosts_replace_the_default():
    from service.security import allowed_hosts, host_allowed, host_name

    assert allowed_hosts(Settings(host="10.0.0.5")) == ["10.0.0.5", "127.0.0.1", "::1", "localhost"]
    hosts = allowed_hosts(Settings(allowed_hosts="kpca.example, *.corp.example"))
    assert host_allowed(host_name("KPCA.example:443"), hosts)
    assert host_allowed(host_name("a.corp.example"), hosts)
    assert not host_allowed(host_name("corp.example.evil"), hosts)
    assert not host_allowed(host_name("localhost"), hosts)


# ------------------------------------------------------------------ CORS


def _preflight(client: httpx.Client, origin: str) -> httpx.Response:
    return client.options("/v1/datasets", headers={"Origin": origin, "Access-Control-Request-Method": "POST",
                                                   "Access-Control-Request-Headers": "authorization,content-type"})


def test_cors_is_off_by_default(open_server):
    with _client(open_server) as client:
        response = _preflight(client, "http://evil.example")
        assert "access-control-allow-origin" not in response.headers
        simple = client.get("/healthz", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in simple.headers


def test_cors_allows_only_the_configured_origins(anonymous, reader):
    allowed = _preflight(anonymous, ALLOWED_ORIGIN)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    other = _preflight(anonymous, "http://evil.example")
    assert "access-control-allow-origin" not in other.headers
    response = reader.get("/v1/datasets", headers={"Origin": ALLOWED_ORIGIN})
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN


# ------------------------------------------------------------------ key configuration


@pytest.mark.parametrize("value, complaint", [
    ("secret-value:admin", "scope 'admin'"),
    (":read", "empty key"),
    ("secret-value", "not key:scope"),
    ("secret-value:read,secret-value:write", "repeats"),
])
def test_bad_key_configuration_is_refused(value, complaint):
    with pytest.raises(ValueError, match=complaint) as raised:
        Settings(api_keys=value)
    assert "secret-value" not in str(raised.value).split("input_value")[0]  # the message never shows a key


def test_keys_file_with_comments(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# operators\nops-key-1:write  # rotate monthly\n\nviewer-key:read\n")
    settings = Settings(api_keys="env-key:READ", api_keys_file=keys)
    assert settings.api_keys == ["env-key:read", "ops-key-1:write", "viewer-key:read"]
    keys.write_text("broken-key:root\n")
    with pytest.raises(ValueError, match="scope 'root'"):
        Settings(api_keys_file=keys)
    with pytest.raises(ValueError, match="cannot read"):
        Settings(api_keys_file=tmp_path / "absent")


# ------------------------------------------------------------------ python -m service: bind policy


def _service_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPCA_")}
    env.update(PYTHONPATH=str(REPO), KPCA_N_WORKERS="1", **overrides)
    return env


def _run_service(args: list[str], env: dict[str, str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service", "--data-dir", str(tmp_path / "data"), *args],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=PATIENCE_S)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_listening_beyond_loopback_without_keys_refuses_to_start(tmp_path, how):
    env = _service_env(**({"KPCA_HOST": "0.0.0.0"} if how == "env" else {}))
    done = _run_service(["--host", "0.0.0.0"] if how == "flag" else [], env, tmp_path)
    assert done.returncode == 2, done.stderr  # it exited (refused), rather than serve until the timeout
    assert "KPCA_API_KEYS" in done.stderr and "KPCA_ALLOW_UNAUTHENTICATED=1" in done.stderr
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_a_malformed_key_refuses_to_start_without_echoing_it(tmp_path):
    done = _run_service([], _service_env(KPCA_API_KEYS="very-secret-key:admin"), tmp_path)
    assert done.returncode == 2
    assert "api_keys" in done.stderr and "very-secret-key" not in done.stderr


def test_opt_out_serves_on_every_interface_and_says_so(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _service_env(KPCA_ALLOW_UNAUTHENTICATED="1", KPCA_PORT=str(port))
    process = subprocess.Popen([sys.executable, "-m", "service", "--host", "0.0.0.0", "--data-dir",
                                str(tmp_path / "data")], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        def up() -> bool:
            assert process.poll() is None, process.stderr.read()
            return answers_healthz(f"http://127.0.0.1:{port}")

        wait_until(up, what="python -m service to answer /healthz", interval=0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/datasets", timeout=10).status_code == 200
    finally:
        process.terminate()
        _, log = process.communicate(timeout=PATIENCE_S)
    assert "KPCA_ALLOW_UNAUTHENTICATED=1" in log and "every route open" in log, log


def test_without_keys_the_start_up_log_says_loopback_only(caplog):
    import service.__main__ as entry

    with caplog.at_level("INFO", logger="service"):
        entry._log_access_policy(Settings())
    assert "no API keys configured (KPCA_API_KEYS): listening on 127.0.0.1 only" in caplog.text
    assert entry.bind_refusal(Settings(host="::1")) is None
    assert entry.bind_refusal(Settings(host="192.168.1.4")) is not None
    assert entry.bind_refusal(Settings(host="192.168.1.4", api_keys="k:read")) is None

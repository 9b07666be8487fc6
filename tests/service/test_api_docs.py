"""``/docs`` without network access, and the completeness of the OpenAPI document.

Defends against: a ``/docs`` page that loads Swagger UI from a CDN (blank offline); an asset the page
names that the service does not serve; image routes whose "try it" cannot send a PNG; an event stream
documented as JSON; schema properties without a description, or described by paper citations.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest

from service import Settings, create_app
from tests.page_checks import Links, external

EXPECTED_TYPES = {".js": "text/javascript", ".css": "text/css", ".json": "application/json"}


@pytest.fixture(scope="module")
def document():
    return create_app(Settings(data_dir="/nonexistent-not-created")).openapi()


def test_docs_and_every_asset_come_from_the_service(api, server):
    page = api.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    parser = Links()
    parser.feed(page.text)
    links = [url for url in parser.urls if not url.startswith(("#", "data:"))]
    assert "/" in links, "no way back to the dashboard"
    for url in links:
        assert not external(url, server + "/docs"), f"/docs links to another host: {url}"
    assets = [url for url in links if url.startswith("/docs/assets/")]
    assert any(url.endswith(".js") for url in assets) and any(url.endswith(".css") for url in assets), assets
    for url in assets:
        assert not external(url, server + "/docs"), f"/docs references an external asset: {url}"
        response = api.get(urljoin(server + "/docs", url))
        assert response.status_code == 200, url
        suffix = "." + url.rsplit(".", 1)[-1]
        assert response.headers["content-type"].startswith(EXPECTED_TYPES[suffix]), (url, response.headers)
        # nor does an asset pull in another from elsewhere (script URLs, CSS url(), @import)
        for found in re.findall(r"https?://[^\s\"')]+", response.text):
            assert not external(found, server), f"{url} references {found}"


def test_the_page_reads_the_document_and_unknown_assets_are_404(api):
    assert "/openapi.json" in api.get("/docs/assets/docs.js").text
    assert api.get("/openapi.json").json()["paths"]
    assert api.get("/docs/assets/../app.py").status_code == 404
    assert api.get("/docs/assets/index.html").status_code == 404
    assert api.get("/redoc").status_code == 404  # ReDoc loads from a CDN too: not served


@pytest.mark.parametrize("path", ["/v1/datasets/{name}/from-image", "/v1/models/{name}/denoise-image"])
def test_image_routes_declare_a_png_body(document, path):
    body = document["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    binary = {"schema": {"type": "string", "format": "binary"}}  # the PNG's bytes, also sent as octet-stream
    assert body["content"] == {"image/png": binary, "application/octet-stream": binary}


def test_events_declare_an_event_stream(document):
    content = document["paths"]["/v1/models/{name}/events"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/event-stream"]
    assert content["text/event-stream"]["schema"]["properties"]["event"]["enum"] == ["progress", "status", "end"]


def test_progress_and_history_are_typed(document):
    for name in ("ModelPublic", "ClusteringPublic"):
        properties = document["components"]["schemas"][name]["properties"]
        assert {"$ref": "#/components/schemas/Progress"} in properties["progress"]["anyOf"], name
        assert properties["history"]["items"]["$ref"].endswith("PassRecord"), name


def test_every_schema_property_has_a_description_in_words(document):
    missing, cited = [], []
    for name, schema in document["components"]["schemas"].items():
        for prop, spec in (schema.get("properties") or {}).items():
            description = spec.get("description", "")
            if not description.strip():
                missing.append(f"{name}.{prop}")
            if re.search(r"seed \d{3}|§", description):
                cited.append(f"{name}.{prop}: {description}")
    assert not missing, f"{len(missing)} properties without a description: {missing}"
    assert not cited, cited


def test_operation_ids_are_the_route_names_and_unique(api):
    """Generated clients name their calls by operationId (issue 58, item 10): FastAPI's default made
    ``create_dataset_v1_datasets_post``; ours are the route functions' names, unique over the API."""
    schema = api.get("/openapi.json").json()
    ids = [op["operationId"] for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)]
    assert len(ids) == len(set(ids)) and len(ids) >= 40, ids
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", i) and "_v1_" not in i for i in ids), ids
    assert {"create_dataset", "put_chunk", "commit_dataset", "create_model", "project", "denoise_image"} <= set(ids)

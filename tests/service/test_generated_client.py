"""A Python client generated from the running service's ``/openapi.json`` by the standard generator
(openapi-python-client, from the test extra), then used for a user's whole path (issue 58, item 10): every
operation of the document generated and importable, and upload -> fit -> project -> denoise an image ->
export -> import through the generated functions alone, their bodies as the document declares them (.npy
and PNG as ``application/octet-stream`` files, JSON as the generated models)."""

from __future__ import annotations

import importlib
import io
import json
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from service.content_digest import content_digest
from tests.waiting import PATIENCE_S

PACKAGE = "kpca_generated_client"


@pytest.fixture(scope="module")
def generated(server, api, tmp_path_factory):
    """``(package, document, generator output)``: the client written by ``openapi-python-client generate``
    from the server's document, imported."""
    folder = tmp_path_factory.mktemp("generated")
    document = api.get("/openapi.json").json()
    (folder / "openapi.json").write_text(json.dumps(document))
    # no post hooks: the generator's default runs ruff from PATH, which a test does not rely on
    (folder / "config.json").write_text(json.dumps({"post_hooks": []}))
    generator = [sys.executable, "-c", "from openapi_python_client.cli import app; app()"]
    done = subprocess.run([*generator, "generate", "--path", str(folder / "openapi.json"), "--meta", "none",
                           "--output-path", str(folder / PACKAGE), "--config", str(folder / "config.json")],
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module(PACKAGE), document, output
    finally:
        sys.path.remove(str(folder))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_every_operation_is_generated_and_imports(generated):
    package, document, output = generated
    assert "will not be generated" not in output and "Unable to process schema" not in output, output
    operations = [(operation["tags"][0], operation["operationId"]) for path in document["paths"].values()
                  for method, operation in path.items() if method in ("get", "post", "put", "delete")]
    assert len(operations) >= 40
    for tag, operation_id in operations:  # a name the generator could not resolve (NameError) fails the import
        module = importlib.import_module(f"{PACKAGE}.api.{tag}.{operation_id}")
        assert callable(module.sync_detailed), operation_id


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_upload_fit_project_denoise_export_import_through_the_generated_client(generated, server, rng):
    package, _, _ = generated
    models = importlib.import_module(f"{PACKAGE}.models")
    File = importlib.import_module(f"{PACKAGE}.types").File
    ops = {name: importlib.import_module(f"{PACKAGE}.api.{name}") for name in (
        "datasets.create_dataset", "datasets.get_dataset", "datasets.put_chunk", "datasets.commit_dataset",
        "models.create_model", "models.get_model", "serving.project", "denoising.denoise_image_fit",
        "models.export_model", "models.import_model")}
    client = package.Client(base_url=server, timeout=PATIENCE_S, raise_on_unexpected_status=True)

    rows = rng.normal(size=(120, 4))
    made = ops["datasets.create_dataset"].sync_detailed(
        client=client, body=models.DatasetCreate.from_dict({"name": "gen", "n_features": 4}))
    assert made.status_code == 201, made.content

    body = _npy(rows)
    altered = ops["datasets.put_chunk"].sync_detailed(  # a digest of other bytes: refused, nothing stored
        "gen", 0, client=client, body=File(payload=io.BytesIO(body)), content_digest=content_digest(body + b"x"))
    assert altered.status_code == 400 and altered.parsed.error.field == "content-digest", altered.content
    unchanged = ops["datasets.get_dataset"].sync("gen", client=client)
    assert unchanged.chunks == [] and unchanged.staged == [] and unchanged.n_rows == 0, unchanged.to_dict()
    stored = ops["datasets.put_chunk"].sync_detailed(
        "gen", 0, client=client, body=File(payload=io.BytesIO(body)), content_digest=content_digest(body))
    assert stored.status_code == 200, stored.content
    committed = ops["datasets.commit_dataset"].sync_detailed("gen", client=client)
    assert committed.status_code == 200 and committed.parsed.n_rows == 120, committed.content

    fit = ops["models.create_model"].sync_detailed(client=client, body=models.ModelCreate.from_dict(
        {"name": "gen-model", "dataset": "gen", "kernel": {"type": "gaussian", "sigma": 2.0}, "n_components": 3}))
    assert fit.status_code == 202, fit.content
    deadline = time.monotonic() + PATIENCE_S
    while (model := ops["models.get_model"].sync_detailed("gen-model", client=client).parsed).status != "completed":
        assert model.status in ("queued", "running") and time.monotonic() < deadline, model.to_dict()
        time.sleep(0.2)

    projected = ops["serving.project"].sync_detailed(
        "gen-model", client=client, body=models.ProjectRequest.from_dict({"rows": rows[:5].tolist()}))
    assert projected.status_code == 200, projected.content
    assert np.asarray(projected.parsed.components).shape == (5, 3)

    pixels = np.clip(np.linspace(0, 255, 32)[None, :] + rng.normal(0, 20, (32, 32)), 0, 255).astype(np.uint8)
    denoised = ops["denoising.denoise_image_fit"].sync_detailed(client=client,
                                                                body=File(payload=io.BytesIO(_png(pixels))))
    assert denoised.status_code == 200 and denoised.headers["content-type"] == "image/png", denoised.content
    answer = np.asarray(Image.open(denoised.parsed.payload))  # the PNG as a File (declared as octet-stream too)
    assert answer.shape == pixels.shape and answer.dtype == pixels.dtype

    archive = ops["models.export_model"].sync_detailed("gen-model", client=client)
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/x-tar"
    imported = ops["models.import_model"].sync_detailed(
        client=client, body=File(payload=archive.parsed.payload), name="gen-imported")
    assert imported.status_code == 201, imported.content
    again = ops["serving.project"].sync_detailed(
        "gen-imported", client=client, body=models.ProjectRequest.from_dict({"rows": rows[:5].tolist()}))
    np.testing.assert_allclose(again.parsed.components, projected.parsed.components, rtol=0, atol=1e-12)


def test_the_docs_example_generates_a_client_and_uses_it(server, tmp_path):
    """docs/api.md's two blocks, as pasted: the generator on the served document, then the Python session."""
    from tests.service.test_readme import block, run

    after = "Python generator (openapi-python-client; `make run` installs it into `.venv`, or " \
            "`pip install openapi-python-client`):"
    generate = run(block("docs/api.md", after, "bash"), server, tmp_path)
    assert generate.returncode == 0 and (tmp_path / "kpca_api" / "client.py").exists(), generate.stderr[-3000:]
    script = block("docs/api.md", "Then, in Python, in the same folder:", "python")
    session = run(f"{sys.executable} - <<'PYTHON'\n{script}PYTHON\n", server, tmp_path)
    assert session.returncode == 0, session.stderr[-3000:]
    assert "200 rows committed" in session.stdout and "denoised (48, 48)" in session.stdout, session.stdout

"""The whole path through HTTP only: a real `python -m service` process (uvicorn
on a free loopback port, embedded LocalCluster, zarr on disk), a real client.

Upload digits in several chunks (.npy and JSON), commit, fit kha-smd, poll to
completion, project held-out rows and compare with the exact kernel PCA.
"""

import io

import httpx
import numpy as np
import pytest

from kpca.estimator import KernelHebbianPCA
from service_process import running_service
from tests.waiting import wait_until

N_TRAIN, R = 600, 4


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e-data")


@pytest.fixture(scope="module")
def server(data_dir):
    with running_service(data_dir) as url:
        yield url


def test_upload_fit_poll_project(server, digits):
    api = httpx.Client(base_url=server, timeout=60)
    X = digits[:N_TRAIN].astype(np.float32)
    assert api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float32"}).status_code == 201
    for i, chunk in enumerate(np.array_split(X, 5)):
        if i % 2:
            r = api.put(f"/v1/datasets/digits/chunks/{i}", json={"rows": chunk.tolist()})
        else:
            buf = io.BytesIO()
            np.save(buf, chunk)
            r = api.put(f"/v1/datasets/digits/chunks/{i}", content=buf.getvalue(),
                        headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 200, r.text
    # a fit on an uncommitted set is refused
    early = api.post("/v1/models", json={"name": "early", "dataset": "digits", "n_components": R,
                                         "kernel": {"type": "gaussian", "sigma": 3.0}})
    assert early.status_code == 409 and early.json()["error"]["field"] == "dataset"
    meta = api.post("/v1/datasets/digits/commit", json={}).json()
    assert meta["status"] == "ready" and meta["n_rows"] == N_TRAIN and meta["checksum"].startswith("sha256:")

    r = api.post("/v1/models", json={"name": "digits-rbf", "dataset": "digits", "n_components": R,
                                     "kernel": {"type": "gaussian", "sigma": 3.0}, "solver": "kha-smd",
                                     "params": {"passes": 20, "seed": 0, "init": "random"}})  # the paper's start
    assert r.status_code == 202 and r.headers["Location"] == "/v1/models/digits-rbf"
    seen_passes, seen = set(), {}

    def ended() -> bool:
        model = seen["model"] = api.get("/v1/models/digits-rbf").json()
        if model["progress"]:
            seen_passes.add(model["progress"]["pass"])
        return model["status"] not in ("queued", "running")

    wait_until(ended, what=lambda: f"the fit to end (last seen: {seen['model']})", interval=0.1)
    model = seen["model"]
    assert model["status"] == "completed", model["error"]
    assert len(seen_passes) >= 2  # progress was visible while it ran
    history = model["history"]
    assert [h["pass"] for h in history] == list(range(1, 21))
    assert history[-1]["convergence"]["metric"] == "excess_error"
    assert history[-1]["convergence"]["value"] < 0.02 < history[0]["convergence"]["value"]
    assert model["params_used"]["eta0"] > 0 and model["params_used"]["mu"] > 0

    held_out = digits[1000:1040]
    Z = np.asarray(api.post("/v1/models/digits-rbf/project", json={"rows": held_out.tolist()}).json()["components"])
    exact = KernelHebbianPCA(R, kernel="gaussian", sigma=3.0, solver="exact").fit(X.astype(np.float64))
    Z_exact = exact.transform(held_out)
    for j in range(R):  # component by component, up to sign
        corr = abs(np.corrcoef(Z[:, j], Z_exact[:, j])[0, 1])
        scale = np.linalg.norm(Z[:, j]) / np.linalg.norm(Z_exact[:, j])
        assert corr > 0.99 and abs(scale - 1) < 0.05, (j, corr, scale)

    # unknown model, wrong width
    assert api.post("/v1/models/nope/project", json={"rows": [[0.0] * 64]}).status_code == 404
    bad = api.post("/v1/models/digits-rbf/project", json={"rows": [[0.0] * 3]})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "rows"


def test_models_and_data_sets_survive_a_restart(server, data_dir, digits):
    """Runs after the fit above: a second service on the same data folder serves the same model."""
    before = httpx.get(f"{server}/v1/models/digits-rbf").json()
    rows = {"rows": digits[1000:1005].tolist()}
    Z_before = httpx.post(f"{server}/v1/models/digits-rbf/project", json=rows).json()["components"]
    with running_service(data_dir) as other:
        after = httpx.get(f"{other}/v1/models/digits-rbf", timeout=30).json()
        assert after["status"] == "completed" and after["history"] == before["history"]
        assert httpx.get(f"{other}/v1/datasets/digits").json()["checksum"] == \
            httpx.get(f"{server}/v1/datasets/digits").json()["checksum"]
        Z_after = httpx.post(f"{other}/v1/models/digits-rbf/project", json=rows, timeout=60).json()["components"]
    np.testing.assert_allclose(Z_after, Z_before, rtol=1e-12)

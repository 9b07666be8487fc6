"""``/v1/clusterings`` over a real server and cluster: spectral clustering of well separated blobs (VI 0
against reference labels), a random reference labelling (VI near its expected value), the routes,
bad input as 4xx naming the field, cancel and resume ending where an uninterrupted run ends, predict,
and the pages of labels."""

import io

import numpy as np
import pytest

from kpca.metrics import variation_of_information
from tests.api_checks import assert_error, error_message, npy_bytes, upload_rows, wait_for_fit, wait_for_pass

ROUTE = "/v1/clusterings"
PER_BLOB, N_FEATURES, SPREAD = 30, 4, 12.0
N = 3 * PER_BLOB
KERNEL = {"type": "gaussian", "sigma": 3.0}
CENTRES = SPREAD * np.eye(3, N_FEATURES)


@pytest.fixture(scope="module")
def blobs(api):
    """Three blobs (unit spread, centres 12 apart), shuffled, and data sets of labels: the truth, a random
    labelling, one row short, two columns; an uncommitted set."""
    rng = np.random.default_rng(16)
    truth = rng.permutation(np.repeat(np.arange(3), PER_BLOB))
    X = CENTRES[truth] + rng.normal(size=(N, N_FEATURES))
    upload_rows(api, "blobs", X)
    upload_rows(api, "truth", truth[:, None].astype(float))
    random = rng.integers(0, 3, size=N)
    upload_rows(api, "random", random[:, None].astype(float))
    upload_rows(api, "short", truth[:-1, None].astype(float))
    upload_rows(api, "wide", np.stack([truth, truth], axis=1).astype(float))
    upload_rows(api, "open", X, commit=False)
    return X, truth, random


def body(**changes):
    asked = {"name": "c", "dataset": "blobs", "n_clusters": 3, "kernel": KERNEL, "solver": "kha-smd",
             "params": {"passes": 3, "seed": 1, "init": "random"}, "labels_dataset": "truth"}
    return {**asked, **changes}


def start(api, **changes):
    response = api.post(ROUTE, json=body(**changes))
    assert response.status_code == 202, response.text
    assert response.headers["Location"] == f"{ROUTE}/{changes.get('name', 'c')}"
    return response.json()


def wait(api, name):
    return wait_for_fit(api, name, route=ROUTE)


@pytest.fixture(scope="module")
def found(api, blobs):
    """The blobs clustered by kha-smd (3 passes from the paper's random start) against the true labels."""
    assert start(api, name="found")["status"] == "queued"
    record = wait(api, "found")
    assert record["status"] == "completed", record["error"]
    return record


def test_separated_blobs_have_vi_zero_against_their_labels(found, blobs):
    _, truth, _ = blobs
    assert found["variation_of_information"] == 0.0
    assert found["labels_total"] == N and found["labels_offset"] == 0 and found["next"] is None
    assert variation_of_information(found["labels"], truth) == 0.0 and set(found["labels"]) == {0, 1, 2}
    history = found["history"]
    assert [h["pass"] for h in history] == [1, 2, 3]
    assert all(h["variation_of_information"] is not None for h in history)
    assert history[-1]["variation_of_information"] == 0.0
    assert history[0]["labels_change"] is None and all(h["labels_change"] >= 0.0 for h in history[1:])
    assert all(h["convergence"]["metric"] == "excess_error" for h in history)
    assert history[-1]["eigenvalues"][0] == pytest.approx(1.0, abs=1e-2)  # L's top eigenvalue is 1
    assert found["params_used"]["kernel"] == KERNEL and found["params_used"]["init"] == "random"
    assert found["progress"]["pass"] == found["progress"]["passes"] == 3


def test_exact_solver_in_one_go_and_no_reference_labels(api, blobs):
    _, truth, _ = blobs
    start(api, name="exact", solver="exact", params={}, labels_dataset=None, kernel={"type": "laplacian"})
    record = wait(api, "exact")
    assert record["status"] == "completed", record["error"]
    assert record["variation_of_information"] is None and record["labels_dataset"] is None
    assert record["history"][-1]["variation_of_information"] is None
    assert record["params_used"]["kernel"]["sigma"] > 0  # "auto" resolved once, at the start
    assert variation_of_information(record["labels"], truth) == 0.0
    error = error_message(api.post(f"{ROUTE}/exact/resume", json={}), 409, "conflict", "name")
    assert "in one go" in error


def test_random_reference_labels_give_vi_near_its_expected_value(api, blobs):
    """The VI recorded against a random labelling is what the permutation model expects of it."""
    _, truth, random = blobs
    start(api, name="vs-random", solver="exact", params={}, labels_dataset="random")
    record = wait(api, "vs-random")
    assert record["status"] == "completed", record["error"]
    vi = record["variation_of_information"]
    assert vi == pytest.approx(variation_of_information(random, record["labels"]), abs=1e-12)
    rng = np.random.default_rng(3)
    draws = [variation_of_information(rng.permutation(random), record["labels"]) for _ in range(200)]
    assert abs(vi - np.mean(draws)) < 4 * np.std(draws)
    assert vi > 1.5  # close to H + H' = 2 log 3 = 2.2 less the chance agreement of 90 rows


def test_list_read_and_delete(api, found):
    listed = api.get(ROUTE).json()["clusterings"]
    assert "found" in [c["name"] for c in listed] and all("labels" not in c for c in listed)
    assert api.get(f"{ROUTE}/found", params={"labels_limit": 0}).json()["labels"] is None
    start(api, name="doomed", params={"passes": 1, "init": "random"})
    wait(api, "doomed")
    assert api.delete(f"{ROUTE}/doomed").status_code == 204
    assert_error(api.get(f"{ROUTE}/doomed"), 404, "not_found", "name")
    assert_error(api.delete(f"{ROUTE}/doomed"), 404, "not_found", "name")
    assert_error(api.post(f"{ROUTE}/doomed/predict", json={"rows": [[0.0] * N_FEATURES]}), 404, "not_found", "name")
    assert_error(api.get(f"{ROUTE}/bad..name"), 422, "invalid", "name")


@pytest.mark.parametrize("changes, status, code, field", [
    ({"n_clusters": 1}, 422, "invalid", "n_clusters"),
    ({"n_clusters": N}, 422, "invalid", "n_clusters"),
    ({"n_clusters": N + 1}, 422, "invalid", "n_clusters"),
    ({"n_clusters": 2.5}, 422, "invalid", "n_clusters"),
    ({"dataset": "absent"}, 404, "not_found", "dataset"),
    ({"dataset": "open"}, 409, "conflict", "dataset"),
    ({"solver": "newton"}, 422, "invalid", "solver"),
    ({"solver": "nystrom"}, 422, "invalid", "solver"),
    ({"kernel": {"type": "polynomial", "degree": 2}}, 422, "invalid", "kernel.type"),
    ({"kernel": {"type": "gaussian", "sigma": -1}}, 422, "invalid", "kernel.sigma"),
    ({"params": {"eta0": -1.0}}, 422, "invalid", "params.eta0"),
    ({"params": {"landmarks": 10}}, 422, "invalid", "params.landmarks"),
    ({"params": {"init": "rskpca"}}, 422, "invalid", "params.init"),
    ({"params": {"init": "subset", "init_size": 2}}, 422, "invalid", "params.init_size"),
    ({"params": {"workers": 1}}, 422, "invalid", "params.workers"),  # placement, not a solver's parameter
    ({"placement": {"workers": 1}}, 422, "invalid", "placement"),  # clusterings run on one worker
    ({"labels_dataset": "short"}, 422, "invalid", "labels_dataset"),
    ({"labels_dataset": "wide"}, 422, "invalid", "labels_dataset"),
    ({"labels_dataset": "absent"}, 404, "not_found", "labels_dataset"),
    ({"labels_dataset": "open"}, 409, "conflict", "labels_dataset"),
    ({"n_components": 3}, 422, "invalid", "n_components"),
    ({"name": "../x"}, 422, "invalid", "name"),
])
def test_bad_input_is_4xx_naming_the_field(api, blobs, changes, status, code, field):
    message = error_message(api.post(ROUTE, json=body(**{"name": "bad", **changes})), status, code, field)
    assert field.split(".")[-1] in message or status != 422
    assert_error(api.get(f"{ROUTE}/bad"), 404, "not_found", "name")  # nothing was created


def test_name_clash_is_409(api, found):
    assert_error(api.post(ROUTE, json=body(name="found")), 409, "conflict", "name")


def test_cancel_then_resume_ends_where_an_uninterrupted_run_ends(api, blobs):
    params = {"passes": 5000, "seed": 2, "init": "random", "block_size": 10}
    start(api, name="stoppable", params=params)
    wait_for_pass(api, "stoppable", 1, route=ROUTE)
    assert api.post(f"{ROUTE}/stoppable/cancel", json={}).status_code == 202
    record = wait(api, "stoppable")
    assert record["status"] == "cancelled" and record["labels"] is None
    done = record["progress"]["pass"]
    assert 1 <= done < 5000
    assert_error(api.post(f"{ROUTE}/stoppable/cancel", json={}), 409, "conflict", "name")
    message = error_message(api.post(f"{ROUTE}/stoppable/predict", json={"rows": [[0.0] * N_FEATURES]}),
                            409, "conflict", "name")
    assert "'cancelled'" in message  # names the state
    assert_error(api.post(f"{ROUTE}/stoppable/resume", json={"passes": done}), 422, "invalid", "passes")
    assert_error(api.post(f"{ROUTE}/stoppable/resume", json={"dataset_version": 2}), 422, "invalid",
                 "dataset_version")  # a clustering's data set version is fixed
    resumed = api.post(f"{ROUTE}/stoppable/resume", json={"passes": done + 2})
    assert resumed.status_code == 202 and resumed.json()["status"] == "queued"
    assert resumed.headers["Location"] == f"{ROUTE}/stoppable"
    record = wait(api, "stoppable")
    assert record["status"] == "completed", record["error"]
    assert [h["pass"] for h in record["history"]] == list(range(1, done + 3))
    assert record["history"][done]["labels_change"] is not None  # against the checkpoint's labels

    start(api, name="straight", params={**params, "passes": done + 2})
    straight = wait(api, "straight")
    assert straight["status"] == "completed", straight["error"]
    assert record["labels"] == straight["labels"]
    assert record["history"][-1]["eigenvalues"] == straight["history"][-1]["eigenvalues"]
    assert record["history"][-1]["convergence"] == straight["history"][-1]["convergence"]
    assert record["variation_of_information"] == straight["variation_of_information"] == 0.0


def test_predict_new_points_of_the_blobs(api, found, blobs):
    _, truth, _ = blobs
    labels = np.asarray(found["labels"])
    cluster_of = {c: int(labels[truth == c][0]) for c in range(3)}  # the found name of each true blob
    rng = np.random.default_rng(5)
    new_truth = np.arange(12) % 3
    new = CENTRES[new_truth] + rng.normal(size=(12, N_FEATURES))
    response = api.post(f"{ROUTE}/found/predict", json={"rows": new.tolist()})
    assert response.status_code == 200, response.text
    assert response.json()["labels"] == [cluster_of[c] for c in new_truth]
    X, _, _ = blobs
    assert api.post(f"{ROUTE}/found/predict", json={"rows": X[:20].tolist()}).json()["labels"] == found["labels"][:20]
    assert_error(api.post(f"{ROUTE}/found/predict", json={"rows": [[0.0] * 3]}), 422, "invalid", "rows")
    assert_error(api.post(f"{ROUTE}/found/predict", json={"rows": []}), 422, "invalid", "rows")
    as_npy = api.post(f"{ROUTE}/found/predict", content=npy_bytes(new.astype(np.float32)),
                      headers={"Content-Type": "application/octet-stream"})  # the rows as .npy bytes
    assert as_npy.status_code == 200, as_npy.text
    assert as_npy.json()["labels"] == [cluster_of[c] for c in new_truth]
    for asked in ({"params": {"format": "npy"}}, {"headers": {"Accept": "application/octet-stream"}}):
        labels_npy = api.post(f"{ROUTE}/found/predict", json={"rows": new.tolist()}, **asked)  # labels as .npy
        assert labels_npy.headers["content-type"] == "application/octet-stream", labels_npy.text
        answer = np.load(io.BytesIO(labels_npy.content), allow_pickle=False)
        assert answer.dtype == np.int64 and answer.tolist() == [cluster_of[c] for c in new_truth]


def test_labels_come_a_page_at_a_time(api, found):
    pages, url = [], f"{ROUTE}/found?labels_limit=40"
    while url is not None:
        page = api.get(url).json()
        assert page["labels_total"] == N and len(page["labels"]) <= 40
        pages.append(page)
        url = page["next"]
    assert [p["labels_offset"] for p in pages] == [0, 40, 80]
    assert sum((p["labels"] for p in pages), []) == found["labels"]
    end = api.get(f"{ROUTE}/found", params={"labels_offset": N}).json()
    assert end["labels"] == [] and end["next"] is None
    assert_error(api.get(f"{ROUTE}/found", params={"labels_offset": N + 1}), 422, "invalid", "labels_offset")
    assert_error(api.get(f"{ROUTE}/found", params={"labels_offset": -1}), 422, "invalid", "labels_offset")
    assert_error(api.get(f"{ROUTE}/found", params={"labels_limit": 100_001}), 422, "invalid", "labels_limit")


def test_fewer_directions_than_clusters_fail_naming_n_clusters(api):
    """Two distinct points, repeated: L has rank 2, so 3 clusters cannot be found; the failed record says
    which request field to change (n_clusters, not a model's n_components)."""
    upload_rows(api, "two-points", np.repeat([[0.0, 0.0], [1.0, 1.0]], 6, axis=0))
    start(api, name="rank-two", dataset="two-points", solver="exact", params={}, labels_dataset=None)
    record = wait(api, "rank-two")
    assert record["status"] == "failed" and record["error"]["code"] == "degenerate", record
    assert "n_clusters <= 2" in record["error"]["message"], record["error"]


def test_the_clusters_are_drawn_and_their_coordinates_kept(api, found, blobs, data_dir):
    """``GET /v1/clusterings/{name}/clusters.png`` (issue 58): the rows at their two leading spectral coordinates,
    coloured by cluster and, beside them, by the reference labels; the coordinates kept when the clustering
    completed (checked against their digest) separate the three blobs. Refused (409 on name, saying why) while a
    clustering runs."""
    import io

    from PIL import Image

    from store.jobs.clusterings import ClusteringRegistry

    assert found["pictures"] == {"clusters": f"{ROUTE}/found/clusters.png"}
    r = api.get(f"{ROUTE}/found/clusters.png")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png", r.text[:300]
    picture = np.asarray(Image.open(io.BytesIO(r.content)).convert("RGB"))
    assert picture.shape[1] > picture.shape[0] and len(np.unique(picture.reshape(-1, 3), axis=0)) > 20
    registry = ClusteringRegistry(data_dir)
    xy = registry.coordinates("found", registry.get("found").coordinates_sha256)
    _, truth, _ = blobs
    centres = np.array([xy[truth == k].mean(axis=0) for k in range(3)])
    spread = max(np.abs(xy[truth == k] - centres[k]).max() for k in range(3))
    gaps = [np.linalg.norm(centres[a] - centres[b]) for a in range(3) for b in range(a + 1, 3)]
    assert xy.shape == (N, 2) and min(gaps) > 2 * spread, (gaps, spread)
    start(api, name="drawn-early", params={"passes": 3000, "seed": 1, "init": "random", "tol": 0})
    early = api.get(f"{ROUTE}/drawn-early/clusters.png")
    if early.status_code == 409:  # still running (it usually is): said, on name
        assert early.json()["error"]["field"] == "name" and "once it has completed" in early.json()["error"]["message"]
    api.post(f"{ROUTE}/drawn-early/cancel")

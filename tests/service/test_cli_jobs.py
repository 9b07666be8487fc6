"""The ``kpca`` commands a user reaches for after the first fit, through a real server: ``cancel``,
``resume --passes``, ``show``, ``cluster``, ``rm --cascade``, ``--kernel rbf``, ``serve --help``, and
the CLI's messages in its own flags (issue 29's stumbles 1-3 and 7).

Defends against: a command that exists in the dashboard or the API but not on the command line; a
refusal that names an API spelling (``?cascade=true``, ``name=...``, ``append=True``) the CLI has no
option for; re-uploading the same rows cut another way refused as different.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import numpy as np

from tests.api_checks import upload_rows, wait_for_fit, wait_for_pass
from tests.waiting import PATIENCE_S


def _npy_chunks(api, name: str, X: np.ndarray, chunks: int) -> None:
    """Data set ``name`` uploaded as the README's Python session does: ``np.array_split(X, chunks)``."""
    api.post("/v1/datasets", json={"name": name, "n_features": X.shape[1], "dtype": "float32"}).raise_for_status()
    for i, chunk in enumerate(np.array_split(X, chunks)):
        buffer = io.BytesIO()
        np.save(buffer, chunk)
        api.put(f"/v1/datasets/{name}/chunks/{i}", content=buffer.getvalue(),
                headers={"Content-Type": "application/octet-stream"}).raise_for_status()
    api.post(f"/v1/datasets/{name}/commit", json={}).raise_for_status()


def test_the_same_rows_cut_by_array_split_are_a_no_op(kpca, api, digits, tmp_path):
    """Stumble 1: 1797 digits uploaded as chunks of 450/449/449/449, then ``kpca upload`` of the same
    array: nothing to do. Other rows are refused in the CLI's words (``--append``)."""
    X = digits.astype(np.float32)
    _npy_chunks(api, "digits", X, 4)
    before = api.get("/v1/datasets/digits").json()
    path = tmp_path / "digits.npy"
    np.save(path, X)
    again = kpca("upload", "digits", str(path))
    assert again.exit_code == 0, again.output
    after = api.get("/v1/datasets/digits").json()
    assert (after["version"], after["checksum"], after["staged"]) == (1, before["checksum"], [])

    np.save(path, X[::-1])
    other = kpca("upload", "digits", str(path))
    assert other.exit_code == 1 and "--append" in other.stderr and "append=True" not in other.stderr, other.stderr
    assert api.get("/v1/datasets/digits").json()["checksum"] == before["checksum"]


def test_rm_and_import_speak_in_flags(kpca, api, rng, tmp_path):
    """Stumble 2: the refusals name ``--cascade`` and ``--name``, never the API's query parameters."""
    upload_rows(api, "used", rng.normal(size=(40, 3)))
    assert kpca("fit", "user", "--dataset", "used", "--sigma", "2", "--components", "2", "--passes", "1",
                "--wait").exit_code == 0
    refused = kpca("rm", "datasets", "used")
    assert refused.exit_code == 1 and "--cascade" in refused.stderr and "?cascade" not in refused.stderr, refused.stderr
    assert kpca("rm", "models", "user", "--cascade").exit_code == 2  # only data sets have dependents

    archive = tmp_path / "user.tar"
    assert kpca("export", "user", "-o", str(archive)).exit_code == 0
    clash = kpca("import", str(archive))
    assert clash.exit_code == 1 and "--name" in clash.stderr and "name=" not in clash.stderr, clash.stderr

    deleted = kpca("rm", "datasets", "used", "--cascade")
    assert deleted.exit_code == 0, deleted.output
    assert api.get("/v1/models/user").status_code == 404 and api.get("/v1/datasets/used").status_code == 404


def test_kernel_rbf_is_the_gaussian_kernel(kpca, api, rng):
    """Stumble 3: scikit-learn's name works on the command line and in the API, with sigma or gamma."""
    upload_rows(api, "rbf-set", rng.normal(size=(50, 3)))
    fitted = kpca("fit", "rbf-cli", "--dataset", "rbf-set", "--kernel", "rbf", "--sigma", "2", "--components", "2",
                  "--passes", "1", "--wait")
    assert fitted.exit_code == 0, fitted.output
    assert api.get("/v1/models/rbf-cli").json()["kernel"] == {"type": "gaussian", "sigma": 2.0}
    created = api.post("/v1/models", json={"name": "rbf-api", "dataset": "rbf-set", "n_components": 2,
                                           "kernel": {"type": "rbf", "gamma": 0.125}, "params": {"passes": 1}})
    assert created.status_code == 202, created.text
    assert created.json()["kernel"] == {"type": "gaussian", "sigma": 2.0}
    both = api.post("/v1/models", json={"name": "rbf-both", "dataset": "rbf-set", "n_components": 2,
                                        "kernel": {"type": "rbf", "gamma": 1, "sigma": 1}})
    assert both.status_code == 422 and both.json()["error"]["field"] == "kernel.gamma", both.text
    wait_for_fit(api, "rbf-api")


def test_cancel_resume_with_passes_and_show(kpca, api, rng):
    upload_rows(api, "long-set", rng.normal(size=(400, 6)))
    started = kpca("fit", "long", "--dataset", "long-set", "--sigma", "3", "--components", "3", "--passes", "300",
                   "--param", "block_size=25", "--param", "seed=0", "--param", "init=random")
    assert started.exit_code == 0, started.output
    wait_for_pass(api, "long", 1)
    cancelled = kpca("cancel", "long")  # waits until the fit has stopped: a resume may follow at once
    done = api.get("/v1/models/long").json()["progress"]["pass"]
    assert cancelled.exit_code == 0 and f"long: cancelled after pass {done} of 300" in cancelled.stdout, cancelled.output

    resumed = kpca("resume", "long", "--passes", str(done + 2), "--wait")
    assert resumed.exit_code == 0, resumed.output
    assert f"resumed from pass {done} to {done + 2} passes" in resumed.stdout and "long: completed" in resumed.stdout
    again = kpca("resume", "long")  # a completed fit needs more passes: the message says how, in flags
    assert again.exit_code == 1 and f"--passes {done + 12}" in again.stderr, again.stderr

    shown = kpca("show", "long")
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert re.search(r"^status\s+completed$", text, re.M) and "parameters used" in text, text
    assert re.search(r"^kernel\s+gaussian, sigma=3$", text, re.M), text  # as fitted (issue 53)
    assert re.search(r"^precision\s+float64 \(auto: ", text, re.M), text
    assert re.search(r"^pass\s+elapsed_s\s+excess_error\s+iterate", text, re.M), text
    rows = re.findall(r"^(\d+)\s+\d", text, re.M)
    assert [int(r) for r in rows] == list(range(1, done + 3)), text
    as_json = json.loads(kpca("--json", "show", "long").stdout)
    assert as_json["kind"] == "models" and len(as_json["history"]) == done + 2

    auto = kpca("fit", "auto-width", "--dataset", "long-set", "--components", "2", "--passes", "2", "--wait")
    assert auto.exit_code == 0, auto.output
    width = api.get("/v1/models/auto-width").json()["params_used"]["kernel"]["sigma"]
    assert isinstance(width, float) and f"sigma={width:.4g}" in kpca("show", "auto-width").stdout

    data_set = kpca("show", "long-set")
    assert data_set.exit_code == 0 and "400 x 6 features" in data_set.stdout and "versions:" in data_set.stdout
    assert kpca("show", "nobody").exit_code == 1


def test_cluster_waits_and_shows_its_labels(kpca, api):
    points = np.array([[0, 0], [0.1, 0], [0, 0.1], [5, 5], [5.1, 5], [5, 5.1]], dtype=float)
    upload_rows(api, "pts", points)
    upload_rows(api, "pts-truth", np.array([[0], [0], [0], [1], [1], [1]], dtype=float))
    done = kpca("cluster", "pts-2", "--dataset", "pts", "--clusters", "2", "--sigma", "1", "--solver", "exact",
                "--labels-dataset", "pts-truth", "--wait")
    assert done.exit_code == 0, done.output
    assert "pts-2: 6 labels in 2 clusters, variation of information 0" in done.stdout, done.stdout
    shown = kpca("show", "pts-2", "--labels")
    labels = [int(v) for v in shown.stdout.split("labels:\n", 1)[1].split()]
    assert shown.exit_code == 0 and len(set(labels[:3])) == 1 and len(set(labels)) == 2, shown.stdout
    assert kpca("rm", "clustering", "pts-2").exit_code == 0


def test_serve_help_is_in_the_style_of_every_other_command():
    """Stumble 7: ``kpca serve --help`` reads like ``kpca upload --help`` (click's usage line and option
    list) and lists every flag ``python -m service`` takes."""
    shown = subprocess.run([sys.executable, "-m", "client", "serve", "--help"], capture_output=True, text=True,
                           timeout=PATIENCE_S)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Usage: kpca serve [OPTIONS]") and "\nOptions:\n" in shown.stdout, shown.stdout
    assert "usage: python -m service" not in shown.stdout
    service = subprocess.run([sys.executable, "-m", "service", "--help"], capture_output=True, text=True,
                             timeout=PATIENCE_S)
    flags = set(re.findall(r"^\s+(--[a-z-]+)", service.stdout, re.M)) - {"--help"}
    assert len(flags) > 20 and all(re.search(rf"^\s+{flag}\b", shown.stdout, re.M) for flag in flags), flags


def test_resume_wait_follows_the_new_passes_only(kpca, api, rng):
    """``kpca resume NAME --passes N --wait`` shows passes after the ones done, each of N in all (issue 58,
    item 2: it replayed the history from pass 1, and the last old pass said "5/5" between "4/12" and "6/12"),
    with the time spent beside the time left."""
    upload_rows(api, "resumed-set", rng.normal(size=(300, 5)))
    fitted = kpca("fit", "resumed", "--dataset", "resumed-set", "--sigma", "3", "--components", "3", "--passes", "5",
                  "--solver", "kha", "--param", "seed=0", "--param", "init=random", "--param", "tol=0", "--wait")
    assert fitted.exit_code == 0, fitted.output
    resumed = kpca("resume", "resumed", "--passes", "12", "--wait")
    assert resumed.exit_code == 0, resumed.output
    assert "resumed from pass 5 to 12 passes in all" in resumed.stdout
    shown = re.findall(r"pass (\d+)/(\d+)", resumed.stderr)
    assert shown == [(str(p), "12") for p in range(6, 13)], shown
    assert re.search(r"pass 6/12 .* \d+ s in", resumed.stderr)
    replayed = re.findall(r"pass (\d+)/(\d+)", kpca("watch", "resumed").stderr)  # the whole history, one total
    assert replayed == [(str(p), "12") for p in range(1, 13)], replayed

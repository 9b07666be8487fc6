"""A complete session against a running kpca-stream (``make run``): upload
scikit-learn's digits in chunks, commit, fit kha-smd, poll, project.

    .venv/bin/python examples/digits_session.py [URL]

The service is at URL, else at ``$KPCA_URL``, else at http://127.0.0.1:8000
(``make run``'s address; ``make run KPCA_PORT=9000`` needs
``KPCA_URL=http://127.0.0.1:9000``). It can be run again: it first deletes the
data set ``digits`` and, with it (``?cascade=true``) the models fit on it, and
the model ``digits-rbf``, left by an earlier run.
"""

import io
import os
import sys
import time

import httpx
import numpy as np
from sklearn.datasets import load_digits

URL = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KPCA_URL", "http://127.0.0.1:8000")
api = httpx.Client(base_url=URL, timeout=60)
try:
    api.get("/healthz")
except httpx.TransportError as exc:
    sys.exit(f"cannot reach kpca-stream at {URL} ({exc}): start it with `make run` in another terminal, "
             "and set KPCA_URL to its address if it is not http://127.0.0.1:8000")
X = (load_digits().data / 16.0).astype(np.float32)  # 1797 x 64, pixels in [0, 1]

# a fresh start: the model and the data set (with the models fit on it) if an earlier run left them
for path, params in (("/v1/models/digits-rbf", {}), ("/v1/datasets/digits", {"cascade": "true"})):
    r = api.delete(path, params=params)
    if r.status_code != 404:  # 404: nothing to delete
        r.raise_for_status()
api.post("/v1/datasets", json={"name": "digits", "n_features": 64, "dtype": "float32"}).raise_for_status()
for i, chunk in enumerate(np.array_split(X, 4)):
    if i % 2 == 0:  # .npy bytes ...
        buf = io.BytesIO()
        np.save(buf, chunk)
        r = api.put(f"/v1/datasets/digits/chunks/{i}", content=buf.getvalue(),
                    headers={"Content-Type": "application/octet-stream"})
    else:  # ... or JSON rows
        r = api.put(f"/v1/datasets/digits/chunks/{i}", json={"rows": chunk.tolist()})
    r.raise_for_status()
print(api.post("/v1/datasets/digits/commit", json={}).json())

r = api.post("/v1/models", json={"name": "digits-rbf", "dataset": "digits",
                                 "kernel": {"type": "gaussian", "sigma": 3.0},
                                 "n_components": 16, "solver": "kha-smd",
                                 "params": {"passes": 20, "seed": 0}})
print(r.status_code, r.headers["Location"])
while (model := api.get("/v1/models/digits-rbf").json())["status"] in ("queued", "running"):
    p = model["progress"]
    if p:
        print(f"pass {p['pass']}/{p['passes']}  {p['convergence']['metric']} = {p['convergence']['value']:.2e}"
              f"  remaining {p['remaining_s']:.0f} s")
    time.sleep(1)
print(model["status"], model["params_used"])

Z = api.post("/v1/models/digits-rbf/project", json={"rows": X[:5].tolist()}).json()["components"]
print(np.round(np.asarray(Z)[:, :4], 3))

"""The object stores behind the store, on the operations the service makes of them (issue 57).

A local folder (`store.objects.folder.FolderObjects`) against an S3 API over HTTP on loopback (moto's server,
`bench._s3_server`, as the tests start it), through obstore (`store.objects.s3.S3Objects`, the
project's choice) and, where it is installed, through s3fs (fsspec; ``pip install s3fs``) for the comparison the
issue asks for, in one run:

* records: ``--records`` JSON documents of about 1 KB created once, read, and updated by compare-and-swap
  (read, then a conditional put; s3fs passes ``IfMatch`` through to botocore, outside fsspec's interface);
* chunks: ``--chunks`` objects of ``--chunk-mib`` MiB (a zarr chunk of 4,096 rows of 64 float32 is 1 MiB)
  written and read back.

Milliseconds per record operation and MiB/s per chunk direction, and each S3 client's ratio to the folder.

Then the service's own stores on both, the issue's goals: the upload of ``--upload-rows`` x ``--features``
float32 rows (every chunk staged, then the commit; MiB/s of rows), in this process through the folder store
(`store.DatasetStore`) and the object store over S3 (`store.datasets.object_datasets.ObjectDatasetStore`), in
chunks of ``--chunk-rows``, and through a running service (HTTP on loopback, the client's chunks); and a default
fit on ``--rows`` rows (the service's default solver and parameters, 8 components, run in this process by
`workers.fit.FitJob` from its record to its last checkpoint) on each, with the largest difference between the two
fits' projections of 100 rows, relative to their largest value.
moto is a Python server: its own cost dominates the loopback figures, so they bound what a real store's
client costs from above; a real store adds its network's latency (the cost model of docs/scaling.md). Prints
JSON; writes bench/results/object_store.json.

    python bench/object_store.py [--records 100] [--chunks 20] [--chunk-mib 1] [--rows 20000]
                                 [--upload-rows 200000] [--features 64] [--chunk-rows 32768]
    python bench/object_store.py --markdown bench/results/object_store.json   # docs/scaling.md's table
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench._s3_server import BUCKET, s3_server  # noqa: E402
from store.objects.folder import FolderObjects  # noqa: E402
from store.objects.s3 import S3Objects  # noqa: E402


class S3fsObjects:
    """The same operations through s3fs (fsspec), for the comparison only."""

    def __init__(self, endpoint: str, prefix: str):
        import s3fs

        self.fs = s3fs.S3FileSystem(key="kpca-test", secret="kpca-test", endpoint_url=endpoint,
                                    use_listings_cache=False)
        self.root = f"{BUCKET}/{prefix}"

    def create(self, key, data):
        self.fs.pipe_file(f"{self.root}/{key}", data, mode="create")

    def put(self, key, data):
        self.fs.pipe_file(f"{self.root}/{key}", data)

    def get(self, key):
        return self.fs.cat_file(f"{self.root}/{key}")

    def replace_after_read(self, key, data):
        etag = self.fs.info(f"{self.root}/{key}", refresh=True)["ETag"]
        self.fs.pipe_file(f"{self.root}/{key}", data, IfMatch=etag)


def _rows(n: int, d: int) -> np.ndarray:
    """``n`` float32 rows of ``d`` features: 10 Gaussian clusters in a 5-dimensional subspace plus noise (structure a
    kernel PCA finds), seeded."""
    rng = np.random.default_rng(57)
    centres = rng.normal(scale=3.0, size=(10, 5))
    basis = np.linalg.qr(rng.normal(size=(d, 5)))[0]
    latent = centres[rng.integers(0, 10, n)] + rng.normal(size=(n, 5))
    return (latent @ basis.T + 0.1 * rng.normal(size=(n, d))).astype(np.float32)


def timed(call, count: int) -> float:
    """Mean seconds of ``call(i)`` over i < count."""
    started = time.perf_counter()
    for i in range(count):
        call(i)
    return (time.perf_counter() - started) / count


def times_the(figures: dict, reference: dict) -> dict:
    """Each figure's time over the reference's: a ``*_ms`` figure over its twin, the reference's rate (MiB/s) over
    a rate. O(figures)."""
    return {key: (value / reference[key] if key.endswith("_ms") else reference[key] / value)
            for key, value in figures.items()}


def measure(name: str, store, records: int, chunks: int, chunk: bytes) -> dict:
    record = json.dumps({"name": "m", "status": "running", "pass": 3, "pad": "x" * 900}).encode()
    out: dict = {}
    if isinstance(store, S3fsObjects):
        out["create_ms"] = 1e3 * timed(lambda i: store.create(f"records/{i}.json", record), records)
        out["get_ms"] = 1e3 * timed(lambda i: store.get(f"records/{i}.json"), records)
        out["compare_and_swap_ms"] = 1e3 * timed(lambda i: store.replace_after_read(f"records/{i}.json", record),
                                                 records)
    else:
        out["create_ms"] = 1e3 * timed(lambda i: store.create(f"records/{i}.json", record), records)
        out["get_ms"] = 1e3 * timed(lambda i: store.get(f"records/{i}.json"), records)

        def swap(i):
            stored = store.get(f"records/{i}.json")
            store.replace(f"records/{i}.json", record, stored.version)

        out["compare_and_swap_ms"] = 1e3 * timed(swap, records)
    mib = len(chunk) / 2**20
    out["chunk_put_mib_s"] = mib / timed(lambda i: store.put(f"chunks/{i}", chunk), chunks)
    out["chunk_get_mib_s"] = mib / timed(lambda i: store.get(f"chunks/{i}"), chunks)
    print(f"{name}: {out}", file=sys.stderr, flush=True)
    return out


def upload_to_store(where: str, X: np.ndarray, chunk_rows: int) -> dict:
    """Stage ``X`` as data set "bench" at ``where`` (a folder or an S3 URL, `store.places`) in chunks of
    ``chunk_rows`` and commit it, in this process: seconds and MiB/s."""
    from store.places import datasets_at

    datasets = datasets_at(where)
    started = time.perf_counter()
    datasets.create("bench", X.shape[1], "float32")
    for index, first in enumerate(range(0, X.shape[0], chunk_rows)):
        datasets.put_chunk("bench", index, X[first: first + chunk_rows])
    staging_s = time.perf_counter() - started
    datasets.commit("bench")
    upload_s = time.perf_counter() - started
    return {"upload_s": upload_s, "upload_mib_s": X.nbytes / 2**20 / upload_s, "staging_s": staging_s,
            "commit_s": upload_s - staging_s}


def upload_over_http(where: str, X: np.ndarray) -> dict:
    """Upload ``X`` as data set "http" through the service (`client.api.Client.upload`: its default chunks of
    about 8 MiB, as ``.npy`` bodies, then the commit) started on ``where`` with a one-worker cluster: seconds and
    MiB/s, as a user sees them."""
    from bench._service import serving
    from client.api import Client
    from service import Settings, create_app

    with serving(create_app(Settings(data_dir=where, scheduler=None, n_workers=1))) as url:
        started = time.perf_counter()
        meta = Client(url).upload("http", X)
        seconds = time.perf_counter() - started
    assert meta["status"] == "ready" and meta["n_rows"] == X.shape[0], meta
    return {"http_upload_s": seconds, "http_upload_mib_s": X.nbytes / 2**20 / seconds}


def default_fit(where: str, X: np.ndarray) -> dict:
    """Data set "fitted" of ``X`` at ``where`` and a default model on it (the service's default solver and
    parameters, 8 components, `workers.fit.FitJob` in this process, from its record to its last checkpoint):
    seconds, passes, and its projections of 100 rows."""
    from kpca.defaults import EXACT_LIMIT
    from kpca.fitting import FitRequest
    from service.schemas.models import ModelCreate
    from store.jobs.records import ModelRecord
    from store.places import datasets_at, models_at
    from workers.fit import FitJob
    from workers.serve import project_rows

    datasets = datasets_at(where)
    datasets.create("fitted", X.shape[1], "float32")
    datasets.put_chunk("fitted", 0, X)
    meta = datasets.commit("fitted")
    default = ModelCreate(name="fit", dataset="fitted", n_components=8, kernel={"type": "gaussian", "sigma": 8.0})
    params = FitRequest(default.solver, 8, default.params, EXACT_LIMIT).checked_params(meta.n_rows, default.kernel)
    models_at(where).create(ModelRecord.new("fit", meta, kernel=default.kernel, n_components=8,
                                            solver=default.solver, params=params))
    started = time.perf_counter()
    status = FitJob(where).run("fit")
    fit_s = time.perf_counter() - started
    assert status == "completed", (status, models_at(where).get("fit").error)
    return {"fit_s": fit_s, "fit_passes": len(models_at(where).get("fit").history),
            "projections": project_rows(where, "fit", X[:100].astype(np.float64))}


def markdown(result: dict) -> str:
    """The table docs/scaling.md prints: each store's record milliseconds and chunk MiB/s."""
    lines = ["| | create (ms) | read (ms) | compare-and-swap (ms) | 1 MiB chunk write (MiB/s) | "
             "1 MiB chunk read (MiB/s) |", "|---|---:|---:|---:|---:|---:|"]
    labels = {"folder": "a local folder", "s3 obstore": "S3 through obstore (chosen)", "s3 s3fs": "S3 through s3fs"}
    for name, label in labels.items():
        v = result["results"].get(name)
        if isinstance(v, dict):
            lines.append(f"| {label} | {v['create_ms']:.2f} | {v['get_ms']:.2f} | {v['compare_and_swap_ms']:.2f} | "
                         f"{v['chunk_put_mib_s']:.0f} | {v['chunk_get_mib_s']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-mib", type=float, default=1.0)
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the default fit's data set")
    parser.add_argument("--upload-rows", type=int, default=200_000, help="rows of the uploaded data set")
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--chunk-rows", type=int, default=32_768, help="rows of a chunk staged in the store "
                        "(8 MiB of 64 float32: the client's default chunk)")
    parser.add_argument("--markdown", help="print the table of a saved result (a JSON file) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    chunk = np.random.default_rng(0).standard_normal(int(args.chunk_mib * 2**20) // 8).tobytes()
    results: dict = {}
    with tempfile.TemporaryDirectory() as folder, s3_server() as server:
        os.environ.update(server.environment())
        results["folder"] = measure("folder", FolderObjects(folder), args.records, args.chunks, chunk)
        results["s3 obstore"] = measure("s3 obstore", S3Objects(f"s3://{BUCKET}/{uuid.uuid4().hex}"), args.records,
                                        args.chunks, chunk)
        try:
            s3fs_store = S3fsObjects(server.endpoint, uuid.uuid4().hex)
        except ImportError:
            results["s3 s3fs"] = "not installed (pip install s3fs)"
        else:
            results["s3 s3fs"] = measure("s3 s3fs", s3fs_store, args.records, args.chunks, chunk)
        uploaded, fitted = _rows(args.upload_rows, args.features), _rows(args.rows, args.features)
        service: dict = {}
        for name, where in (("folder", str(Path(folder) / "data")), ("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}"),
                            ("folder, over HTTP", str(Path(folder) / "http")),
                            ("s3, over HTTP", f"s3://{BUCKET}/{uuid.uuid4().hex}")):
            if name.endswith("HTTP"):
                service[name] = upload_over_http(where, uploaded)
            else:
                service[name] = {**upload_to_store(where, uploaded, args.chunk_rows), **default_fit(where, fitted)}
            print(f"{name}: {dict((k, v) for k, v in service[name].items() if k != 'projections')}",
                  file=sys.stderr, flush=True)
    want, got = service["folder"].pop("projections"), service["s3"].pop("projections")
    goals = {"upload_time_s3_over_folder": service["s3"]["upload_s"] / service["folder"]["upload_s"],
             "http_upload_time_s3_over_folder": service["s3, over HTTP"]["http_upload_s"]
             / service["folder, over HTTP"]["http_upload_s"],
             "fit_time_s3_over_folder": service["s3"]["fit_s"] / service["folder"]["fit_s"],
             "projections_max_relative_difference": float(np.abs(got - want).max() / np.abs(want).max())}
    print(json.dumps({"service": service, "goals": goals}, indent=1), file=sys.stderr, flush=True)
    ratios = {name: times_the(results[name], results["folder"]) for name in ("s3 obstore", "s3 s3fs")
              if isinstance(results.get(name), dict)}
    save("object_store", {"records": args.records, "chunks": args.chunks, "chunk_mib": args.chunk_mib,
                          "server": "moto (Python) on 127.0.0.1", "results": results,
                          "times_the_folder": ratios, "rows": args.rows, "upload_rows": args.upload_rows,
                          "features": args.features, "chunk_rows": args.chunk_rows, "service": service,
                          "goals": goals})


if __name__ == "__main__":
    main()

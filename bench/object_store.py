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
moto is a Python server: its own cost dominates the loopback figures, so they bound what a real store's
client costs from above; a real store adds its network's latency (the cost model of docs/scaling.md). Prints
JSON; writes bench/results/object_store.json.

    python bench/object_store.py [--records 100] [--chunks 20] [--chunk-mib 1]
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
    ratios = {name: times_the(results[name], results["folder"]) for name in ("s3 obstore", "s3 s3fs")
              if isinstance(results.get(name), dict)}
    save("object_store", {"records": args.records, "chunks": args.chunks, "chunk_mib": args.chunk_mib,
                          "server": "moto (Python) on 127.0.0.1", "results": results,
                          "times_the_folder": ratios})


if __name__ == "__main__":
    main()

"""The store's own classes on each backend, on the operations a fit and the API make of them (issue 57): the
cost model of docs/scaling.md in figures.

Three backends in one run: the data folder (today's classes: flock, rename), the object-store classes over a
folder (`store.objects.folder.FolderObjects`: the same files through the interface) and over an S3 API on
loopback (moto's server, `bench._s3_server`; obstore). For each:

* a job record (`store.jobs.models.ModelRegistry` / `store.jobs.object_registry.ObjectJobRegistry`): create,
  read (a new version each time, so parsed), update (what a fit's worker does once a pass), in ms;
* a checkpoint (`store.jobs.checkpoints.CheckpointStore` / ``on_objects``) of ``--rows`` x ``--components``
  float64 (a KHA state's ``A`` of r x l, plus scalars): save and load, in MiB/s;
* an image job (`store.image_jobs.ImageJobStore` / `store.image_job_objects.ObjectImageJobStore`): start,
  heartbeat update, read, in ms.

moto is a Python server: its own cost dominates the loopback figures, so they bound from above what a real
store's client costs; a real store adds its network's round trips (docs/scaling.md). Prints JSON; writes
bench/results/store_backends.json.

    python bench/store_backends.py [--records 50] [--rows 50000] [--components 20] [--checkpoints 5]
    python bench/store_backends.py --markdown bench/results/store_backends.json   # docs/scaling.md's table
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench._s3_server import BUCKET, s3_server  # noqa: E402
from bench.object_store import timed, times_the  # noqa: E402
from store.image_job_objects import ObjectImageJobStore  # noqa: E402
from store.image_jobs import ImageJobStore  # noqa: E402
from store.jobs.checkpoints import CheckpointStore  # noqa: E402
from store.jobs.models import ModelRegistry  # noqa: E402
from store.jobs.object_registry import ObjectJobRegistry  # noqa: E402
from store.jobs.records import ModelRecord  # noqa: E402
from store.objects.folder import FolderObjects  # noqa: E402
from store.objects.s3 import S3Objects  # noqa: E402


def record(name: str) -> ModelRecord:
    return ModelRecord(name=name, dataset="d", dataset_version=1, kernel={"type": "gaussian", "sigma": 1.0},
                       n_components=8, solver="kha", params={"passes": 20})


def measure(name: str, registry, checkpoints, image_jobs, args) -> dict:
    out: dict = {}
    n = args.records
    out["record_create_ms"] = 1e3 * timed(lambda i: registry.create(record(f"m{i}")), n)
    out["record_update_ms"] = 1e3 * timed(lambda i: registry.update(f"m{i}", status="running"), n)
    out["record_read_ms"] = 1e3 * timed(lambda i: registry.get(f"m{i}"), n)
    state = {"A": np.random.default_rng(0).standard_normal((args.components, args.rows)), "t": 12345, "eta0": 0.05}
    mib = state["A"].nbytes / 2**20
    out["checkpoint_save_mib_s"] = mib / timed(lambda i: checkpoints.save("m0", i, state), args.checkpoints)
    out["checkpoint_load_mib_s"] = mib / timed(lambda i: checkpoints.load("m0", i), args.checkpoints)
    out["image_job_start_ms"] = 1e3 * timed(lambda i: image_jobs.start(f"j{i}", "denoise-image-fit"), n)
    out["image_job_update_ms"] = 1e3 * timed(lambda i: image_jobs.update(f"j{i}", phase="tuning", done=1), n)
    out["image_job_read_ms"] = 1e3 * timed(lambda i: image_jobs.get(f"j{i}"), n)
    print(f"{name}: {out}", file=sys.stderr, flush=True)
    return out


def markdown(result: dict) -> str:
    """The table docs/scaling.md prints: each backend's figures, and the S3 one's times the folder's."""
    rows = (("record create (ms)", "record_create_ms", ".2f"), ("record update (ms)", "record_update_ms", ".2f"),
            ("record read (ms)", "record_read_ms", ".2f"),
            ("checkpoint save (MiB/s)", "checkpoint_save_mib_s", ".0f"),
            ("checkpoint load (MiB/s)", "checkpoint_load_mib_s", ".0f"),
            ("image job start (ms)", "image_job_start_ms", ".2f"),
            ("image job update (ms)", "image_job_update_ms", ".2f"),
            ("image job read (ms)", "image_job_read_ms", ".2f"))
    names = ("folder", "objects over a folder", "objects on S3 (moto)")
    lines = ["| | the data folder | objects over a folder | objects on S3 (moto) | S3, times the folder's |",
             "|---|---:|---:|---:|---:|"]
    for label, key, form in rows:
        values = [format(result["results"][name][key], form) for name in names]
        lines.append(f"| {label} | {' | '.join(values)} | "
                     f"{result['times_the_folder']['objects on S3 (moto)'][key]:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--components", type=int, default=20)
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--markdown", help="print the table of a saved result (a JSON file) and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        import json

        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    results: dict = {}
    with tempfile.TemporaryDirectory() as folder, s3_server() as server:
        os.environ.update(server.environment())
        root = Path(folder)
        results["folder"] = measure("folder", ModelRegistry(root / "a"), CheckpointStore(root / "a"),
                                    ImageJobStore(root / "a"), args)
        objects = FolderObjects(root / "b")
        results["objects over a folder"] = measure(
            "objects over a folder", ObjectJobRegistry(objects, ModelRegistry), CheckpointStore.on_objects(objects),
            ObjectImageJobStore(objects), args)
        s3 = S3Objects(f"s3://{BUCKET}/{uuid.uuid4().hex}")
        results["objects on S3 (moto)"] = measure(
            "objects on S3 (moto)", ObjectJobRegistry(s3, ModelRegistry), CheckpointStore.on_objects(s3),
            ObjectImageJobStore(s3), args)
    ratios = {name: times_the(figures, results["folder"]) for name, figures in results.items() if name != "folder"}
    save("store_backends", {"records": args.records, "checkpoint_mib": args.components * args.rows * 8 / 2**20,
                            "server": "moto (Python) on 127.0.0.1", "results": results, "times_the_folder": ratios})


if __name__ == "__main__":
    main()

"""What a sharded pass of the default fit costs: CPU seconds and wall time per pass on 1 and 2 workers.

Issue 26's scenario: l rows (default 40,000) of n = 32 features (the jittered digits' first 32 pixels,
`bench._common.jittered_digits`), r = 8, a Gaussian kernel (sigma 3), the default fit (Nystrom start,
Rayleigh-Ritz passes) run for ``--passes`` passes with ``tol`` 0 (every pass runs), on an embedded
cluster of two worker processes (`workers.Backend`), with ``placement.workers`` 1 and then 2, one
after the other. Per pass (from the record's history, polled every 20 ms): the wall seconds, and
the CPU seconds (user + system) of both worker processes together over the same interval (psutil), so
that the coordinator's work, the actors' and any idle spinning all count. The first pass is left out
(it follows the start). Reported: CPU(2) / CPU(1) (goal <= 1.15) and wall(2) / wall(1) (goal <= 0.6);
with ``--repeats`` k the fits alternate 1, 2, 1, 2, ... (k pairs) and the ratios are the medians of the
pairs' ratios, so that load from elsewhere on a shared machine skews one pair, not the figure;
a one-worker fit runs its kernel tiles on every core of the machine when it is the only fit
(`workers.placement.fit_threads`), each shard on its worker's one thread.

    python bench/shard_cost.py [--l 40000] [--passes 4] [--repeats 1] [--params JSON] [--shards 2] [--name shard_cost]

``--shards`` k: an embedded cluster of k workers (`workers.dask_cluster.embedded_sizing`: cores // k kernel
threads each), and the pairs are 1 worker against k; the ratios are then CPU(k) / CPU(1) and
wall(k) / wall(1). Each pass also reports the cores it kept busy (CPU seconds / wall seconds).

Prints JSON and writes bench/results/<name>.json (``--params '{"init": "random"}' --name
shard_cost_stochastic``: the paper's stochastic passes, with their segment loop and divergence guard).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import jittered_digits, save  # noqa: E402

N_FEATURES, R = 32, 8
KERNEL = {"type": "gaussian", "sigma": 3.0}


def write_dataset(root: Path, X: np.ndarray, chunk_rows: int = 8192):
    """``X`` stored as data set ``data`` in chunks of ``chunk_rows`` rows; its public metadata."""
    from store import DatasetStore

    store = DatasetStore(root)
    store.create("data", X.shape[1], "float64")
    for i, a in enumerate(range(0, X.shape[0], chunk_rows)):
        store.put_chunk("data", i, X[a : a + chunk_rows])
    return store.commit("data")


def registry_names(root: Path) -> list[str]:
    """The models of the data folder so far (each fit gets a new name)."""
    from store import ModelRegistry

    return [record.name for record in ModelRegistry(root).list()]


def cpu_seconds(processes) -> float:
    """User plus system CPU seconds of ``processes`` (psutil.Process) so far."""
    return sum(sum(p.cpu_times()[:2]) for p in processes)


def run_fit(backend, root: Path, dataset, workers: int, passes: int, params: dict, timeout: float = 3600.0,
            device: str = "auto") -> dict:
    """The fit (the default with ``params`` over it) with ``placement.workers`` ``workers``: per-pass wall
    and CPU seconds."""
    import psutil

    from store import ModelRegistry
    from store.jobs.records import ModelRecord, Placement

    processes = [psutil.Process(pid) for pid in backend.worker_pids().values()]
    registry, name = ModelRegistry(root), f"fit-w{workers}-{len(registry_names(root))}"
    registry.create(ModelRecord.new(name, dataset, kernel=KERNEL, n_components=R, solver="kha-smd",
                                    params={"passes": passes, "tol": 0.0, **params}, placement=Placement(workers=workers, device=device)))
    marks, seen = [], 0  # (wall, cpu) when each pass's history entry appeared
    t0, cpu0 = time.perf_counter(), cpu_seconds(processes)
    backend.submit_fit(name)
    deadline = time.monotonic() + timeout
    while (record := registry.get(name)).status not in ("completed", "failed", "cancelled"):
        if len(record.history) > seen:
            seen = len(record.history)
            marks.append((time.perf_counter(), cpu_seconds(processes)))
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} still {record.status} after {timeout} s")
        time.sleep(0.02)
    if record.status != "completed":
        raise RuntimeError(f"{name}: {record.status} {record.error}")
    wall, cpu = time.perf_counter() - t0, cpu_seconds(processes) - cpu0
    if len(record.history) > seen:  # the last pass ended with the fit
        marks.append((time.perf_counter(), cpu_seconds(processes)))
    walls = np.diff([m[0] for m in marks]).tolist()
    cpus = np.diff([m[1] for m in marks]).tolist()
    out = {"workers_used": record.progress.workers, "passes_timed": len(walls), "pass_wall_s": walls,
           "pass_cpu_s": cpus, "median_pass_wall_s": float(np.median(walls)),
           "median_pass_cpu_s": float(np.median(cpus)), "fit_wall_s": wall, "fit_cpu_s": cpu,
           "median_pass_cores_busy": float(np.median(np.divide(cpus, walls))),
           "params_used": {k: v for k, v in record.params_used.items() if np.isscalar(v)}}
    print(f"workers {workers}: pass wall {out['median_pass_wall_s']:.2f} s, cpu {out['median_pass_cpu_s']:.2f} s "
          f"(fit {wall:.1f} s wall, {cpu:.1f} s cpu)", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=40_000)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--params", default="{}", help="fit parameters over the default's, as JSON (e.g. "
                                                    "'{\"init\": \"random\"}' for the paper's stochastic passes)")
    ap.add_argument("--repeats", type=int, default=1, help="pairs of fits (1 worker, 2 workers), alternating")
    ap.add_argument("--device", default="auto", help="placement.device of the fits (auto: a GPU where one is "
                                                  "visible, for the one-worker fit's full passes)")
    ap.add_argument("--shards", type=int, default=2, help="workers of the cluster, and of the sharded fit")
    ap.add_argument("--name", default="shard_cost", help="the result's name under bench/results")
    args = ap.parse_args()
    params = json.loads(args.params)
    X = jittered_digits(args.l)[:, :N_FEATURES]
    from workers import Backend

    with tempfile.TemporaryDirectory(prefix="kpca-shard-cost-") as tmp:
        root = Path(tmp)
        dataset = write_dataset(root, X)
        k = max(2, args.shards)
        with Backend(root, n_workers=k) as backend:
            pairs = [{str(w): run_fit(backend, root, dataset, w, args.passes, params, device=args.device) for w in (1, k)}
                     for _ in range(max(1, args.repeats))]
    cpu_ratios = [p[str(k)]["median_pass_cpu_s"] / p["1"]["median_pass_cpu_s"] for p in pairs]
    wall_ratios = [p[str(k)]["median_pass_wall_s"] / p["1"]["median_pass_wall_s"] for p in pairs]
    result = {"l": args.l, "n": N_FEATURES, "r": R, "kernel": KERNEL, "passes": args.passes, "params": params,
              "shards": k, "device": args.device,
              "fits": pairs[0], "pairs": pairs[1:], "cpu_ratios": cpu_ratios, "wall_ratios": wall_ratios,
              "cpu_ratio": float(np.median(cpu_ratios)), "goal_cpu_ratio": 1.15,
              "wall_ratio": float(np.median(wall_ratios)), "goal_wall_ratio": 0.6, "cpu_count": os.cpu_count()}
    print(f"cpu({k})/cpu(1) {result['cpu_ratio']:.2f}, wall({k})/wall(1) {result['wall_ratio']:.2f}", file=sys.stderr)
    save(args.name, result)


if __name__ == "__main__":
    main()

"""Sharded fits on 1 and 2 dask workers, and the cost model of docs/scaling.md fitted on this machine.

1. End to end: an embedded cluster of two worker processes (`workers.Backend`), the jittered digits
   (`bench._common.jittered_digits`, n = 64) to ``--l`` rows in a temporary data folder, and a KHA-SMD
   fit (r = 16, b = 1024, 2 passes, Gaussian kernel sigma 3, seed 0) with ``placement.workers`` 1, then
   2, one after the other. Per pass: the second pass alone (``history[1].elapsed_s -
   history[0].elapsed_s``); also the wall time from submission to completion. Reported: the ratio
   t(2) / t(1) (issue 17's goal: <= 0.6) and the fits' agreement (``max|A_2 - A_1| / max|A_1|``).
2. The cost model, per block of b rows, w workers, d = 2r:
   ``t_shard = (2 b s (n + d) + 4 d^2 s) / F`` with s = l / w (a), ``t_coord(b) = c1 b + c2 b^2`` (b)
   and ``t_comm = k alpha + (w out(b) + in(b)) / beta`` (c), k the round trips per block (2 per
   segment of `SEGMENT_ROWS` rows: gather with products, apply; 1 for the divergence guard's norms),
   ``out`` the bytes of a `SegmentUpdate` sent to each shard, ``in`` the gathered columns, points and
   the reductions' parts (from all shards together). Measured: (a) `kpca.sharded.shards.Shard.apply` in this
   process (threads capped at 1, as a worker) for shards of l, l/2, l/4 rows -> F (least squares);
   (b) `sharded_step_block` over a local group minus the time of its shard calls, at b = 512, 1024,
   2048 -> c1, c2; (c) on the cluster, real actors (`workers.shards.ActorGroup`) over a small data
   set: the median round trip of ``pid`` (alpha), the time of sending and receiving arrays of 24 kB
   to 17 MB per shard (``set_columns``, ``columns``; slope -> beta), and blocks of a real pass with the
   group's byte counters (bytes per block per shard) and time (a check of the model). A pass is
   ``(l / b) (t_shard + t_coord + t_comm)``; predicted for l = 10^7, n = 64, r = 16 on w = 64 machines
   each as fast as one worker here, with the loopback's alpha and beta measured here and with an
   assumed network (10 Gbit/s, 100 us): time per pass, communication's share, the w from which
   ``t_comm > t_shard`` and the smallest b keeping communication under 10 % of a pass.

    python bench/scale_out.py [--l 100000] [--quick]

Prints JSON and writes bench/results/scale_out.json (``--quick``: l 8000, scale_out-quick.json) and
scale_out.png (``--quick``: scale_out-quick.png). The full run takes about 13 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

# the in-process measurements stand for one worker: single-threaded, as the embedded cluster's workers
os.environ.update({k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                    "NUMBA_NUM_THREADS")})
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402

from bench._common import jittered_digits, output_path, save, start_iterative  # noqa: E402
from kpca._threads import blas_limit  # noqa: E402
from kpca.driver import permutation  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.sharded.kha_step import sharded_begin_pass, sharded_step_block  # noqa: E402
from kpca.sharded.messages import Gathered, SegmentUpdate, shard_call  # noqa: E402
from kpca.sharded.passes import (reduction_unit, send_start, sharded_centering, split_state,  # noqa: E402
                                 unit_bounds)
from kpca.sharded.shards import Shard, ShardGroup, make_group, shard_bounds  # noqa: E402
from kpca.solvers._blocked import SEGMENT_ROWS  # noqa: E402

if TYPE_CHECKING:
    from store import DatasetInfo

N_FEATURES, R, BLOCK, PASSES = 64, 16, 1024, 2
D = 2 * R  # KHA-SMD keeps Z = [A; B]
KERNEL = {"type": "gaussian", "sigma": 3.0}
ASSUMED_NETWORK = {"alpha_s": 100e-6, "beta_bytes_per_s": 10e9 / 8}  # 10 Gbit/s, 100 us per round trip
PREDICT = {"l": 10**7, "w": 64}


# ---------------------------------------------------------------------------------------------- 1.
def write_dataset(root: Path, name: str, X: np.ndarray, chunk_rows: int = 8192) -> DatasetInfo:
    """Store ``X`` (l, n) as data set ``name`` in chunks of ``chunk_rows`` rows; its public metadata."""
    from store import DatasetStore

    ds = DatasetStore(root)
    ds.create(name, X.shape[1], "float64")
    for i, a in enumerate(range(0, X.shape[0], chunk_rows)):
        ds.put_chunk(name, i, X[a : a + chunk_rows])
    return ds.commit(name)


def end_to_end(backend, root: Path, dataset: DatasetInfo, timeout: float = 1800.0) -> dict:
    """KHA-SMD fits with ``workers`` 1 then 2 on ``dataset``: per-pass and wall seconds, agreement."""
    from store import CheckpointStore, ModelRegistry
    from store.jobs.records import ModelRecord, Placement

    registry, fits = ModelRegistry(root), {}
    for k in (1, 2):
        name = f"smd-w{k}"
        registry.create(ModelRecord.new(name, dataset, kernel=KERNEL, n_components=R, solver="kha-smd",
                                        params={"passes": PASSES, "seed": 0, "block_size": BLOCK},
                                        placement=Placement(workers=k)))
        t0 = time.perf_counter()
        backend.submit_fit(name)
        deadline = time.monotonic() + timeout
        while (record := registry.get(name)).status not in ("completed", "failed", "cancelled"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} still {record.status} after {timeout} s")
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        if record.status != "completed":
            raise RuntimeError(f"{name}: {record.status} {record.error}")
        history = [h.elapsed_s for h in record.history]
        fits[k] = {"pass_s": history[1] - history[0], "pass_elapsed_s": history, "wall_s": wall,
                   "workers_used": record.progress.workers, "init": record.params_used.get("init")}
        print(f"workers {k}: second pass {fits[k]['pass_s']:.2f} s, wall {wall:.2f} s", file=sys.stderr)
    A1, A2 = (CheckpointStore(root).load(f"smd-w{k}")["A"] for k in (1, 2))
    return {"fits": {str(k): v for k, v in fits.items()}, "ratio_pass": fits[2]["pass_s"] / fits[1]["pass_s"],
            "ratio_wall": fits[2]["wall_s"] / fits[1]["wall_s"], "goal_ratio": 0.6,
            "max_rel_diff_A": float(np.abs(A2 - A1).max() / np.abs(A1).max())}


# ---------------------------------------------------------------------------------------------- 2a.
def shard_flops(b: int, s, n: int = N_FEATURES, d: int = D):
    """The model's flops of one apply of a segment of b rows on a shard of s rows."""
    return 2.0 * b * s * (n + d) + 4.0 * d * d * s


def random_shard(X: np.ndarray, kernel: KernelSpec, rng) -> Shard:
    """A `Shard` over all of ``X`` with random columns (d, l) and a plausible centring."""
    shard = Shard(KernelRows(X, kernel), 0)
    l = X.shape[0]
    shard.set_columns(rng.standard_normal((D, l)) * 1e-3, rng.standard_normal((D, l)) * 1e-3,
                      np.full(l, 0.1), 0.1, 0.9)
    return shard


def random_update(X: np.ndarray, b: int, rng) -> SegmentUpdate:
    """A `SegmentUpdate` of b random rows of ``X`` (the shape a block sends)."""
    p = np.sort(rng.choice(X.shape[0], size=b, replace=False))
    points = np.ascontiguousarray(X[p])
    return SegmentUpdate(np.eye(D) + 1e-4 * rng.standard_normal((D, D)), 1e-4 * rng.standard_normal((D, b)), p,
                         points, np.einsum("ij,ij->i", points, points), np.full(b, 0.1))


def timings(fn, repeat: int) -> list[float]:
    """Seconds of ``repeat`` timed calls of ``fn``, after one untimed call (compilation, caches)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def best_time(fn, repeat: int) -> float:
    """The fastest of ``repeat`` timed calls of ``fn`` (`timings`)."""
    return min(timings(fn, repeat))


def measure_shard(X: np.ndarray, kernel: KernelSpec, repeat: int, rng) -> dict:
    """(a) `Shard.apply` of b = BLOCK rows on shards of l, l/2, l/4 rows -> F (flop/s)."""
    sizes, times = [], []
    with blas_limit(1):
        for parts in (1, 2, 4):
            s = X.shape[0] // parts
            shard, update = random_shard(X[:s], kernel, rng), random_update(X[:s], BLOCK, rng)
            times.append(best_time(lambda: shard.apply(update), repeat))
            sizes.append(s)
    f = shard_flops(BLOCK, np.array(sizes))
    t = np.array(times)
    F = float(f @ f / (f @ t))  # least squares of t = f / F
    return {"b": BLOCK, "shard_rows": sizes, "apply_s": times, "flop_rate_F": F,
            "residual_rel": float(np.abs(f / F - t).max() / t.max())}


# ---------------------------------------------------------------------------------------------- 2b.
class _TimedGroup:
    """A shard group for `sharded_step_block` (`kpca.sharded.kha_step.StepGroup`) whose shard calls
    (gather, products, apply, norms) are timed: the rest of a step is the coordinator's serial work."""

    def __init__(self, group: ShardGroup):
        self.group, self.shard_s, self.calls = group, 0.0, {}
        self.n_components, self.dtype = group.n_components, group.dtype

    def _timed(self, name: str, t0: float) -> None:
        spent = time.perf_counter() - t0
        self.shard_s += spent
        self.calls[name] = self.calls.get(name, 0.0) + spent

    def gather(self, indices: np.ndarray) -> Gathered:
        t0 = time.perf_counter()
        try:
            return self.group.gather(indices)
        finally:
            self._timed("gather", t0)

    def products(self) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.group.products()
        finally:
            self._timed("products", t0)

    def apply(self, update: SegmentUpdate) -> None:
        t0 = time.perf_counter()
        try:
            self.group.apply(update)
        finally:
            self._timed("apply", t0)

    def norms(self) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.group.norms()
        finally:
            self._timed("norms", t0)

    def square(self, X: np.ndarray, xn: np.ndarray | None, m: np.ndarray) -> np.ndarray:
        return self.group.square(X, xn, m)

    def squared_norms(self, rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self.group.squared_norms(rows)


def start_state(rows: KernelRows, group, seed: int = 0) -> dict:
    """The coordinator's state of a random KHA-SMD start, begun (eigenvalue estimates, gains)."""
    _, state = start_iterative("kha-smd", rows, R, rows.centering.mean_diagonal, seed=seed)
    return sharded_begin_pass(split_state(state, group), group)


def measure_coordinator(X: np.ndarray, kernel: KernelSpec, blocks: int) -> dict:
    """(b) the coordinator's serial seconds per block (a step minus its shard calls) at b = 512, 1024,
    2048, on one local shard -> ``t_coord(b) = c1 b + c2 b^2``."""
    rows = KernelRows(X, kernel)
    rows.fit_centering()
    group = _TimedGroup(make_group(X, kernel, shard_bounds(X.shape[0], 1), R, "kha-smd"))
    bs, per_block = [], []
    with blas_limit(1):
        state = start_state(rows, group.group)
        order = permutation(0, 0, X.shape[0])
        for b in (512, 1024, 2048):
            state = sharded_step_block(dict(state, position=0), group, order[:b])  # warm-up
            total, group.shard_s = 0.0, 0.0
            for i in range(blocks):
                t0 = time.perf_counter()
                state = sharded_step_block(dict(state, position=0), group, order[(i * b) % (X.shape[0] - b):][:b])
                total += time.perf_counter() - t0
            bs.append(b)
            per_block.append((total - group.shard_s) / blocks)
    M = np.array([[b, b * b] for b in bs], dtype=float)
    c1, c2 = np.maximum(np.linalg.lstsq(M, np.array(per_block), rcond=None)[0], 0.0)
    return {"b": bs, "coord_s_per_block": per_block, "c1_s_per_row": float(c1), "c2_s_per_row2": float(c2)}


# ---------------------------------------------------------------------------------------------- 2c.
def median_time(fn, repeat: int) -> float:
    """The median of ``repeat`` timed calls of ``fn`` (`timings`)."""
    return float(np.median(timings(fn, repeat)))


def measure_comm(backend, root: Path, X: np.ndarray, kernel: KernelSpec, coord: dict, F: float,
                 quick: bool) -> dict:
    """(c) round trips, bandwidth and bytes per block with real actors on every fit worker. This process
    is the coordinator, with a client connected directly to the workers (``direct_to_workers``, as a
    coordinator on a worker is), so every shard is across a connection."""
    from distributed import Client

    with Client(backend.client.scheduler.address, direct_to_workers=True, set_as_default=False) as client, \
            client.as_current():
        return _measure_comm(client, root, X, kernel, coord, F, quick)


def _measure_comm(client, root, X, kernel, coord, F, quick) -> dict:
    from workers.shards import ActorGroup, ShardActor, fit_workers

    meta = write_dataset(root, "comm", X)
    addresses = fit_workers(client)
    w, l = len(addresses), X.shape[0]
    unit = reduction_unit(l)
    group = ActorGroup.start(client, addresses, unit_bounds(l, w, unit), data_dir=str(root), dataset="comm",
                             version=meta.version, kernel=kernel, precision="float64", unit_rows=unit,
                             n_components=R, d=D)
    try:
        repeat = 50 if quick else 200
        one = median_time(lambda: group.shards.actors[0].pid().result(), repeat)
        alpha = median_time(lambda: group.shards.each(shard_call(ShardActor.pid)), repeat)  # every shard's pid
        size = group.bounds[0][1] - group.bounds[0][0]
        sent, out_s, in_s = [], [], []
        for rows_d in (1, 8, 64, 256, 1024):  # 2 rows_d 1024 float64 per shard: 24 kB .. 17 MB
            Z = np.zeros((max(1, rows_d * 1024 // size), size))
            sends = [shard_call(Shard.set_columns, Z[:, : b - a], Z[:, : b - a], np.zeros(b - a), 0.0, 1.0)
                     for a, b in group.bounds]
            out_s.append(median_time(lambda: group.shards.each_with(sends), 5 if quick else 10))
            in_s.append(median_time(lambda: group.shards.each(shard_call(Shard.columns)), 5 if quick else 10))
            sent.append(2 * Z.nbytes + 8 * size)
        # a real pass's blocks: centring, a random start sent sparse, blocks of b rows
        sharded_centering(group)
        rows = KernelRows(X, kernel)
        rows.centering = group.centering()
        _, state = start_iterative("kha-smd", rows, R, rows.centering.mean_diagonal, seed=0)
        state = sharded_begin_pass(send_start(state, group), group)
        order, blocks = permutation(0, 0, l), min(l // BLOCK, 4 if quick else 8)
        state = sharded_step_block(state, group, order[:BLOCK])  # warm-up: the workers' compiled code
        group.norms()
        group.bytes_out = group.bytes_in = 0
        timed = _TimedGroup(group)
        t0 = time.perf_counter()
        for i in range(blocks):
            state = sharded_step_block(state, timed, order[i * BLOCK : (i + 1) * BLOCK])
            timed.norms()  # the divergence guard's reduction, once per block
        block_s = (time.perf_counter() - t0) / blocks
        calls = {k: v / blocks for k, v in timed.calls.items()}
        out_block, in_block = group.bytes_out / blocks, group.bytes_in / blocks
    finally:
        group.close()
    # beta from the slope of time against bytes (all shards' bytes cross the coordinator's link)
    total = np.array(sent, dtype=float) * w
    slopes = [np.polyfit(total, np.array(ts), 1)[0] for ts in (out_s, in_s)]
    beta = float(2.0 / sum(slopes))
    compute = shard_flops(BLOCK, size) / F + coord_time(coord, BLOCK)
    # what a real block's calls cost beyond compute and bytes (store reads of the points, the actors'
    # dispatch, serialisation), charged to its round trips: the loopback's effective alpha
    transfer = (out_block + in_block) / beta
    alpha_blocks = max(alpha, (block_s - compute - transfer) / round_trips(BLOCK))
    return {"workers": w, "shard_rows": size, "alpha_s": alpha, "alpha_one_actor_s": one,
            "message_bytes_per_shard": sent, "send_s": out_s, "receive_s": in_s,
            "beta_send_bytes_per_s": float(1 / slopes[0]), "beta_receive_bytes_per_s": float(1 / slopes[1]),
            "beta_bytes_per_s": beta, "alpha_effective_s": alpha_blocks,
            "block": {"b": BLOCK, "blocks": blocks, "seconds": block_s, "calls_s": calls, "model_compute_s": compute,
                      "communication_s": block_s - compute,
                      "bytes_out_per_shard": out_block / w, "bytes_in_per_shard": in_block / w,
                      "model_bytes_out_per_shard": bytes_out(BLOCK), "model_bytes_in_total": bytes_in(BLOCK, l)}}


# ---------------------------------------------------------------------------------------------- model
def coord_time(coord: dict, b) -> float:
    """The fitted coordinator's seconds per block of b rows."""
    return coord["c1_s_per_row"] * b + coord["c2_s_per_row2"] * b * b


def bytes_out(b, n: int = N_FEATURES, d: int = D) -> float:
    """Bytes of one block's `SegmentUpdate` (s) to each shard: ``8 (d^2 + d b + b (n + 3))``, per segment."""
    segments = -(-b // SEGMENT_ROWS)
    return 8.0 * (segments * d * d + d * b + b * (n + 3))


def bytes_in(b, l, n: int = N_FEATURES, d: int = D, r: int = R) -> float:
    """Bytes all shards together send back per block: the gathered columns, points, norms and means
    (``8 b (d + n + 2)``), the products' d r per reduction unit per segment and r norms per unit."""
    segments = -(-b // SEGMENT_ROWS)
    units = -(-l // reduction_unit(l))
    return 8.0 * (b * (d + n + 2) + units * (segments * d * r + r))


def round_trips(b) -> int:
    """Round trips per block: gather (with products) and apply per segment, norms once."""
    return 2 * -(-b // SEGMENT_ROWS) + 1


def predict(model: dict, l: int, w: int, b: int = BLOCK, alpha: float | None = None, beta: float | None = None) -> dict:
    """A pass's seconds on w workers (each of flop rate F), l rows, block b, and its parts."""
    alpha = model["alpha_s"] if alpha is None else alpha
    beta = model["beta_bytes_per_s"] if beta is None else beta
    blocks = l / b
    shard = shard_flops(b, l / w) / model["flop_rate_F"]
    coord = coord_time(model, b)
    comm = round_trips(b) * alpha + (w * bytes_out(b) + bytes_in(b, l)) / beta
    return {"pass_s": blocks * (shard + coord + comm), "shard_s": blocks * shard, "coord_s": blocks * coord,
            "comm_s": blocks * comm, "comm_fraction": comm / (shard + coord + comm)}


def crossover_w(model: dict, l: int, b: int = BLOCK, alpha=None, beta=None) -> float:
    """The w at which ``t_comm = t_shard`` (continuous): the positive root of
    ``(out / beta) w^2 + (k alpha + in / beta) w - flops(l) / F = 0``."""
    alpha = model["alpha_s"] if alpha is None else alpha
    beta = model["beta_bytes_per_s"] if beta is None else beta
    a, c = bytes_out(b) / beta, round_trips(b) * alpha + bytes_in(b, l) / beta
    f = shard_flops(b, l) / model["flop_rate_F"]
    return float((-c + np.sqrt(c * c + 4 * a * f)) / (2 * a))


def block_for(model: dict, l: int, w: int, limit: float = 0.1, alpha=None, beta=None) -> int | None:
    """The smallest block size (8 .. 65536, steps of 2^(1/4)) whose pass spends at most ``limit`` of
    its time communicating, or None (the fraction's floor, bandwidth over compute, is above it)."""
    for b in sorted({int(round(8 * 2 ** (i / 4))) for i in range(53)}):
        if predict(model, l, w, b, alpha, beta)["comm_fraction"] <= limit:
            return b
    return None


def networks(model: dict) -> dict:
    """The networks predicted with: the loopback's alpha (``pid``) and beta measured here, the same with
    the effective alpha of real blocks, and the assumed 10 Gbit/s, 100 us network."""
    return {"loopback_measured": {"alpha": model["alpha_s"], "beta": model["beta_bytes_per_s"]},
            "loopback_blocks": {"alpha": model["alpha_effective_s"], "beta": model["beta_bytes_per_s"]},
            "assumed_10gbit_100us": {"alpha": ASSUMED_NETWORK["alpha_s"],
                                     "beta": ASSUMED_NETWORK["beta_bytes_per_s"]}}


def predictions(model: dict) -> dict:
    """The l = 10^7, w = 64 figures for each of `networks`: a pass's seconds and parts at b = 1024, one
    worker's pass, the crossover w, the block size for 10 % communication and the share by b."""
    out = {}
    l, w = PREDICT["l"], PREDICT["w"]
    for label, net in networks(model).items():
        out[label] = {"l": l, "w": w, "b": BLOCK, **predict(model, l, w, **net),
                      "one_worker_pass_s": predict(model, l, 1, **net)["pass_s"],
                      "crossover_w": crossover_w(model, l, **net),
                      "block_for_10pct_comm": block_for(model, l, w, **net),
                      "comm_fraction_by_b": {str(b): predict(model, l, w, b, **net)["comm_fraction"]
                                             for b in (64, 256, 1024, 4096, 16384)},
                      "network": net}
    return out


def plot(model: dict, path: Path) -> None:
    """Predicted pass seconds and communication's share against w, l = 10^5 and 10^7, both networks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = np.unique(np.round(np.logspace(0, 3, 60)).astype(int))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for l, colour in ((10**5, "tab:blue"), (10**7, "tab:red")):
        nets = networks(model)
        for label, net, style in (("loopback here, pid alpha", nets["loopback_measured"], "-"),
                                  ("loopback here, blocks' alpha", nets["loopback_blocks"], ":"),
                                  ("10 Gbit/s, 100 us", nets["assumed_10gbit_100us"], "--")):
            p = [predict(model, l, int(w), **net) for w in ws]
            name = f"l = 1e{int(np.log10(l))}, {label}"
            left.loglog(ws, [q["pass_s"] for q in p], style, color=colour, label=name)
            right.semilogx(ws, [q["comm_fraction"] for q in p], style, color=colour, label=name)
    left.set_xlabel("workers w")
    left.set_ylabel("predicted seconds per pass (KHA-SMD, r 16, n 64, b 1024)")
    right.set_xlabel("workers w")
    right.set_ylabel("communication's share of a pass")
    right.axhline(0.1, color="grey", lw=0.5)
    left.legend(fontsize=8)
    fig.suptitle("docs/scaling.md cost model, constants fitted by bench/scale_out.py")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--l", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="l 8000, fewer repeats; writes scale_out-quick")
    args = ap.parse_args()
    l, name = (8000, "scale_out-quick") if args.quick else (args.l, "scale_out")
    rng = np.random.default_rng(0)
    X = jittered_digits(l)
    kernel = KernelSpec.from_dict(KERNEL)
    from workers import Backend

    with tempfile.TemporaryDirectory(prefix="kpca-scale-out-") as tmp:
        root = Path(tmp)
        dataset = write_dataset(root, "digits", X)
        with Backend(root, n_workers=2) as backend:
            e2e = end_to_end(backend, root, dataset)
            print(f"ratio t(2)/t(1) {e2e['ratio_pass']:.3f}, A agrees to {e2e['max_rel_diff_A']:.1e}", file=sys.stderr)
            shard = measure_shard(X, kernel, 2 if args.quick else 3, rng)
            coord = measure_coordinator(X[: min(l, 4096)], kernel, 2 if args.quick else 4)
            comm = measure_comm(backend, root, X[: 2048 if args.quick else 4096], kernel, coord,
                                shard["flop_rate_F"], args.quick)
    model = {"flop_rate_F": shard["flop_rate_F"], "c1_s_per_row": coord["c1_s_per_row"],
             "c2_s_per_row2": coord["c2_s_per_row2"], "alpha_s": comm["alpha_s"],
             "beta_bytes_per_s": comm["beta_bytes_per_s"], "alpha_effective_s": comm["alpha_effective_s"]}
    here = {str(w): predict(model, l, w, alpha=model["alpha_effective_s"]) for w in (1, 2)}
    result = {"l": l, "n": N_FEATURES, "r": R, "d": D, "b": BLOCK, "passes": PASSES, "kernel": KERNEL,
              "end_to_end": e2e, "shard": shard, "coordinator": coord, "communication": comm, "model": model,
              "model_here": here, "model_ratio_here": here["2"]["pass_s"] / here["1"]["pass_s"],
              "assumed_network": ASSUMED_NETWORK, "prediction": predictions(model)}
    plot(model, output_path(f"{name}.png"))
    save(name, result)


if __name__ == "__main__":
    main()

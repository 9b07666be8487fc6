"""Mixed load on a real service while two fits run: zero errors expected, latency per kind.

A service (`python -m service` in a process of its own, uvicorn on loopback, embedded dask cluster of
``--workers`` workers, temporary data folder; ``--in-process``: a thread of this one) gets a data set "train" (``--rows`` x 16, float32) and one completed model "m" on it; two
KHA fits of ``--passes`` passes on "train" are started ("fit-1", "fit-2") and keep running through
the window. Then ``--clients`` threads, each with its own keep-alive connection (``--client``: the
standard library's `http.client`, `bench._lean_http`, by default; httpx, which costs about three times
its CPU per request on the cores the service shares, with ``--client httpx``), send requests for
``--seconds`` seconds, each request one of (seeded per client):

* ``project`` (40 %): ``POST /v1/models/m/project`` with 4 rows;
* ``poll`` (40 %): ``GET /v1/models/{m | fit-1 | fit-2}``;
* ``upload`` (20 %): ``PUT /v1/datasets/u{client}/chunks/{k}`` of 32 rows (JSON) to the client's own
  fresh data set, committed at the end of the window.

Beside them (issue 30) ``--abusive`` threads (4) each send, again and again, a ``/denoise`` at the work
limit (fixed point, ``n_iter`` 1000, ``restarts`` 20, ``tol`` 1e-300, as many rows as
``KPCA_MAX_SERVING_WORK`` allows) and give up after 3 s, as the issue's abandoned requests did; their
answers (503 past the deadline, client timeouts) are counted apart, not as errors; with ``--slow-sockets N``
and ``--floods N`` (issue 52) that many connections send their headers a byte at a time and that many
threads flood chunked bodies past their early 404 (`bench._hostile`). One more thread polls
``/healthz`` every 50 ms and records its slowest answer. Unless ``--no-control``, one more prober asks
a bare server (`bench/_bare_server.py`: uvicorn on the service's stack and an app that only answers, in
a process of its own at the same priority) the same way through the same window: the control, what
the machine's own scheduling makes of an answer that costs nothing ("control_healthz"). Unless
``--no-stall-meter``, a process at real-time priority measures the machine's own stalls through the window
(`bench._stall_meter`; "machine_stalls"), and each of the probers' slowest answers says how much of it
such a stall covered ("machine_stall_ms"): that part no scheduling inside the machine could avoid.
With ``--loop-states`` (Linux perf, as root), the machine's scheduler events are recorded through the
window, and "loop_states" says where each API process's event loop spent the window and, for the five
slowest ``/healthz`` answers, where the loop of the process that answered spent each: running, waiting
for a core, waiting for its interpreter's lock, idle (`bench._loop_states`).

The clients run in ``--generator-processes`` processes of their own (default 4, the clients split evenly
among them) and the ``/healthz`` prober in one more: 32 client threads and the prober in one interpreter
measured, besides the service, their own wait for that interpreter's lock (1: everything in this process,
as before). The abusive threads stay in this process (their latency is not reported).
``--generator-nice k`` runs the client processes k OS priority levels below the service and the prober, as
clients on other machines would not take the service's cores; their latencies then include their own
wait for a core.

Any answer other than 2xx, or a transport error, is an error. Reports requests/s, errors (with the
first few), p50 and p99 latency per kind, the slowest ``/healthz`` (and the control's), the fits' state at the start
and end of the window, and where the machine's CPU went in the window (``cpu``: the API processes, the
rest of the service, the load generator, anything else, idle; the API processes' CPU per request).
Prints JSON and writes bench/results/load.json (``--quick``: 8 clients, 10 s, load_quick.json) with
`bench._common.save`.

    python bench/load.py [--clients 32] [--seconds 60] [--rows 3000] [--passes 300] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from bench import _loop_states as loop_states  # noqa: E402
from bench._common import save  # noqa: E402
from bench._hostile import Hostile  # noqa: E402
from bench._lean_http import LeanClient  # noqa: E402
from bench._service import bare_server, running_service, service_process  # noqa: E402
from bench._stall_meter import stall_during, stall_process, stall_summary  # noqa: E402
from service.processes import api_process_count  # noqa: E402
from service.settings import Settings  # noqa: E402

N_FEATURES = 16
KINDS = ("project", "poll", "upload")
WEIGHTS = (0.4, 0.4, 0.2)
KERNEL = {"type": "gaussian", "sigma": 4.0}


def fit_body(name: str, passes: int) -> dict:
    return {"name": name, "dataset": "train", "kernel": KERNEL, "n_components": 4, "solver": "kha",
            "params": {"passes": passes, "seed": 1, "init": "random"}}  # the paper's passes: it keeps running


def prepare(api: httpx.Client, rows: int, passes: int) -> None:
    """Data set "train", completed model "m", and the two long fits started."""
    from client import upload_array

    data = np.random.default_rng(0).normal(size=(rows, N_FEATURES)).astype(np.float32)
    upload_array(api, "train", data, progress=False)
    api.post("/v1/models", json=fit_body("m", 1)).raise_for_status()
    while (status := api.get("/v1/models/m").json()["status"]) in ("queued", "running"):
        time.sleep(0.2)
    if status != "completed":
        raise RuntimeError(f"model m: {status}")
    for name in ("fit-1", "fit-2"):
        api.post("/v1/models", json=fit_body(name, passes)).raise_for_status()


def fits_state(api: httpx.Client) -> dict:
    """Status and pass of each long fit."""
    state = {}
    for name in ("fit-1", "fit-2"):
        record = api.get(f"/v1/models/{name}").json()
        state[name] = {"status": record["status"], "pass": (record.get("progress") or {}).get("pass")}
    return state


def http_client(kind: str, url: str):
    """A client of ``url`` of ``kind``: "stdlib" (`bench._lean_http.LeanClient`) or "httpx"."""
    return LeanClient(url) if kind == "stdlib" else httpx.Client(base_url=url, timeout=60)


def transport_errors(kind: str) -> tuple:
    """The exceptions a client of ``kind`` (`http_client`) raises when the exchange itself failed."""
    return (OSError, http.client.HTTPException) if kind == "stdlib" else (httpx.HTTPError,)


def client_loop(url: str, index: int, stop_at: float, results: list, errors: list, client: str = "stdlib") -> None:
    """One client (`http_client` of kind ``client``): weighted random requests until ``stop_at``; (kind,
    seconds) appended to ``results``."""
    rng = np.random.default_rng(1000 + index)
    dataset = f"u{index}"
    chunk = 0
    failures = transport_errors(client)
    with http_client(client, url) as api:
        created = api.post("/v1/datasets", json={"name": dataset, "n_features": N_FEATURES})
        if not created.is_success:
            raise RuntimeError(f"data set {dataset}: {created.status_code} {created.text[:200]}")
        while time.monotonic() < stop_at:
            kind = KINDS[rng.choice(len(KINDS), p=WEIGHTS)]
            started = time.perf_counter()
            try:
                if kind == "project":
                    rows = rng.normal(size=(4, N_FEATURES)).round(4).tolist()
                    response = api.post("/v1/models/m/project", json={"rows": rows})
                elif kind == "poll":
                    response = api.get(f"/v1/models/{('m', 'fit-1', 'fit-2')[rng.integers(3)]}")
                else:
                    rows = rng.normal(size=(32, N_FEATURES)).round(4).tolist()
                    response = api.put(f"/v1/datasets/{dataset}/chunks/{chunk}", json={"rows": rows})
                    chunk += 1
                failed = not response.is_success
                detail = f"{response.status_code} {response.text[:200]}"
            except failures as exc:
                failed, detail = True, f"{type(exc).__name__}: {exc}"
            results.append((kind, time.perf_counter() - started))
            if failed:
                errors.append(f"{kind}: {detail}")
        if chunk:
            response = api.post(f"/v1/datasets/{dataset}/commit", json={})
            if not response.is_success:
                errors.append(f"commit {dataset}: {response.status_code} {response.text[:200]}")


def client_group(url: str, indices: list[int], start_at: float, stop_at: float, nice: int = 0,
                 client: str = "stdlib") -> tuple[list, list]:
    """In a generator process (its niceness raised by ``nice``): the clients ``indices`` (`client_loop`, of
    kind ``client``) as threads from ``start_at`` (``time.monotonic``, one clock for every process of the
    machine) until ``stop_at``; their (results, errors)."""
    if nice:
        os.nice(nice)
    time.sleep(max(0.0, start_at - time.monotonic()))
    results: list = []
    errors: list = []
    threads = [threading.Thread(target=client_loop, args=(url, i, stop_at, results, errors, client))
               for i in indices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def healthz_process(url: str, start_at: float, stop_at: float, nice: int = 0, client: str = "stdlib") -> list:
    """In a process of its own (its niceness changed by ``nice``): `healthz_loop` from ``start_at``; its
    seconds."""
    if nice:
        os.nice(nice)
    time.sleep(max(0.0, start_at - time.monotonic()))
    seconds: list = []
    healthz_loop(url, stop_at, seconds, client)
    return seconds


def healthz_loop(url: str, stop_at: float, seconds: list, client: str = "stdlib") -> None:
    """GET /healthz every 50 ms (an `http_client` of kind ``client``) until ``stop_at``; each answer's
    (seconds, time.monotonic() at its start, the connection's local port or None) appended."""
    with http_client(client, url) as api:
        while time.monotonic() < stop_at:
            at, started = time.monotonic(), time.perf_counter()
            api.get("/healthz")
            seconds.append((time.perf_counter() - started, at, local_port(api)))
            time.sleep(0.05)


def local_port(api) -> int | None:
    """The local port of a `bench._lean_http.LeanClient`'s open connection; None for httpx or none open."""
    sock = getattr(getattr(api, "connection", None), "sock", None)
    return sock.getsockname()[1] if sock is not None else None


def run_window(url: str, args, control_url: str | None = None) -> tuple[list, list, list, list, list, list, dict, dict]:
    """The measured window: the clients, the abusive threads, the ``/healthz`` prober, the control's
    prober (when ``control_url``), the stall meter (when ``args.stall_meter``) and the recording of the
    event loops' states (when ``args.loop_states``), from the same start to the same stop; (results,
    errors, healthz (seconds, at), what the hostile clients met, control (seconds, at), the `cpu_seconds` at the start
    and at the stop, what `bench._stall_meter.stall_process` measured, `loop_states`' report). Every time
    in them is seconds after the window's start."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    processes = max(1, args.generator_processes)
    meter = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) if args.stall_meter else None
    if meter:
        meter.submit(time.monotonic).result()  # its process started and imported before the window
    start_at = time.monotonic() + (5.0 if processes > 1 else 0.0)  # spawned interpreters import first
    stop_at = start_at + args.seconds
    hostile = Hostile(url, args.rows, args.abusive, args.slow_sockets, args.floods, start_at, stop_at)
    hostile.start()
    port = int(url.rsplit(":", 1)[1])
    snapshots: list = []
    sampler = threading.Thread(target=sample_cpu, args=(port, (start_at, stop_at), snapshots))
    sampler.start()
    probed = [url] + ([control_url] if control_url else [])
    measured = meter.submit(stall_process, start_at, stop_at) if meter else None
    states = LoopStates(port, start_at, stop_at) if args.loop_states else None
    if processes == 1:
        answers: list = [[] for _ in probed]
        probers = [threading.Thread(target=healthz_loop, args=(target, stop_at, seconds, args.client))
                   for target, seconds in zip(probed, answers)]
        for prober in probers:
            prober.start()
        results, errors = client_group(url, list(range(args.clients)), start_at, stop_at, client=args.client)
        for prober in probers:
            prober.join()
    else:
        groups = [list(range(args.clients))[k::processes] for k in range(processes)]
        with ProcessPoolExecutor(processes + len(probed), mp_context=multiprocessing.get_context("spawn")) as pool:
            probers = [pool.submit(healthz_process, target, start_at, stop_at, args.prober_nice, args.client)
                       for target in probed]
            parts = [pool.submit(client_group, url, group, start_at, stop_at, args.generator_nice, args.client)
                     for group in groups if group]
            results = [item for part in parts for item in part.result()[0]]
            errors = [item for part in parts for item in part.result()[1]]
            answers = [prober.result() for prober in probers]
    hostile.join()
    sampler.join()
    loops = states.report(answers[0]) if states else {"available": False, "why": "not asked (--loop-states)"}
    healthz, control = ([(s, at - start_at) for s, at, _ in seconds] for seconds in (answers + [[]])[:2])
    stalls = {"available": False, "why": "not asked (--no-stall-meter)"}
    if meter:
        with meter:
            stalls = measured.result()
        if stalls["available"]:
            stalls["began"] -= start_at
            stalls["stalls"] = [(start - start_at, late) for start, late in stalls["stalls"]]
    return results, errors, healthz, hostile.report(), control, snapshots, stalls, loops


class LoopStates:
    """`bench._loop_states` through a window: the machine's scheduler events recorded from now to
    ``stop_at``, the API processes (those listening on ``port``) and the ``/healthz`` prober's
    connections to them noted at the window's start and near its end, and `report` on the slowest
    answers."""

    def __init__(self, port: int, start_at: float, stop_at: float):
        self.folder = tempfile.TemporaryDirectory(prefix="kpca-loop-states-")
        self.recording, self.why = loop_states.record(Path(self.folder.name) / "sched.data",
                                                      stop_at - time.monotonic() + 0.5)
        self.port, self.start_at, self.stop_at, self.api_of_port = port, start_at, stop_at, {}
        self.noting = threading.Thread(target=self.note_connections, args=((start_at + 1.0, stop_at - 1.0),))
        self.noting.start()

    def note_connections(self, moments: tuple[float, ...]) -> None:
        """At each of ``moments``: which API process holds each connection to ``port`` (by the client's port)."""
        for moment in moments:
            time.sleep(max(0.0, moment - time.monotonic()))
            for pid in listening_pids(self.port):
                with contextlib.suppress(psutil.Error):
                    self.api_of_port.update({c.raddr.port: pid for c in psutil.Process(pid).net_connections("tcp")
                                             if c.raddr and c.laddr.port == self.port})

    def report(self, answers: list) -> dict:
        """Each API process's event loop (its main thread) over the window, in each of
        `bench._loop_states.STATES` (milliseconds), and the same for the process that answered each of the
        five slowest of ``answers`` (the prober's (seconds, at, local port)), over that answer (None where
        that process is not known)."""
        self.noting.join()
        with self.folder:
            if self.recording is None:
                return {"available": False, "why": self.why}
            if self.recording.wait() != 0:
                return {"available": False, "why": f"perf record failed: {self.recording.stderr.read()[-300:]}"}
            pids = sorted(set(self.api_of_port.values()))
            try:
                intervals = loop_states.loop_intervals(Path(self.folder.name) / "sched.data", pids)
            except subprocess.CalledProcessError as exc:
                return {"available": False, "why": f"perf sched timehist failed: {exc.stderr[-300:]}"}
        slowest = []
        for s, at, port in sorted(answers)[-5:]:
            pid = self.api_of_port.get(port)
            slowest.append({"ms": round(s * 1000, 1), "at_s": round(at - self.start_at, 2), "api_pid": pid,
                            "loop_ms": loop_states.states_during(intervals[pid], at, at + s) if pid in intervals
                            else None})
        return {"available": True, "slowest_healthz": slowest,
                "window_ms": {str(pid): loop_states.states_during(intervals.get(pid, []), self.start_at, self.stop_at)
                              for pid in pids}}


def cpu_seconds(port: int) -> dict:
    """CPU seconds (user + system, every thread) used so far by each group of the machine's processes:
    ``api`` (the service's processes listening on ``port``), ``service_other`` (the rest of the service's
    tree: a supervisor, the dask nannies and workers), ``generator`` (this process and its other
    children: client processes, probers, the control's server) and ``other`` (everything else), with
    ``idle`` and ``total`` from the machine's own counters. O(processes)."""
    me = psutil.Process()
    children = me.children(recursive=True)
    mine = {child.pid for child in children} | {me.pid}
    service_tree: set[int] = set()
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.cmdline()[1:3] == ["-m", "service"]:
                service_tree |= {child.pid} | {c.pid for c in child.children(recursive=True)}
    listening = listening_pids(port)
    groups = dict.fromkeys(("api", "service_other", "generator", "other"), 0.0)
    for process in psutil.process_iter():
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        used = times.user + times.system
        if process.pid in listening:
            groups["api"] += used
        elif process.pid in service_tree:
            groups["service_other"] += used
        elif process.pid in mine:
            groups["generator"] += used
        else:
            groups["other"] += used
    machine = psutil.cpu_times()
    return {**groups, "idle": machine.idle + getattr(machine, "iowait", 0.0),
            "total": sum(machine) - getattr(machine, "guest", 0.0) - getattr(machine, "guest_nice", 0.0)}


def listening_pids(port: int) -> set[int]:
    """This process's descendants listening on ``port``: the service's API processes. O(processes)."""
    listening = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in child.net_connections("tcp")):
                listening.add(child.pid)
    return listening


def sample_cpu(port: int, moments: tuple[float, ...], snapshots: list) -> None:
    """`cpu_seconds` at each of ``moments`` (``time.monotonic``), appended to ``snapshots``."""
    for moment in moments:
        time.sleep(max(0.0, moment - time.monotonic()))
        snapshots.append(cpu_seconds(port))


def cpu_shares(before: dict, after: dict, requests: int) -> dict:
    """What each group of `cpu_seconds` used between two snapshots, in CPU seconds and as a share of
    the machine's, with the API processes' CPU milliseconds per request. O(1)."""
    used = {group: after[group] - before[group] for group in before}
    total = used.pop("total")
    return {"cpu_s": {group: round(seconds, 2) for group, seconds in used.items()},
            "share": {group: round(seconds / total, 3) for group, seconds in used.items()} if total > 0 else {},
            "api_cpu_ms_per_request": round(1000 * used["api"] / requests, 3) if requests else None}


def probe_summary(answers: list, stalls: list) -> dict:
    """p50, p99, the slowest and the five slowest of a prober's ``(seconds, at)`` answers, each with its
    time in the window and the milliseconds of it that the longest overlapping machine stall covered
    (``stalls``: `bench._stall_meter.stall_process`'s, in the same clock)."""
    return {**percentiles([s for s, _ in answers]),
            "max_ms": round(max(s for s, _ in answers) * 1000, 1) if answers else None,
            "slowest": [{"ms": round(s * 1000, 1), "at_s": round(at, 2),
                         "machine_stall_ms": round(stall_during(stalls, at, s) * 1000, 1)}
                        for s, at in sorted(answers)[-5:]]}


def percentiles(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1000
    return {"count": int(ms.size), "p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p99_ms": round(float(np.percentile(ms, 99)), 1), "max_ms": round(float(ms.max()), 1)} if ms.size else {"count": 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--passes", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--note", default="", help="what else ran on the machine (recorded with the figures)")
    ap.add_argument("--abusive", type=int, default=4, help="threads sending /denoise at the work limit")
    ap.add_argument("--slow-sockets", type=int, default=0, help="connections sending headers a byte at a time")
    ap.add_argument("--floods", type=int, default=0, help="threads flooding chunked bodies past their early 404")
    ap.add_argument("--api-processes", type=int, default=None,
                    help="the service's API processes (KPCA_API_PROCESSES; default: its own, one per core up to 4)")
    ap.add_argument("--name", default=None, help="the result's name under bench/results (default load, load_quick)")
    ap.add_argument("--generator-processes", type=int, default=4,
                    help="processes the clients are split among, plus one for the /healthz prober (1: threads of this one)")
    ap.add_argument("--generator-nice", type=int, default=0,
                    help="niceness added to the client processes (their wait for a core then counts in their "
                         "latencies, not the service's: as clients on other machines; the prober keeps its own)")
    ap.add_argument("--prober-nice", type=int, default=0,
                    help="niceness change of the /healthz prober's process (negative, as root: its own scheduling "
                         "on a saturated machine is then not counted in the service's answer time)")
    ap.add_argument("--control", action=argparse.BooleanOptionalAction, default=True,
                    help="probe a bare server beside /healthz (bench/_bare_server.py): the machine's own delay")
    ap.add_argument("--stall-meter", action=argparse.BooleanOptionalAction, default=True,
                    help="measure the machine's own stalls beside the probers (bench/_stall_meter.py; a "
                         "real-time process, as root): the part of a slow answer no scheduling here could avoid")
    ap.add_argument("--loop-states", action="store_true",
                    help="record the machine's scheduler events (Linux perf, as root) and say where each API "
                         "process's event loop spent the slowest /healthz answers (bench/_loop_states.py)")
    ap.add_argument("--client", choices=("stdlib", "httpx"), default="stdlib",
                    help="the clients' and probers' HTTP client: the standard library's (bench/_lean_http.py), or "
                         "httpx, which takes about three times its CPU per request from the cores it shares with the service")
    ap.add_argument("--quick", action="store_true", help="8 clients for 10 s")
    ap.add_argument("--in-process", action="store_true",
                    help="serve from a thread of this process (the load generator then shares its interpreter)")
    args = ap.parse_args()
    if args.quick:
        args.clients, args.seconds = 8, 10.0

    environ = {} if args.api_processes is None else {"KPCA_API_PROCESSES": str(args.api_processes)}
    serving = running_service(n_workers=args.workers) if args.in_process else service_process(args.workers, **environ)
    control = bare_server() if args.control else contextlib.nullcontext()
    with serving as url, control as control_url, httpx.Client(base_url=url, timeout=120) as api:
        prepare(api, args.rows, args.passes)
        time.sleep(1.0)
        fits_before = fits_state(api)
        results, errors, healthz, hostile, control_answers, cpu, stalls, loops = run_window(url, args, control_url)
        elapsed = args.seconds
        fits_after = fits_state(api)
        for name in ("fit-1", "fit-2"):
            api.post(f"/v1/models/{name}/cancel", json={})

    by_kind = {kind: percentiles([s for k, s in results if k == kind]) for kind in KINDS}
    save(args.name or ("load_quick" if args.quick else "load"), {
        "clients": args.clients,
        "seconds": args.seconds,
        "workers": args.workers,
        "rows": args.rows,
        "passes": args.passes,
        "requests": len(results),
        "requests_per_s": round(len(results) / elapsed, 1),
        "errors": len(errors),
        "error_examples": errors[:10],
        "latency": {**by_kind, "all": percentiles([s for _, s in results])},
        "abusive_threads": args.abusive,
        "slow_socket_count": args.slow_sockets,
        "flood_threads": args.floods,
        **hostile,
        "healthz": probe_summary(healthz, stalls.get("stalls", [])),
        "control_healthz": probe_summary(control_answers, stalls.get("stalls", [])) if args.control else None,
        "machine_stalls": stall_summary(stalls),
        "loop_states": loops,
        "cpu": cpu_shares(*cpu, len(results)),
        "fits_at_start": fits_before,
        "fits_at_end": fits_after,
        "server": "a thread of the load generator's process" if args.in_process else "a process of its own",
        "generator_processes": args.generator_processes,
        "client": args.client,
        "prober_nice": args.prober_nice,
        "generator_nice": args.generator_nice,
        "api_processes": 1 if args.in_process else api_process_count(Settings(**(
            {} if args.api_processes is None else {"api_processes": args.api_processes}))),
        "note": args.note,
    })


if __name__ == "__main__":
    main()

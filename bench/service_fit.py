"""The default fit through the service against the same fit in this process (issue 26).

For each size l (``--sizes``), on the jittered digits of bench/time_to_accuracy.py (n = 64, Gaussian
sigma 3, r = 16): the estimator's default fit (`kpca.estimator.KernelHebbianPCA` with the kernel and
``n_components`` only) timed in this process, then the same request through a real service (uvicorn on
loopback, the embedded dask cluster sized to the machine, a temporary data folder): the data set uploaded
(not timed), ``POST /v1/models`` with the data set, kernel and ``n_components`` only, polled every 0.05 s
until ``completed``. The service's time is the wall time from the POST to the poll that saw it completed
(so it includes queueing, opening the zarr rows, checkpoints and records, and up to one poll interval).
Both runs' passes and residuals are reported, to show they did the same work. The in-process fit runs
before and after the service's, and its faster time is the anchor (the machine is shared). Both sides
first fit 1,500 rows untimed (the service twice, once per worker of this machine), so that neither
pays for loading its jitted code.

    python bench/service_fit.py [--sizes 8000,20000] [--repeat 1] [--name service_fit]

Prints JSON and writes bench/results/service_fit.json (or ``--name``). From ``KPCA_SHARD_MIN_ROWS`` rows
(50,000 by default) the service shards the fit over its workers; ``workers`` says how many ran it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

from bench._common import jittered_digits, save  # noqa: E402
from bench._service import running_service  # noqa: E402

R, SIGMA = 16, 3.0


def in_process(X) -> dict:
    """The estimator's default fit of X: wall seconds, passes, residual."""
    from kpca.estimator import KernelHebbianPCA

    started = time.perf_counter()
    est = KernelHebbianPCA(R, sigma=SIGMA).fit(X)
    return {"seconds": time.perf_counter() - started, "passes": int(est.state_["pass"]),
            "residual": est.state_.get("residual"), "init": est.params_used_["init"]}


def through_service(api, name: str, dataset: str) -> dict:
    """POST /v1/models with the defaults, polled until it ends: wall seconds from the POST, the record's
    own elapsed time, passes and residual."""
    body = {"name": name, "dataset": dataset, "kernel": {"type": "gaussian", "sigma": SIGMA}, "n_components": R}
    started = time.perf_counter()
    api.request("POST", "/v1/models", json=body)
    record = api.wait(name, poll_s=0.05)
    seconds = time.perf_counter() - started
    if record["status"] != "completed":
        raise RuntimeError(f"{name}: {record['status']}: {record.get('error')}")
    last = record["history"][-1] if record["history"] else {}
    return {"seconds": seconds, "fit_elapsed_s": record["progress"]["elapsed_s"],
            "passes": int(record["progress"]["pass"]), "workers": record["progress"].get("workers"),
            "convergence": last.get("convergence"),
            "init": record["params_used"]["init"]}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8000,20000")
    parser.add_argument("--repeat", type=int, default=1, help="service fits per size (the fastest is kept)")
    parser.add_argument("--name", default=None, help="the result's name under bench/results (default service_fit, "
                        "or service_fit_cold with --cold)")
    parser.add_argument("--cold", action="store_true", help="no warm-up fits through the service: its first fit "
                        "comes 5 s after it answers /healthz, with only the workers' own warm-up "
                        "(KPCA_WARM_WORKERS) behind it; writes service_fit_cold.json")
    args = parser.parse_args(argv)
    from client.api import Client
    from kpca.estimator import KernelHebbianPCA

    KernelHebbianPCA(R, sigma=SIGMA).fit(jittered_digits(1500))  # compile the jitted code first
    results = []
    with running_service(n_workers=None) as url, Client(url) as api:
        if args.cold:
            time.sleep(5.0)
        else:
            api.upload("digits-warm", jittered_digits(1500))  # the workers load the jitted code the same way
            for k in range(2):  # (a fit goes to either worker)
                through_service(api, f"warm-{k}", "digits-warm")
        for l in (int(s) for s in args.sizes.split(",")):
            X = jittered_digits(l)
            api.upload(f"digits-{l}", X)
            before = in_process(X)
            service = min((through_service(api, f"default-{l}-{k}", f"digits-{l}") for k in range(args.repeat)),
                          key=lambda run: run["seconds"])
            after = in_process(X)
            anchor = min(before["seconds"], after["seconds"])
            results.append({"l": l, "in_process": [before, after], "service": service,
                            "service_over_in_process": service["seconds"] / anchor})
            print(results[-1], flush=True)
    payload = {"r": R, "sigma": SIGMA, "data": "jittered digits (bench._common.jittered_digits)", "results": results,
               "goal": "service within 1.2x of the in-process fit",
               "goal_met": all(r["service_over_in_process"] <= 1.2 for r in results), "cold": args.cold,
               "warm_workers": os.environ.get("KPCA_WARM_WORKERS", "default (on)")}
    save(args.name or ("service_fit_cold" if args.cold else "service_fit"), payload)
    return payload


if __name__ == "__main__":
    main()

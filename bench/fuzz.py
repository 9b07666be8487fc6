"""The long schemathesis run over the service's OpenAPI document (the CI run is
tests/service/test_schemathesis.py, bounded and derandomized).

A real service (uvicorn on loopback, embedded one-worker dask cluster, temporary data folder) with a
committed data set "d", a completed model "m" and a clustering "c"; then, for every operation,
``--examples`` generated requests of each kind (valid data, invalid data, valid data aimed at the
existing resource) with Hypothesis seeded by ``--seed``, DELETE last. Each response is checked as
in CI (`bench._fuzzing`): no 5xx, documented status code, content type, headers and body schema.
Stateful runs (schemathesis's state machine) need OpenAPI links, which the document does not declare,
so this run is per operation.

With ``--keys`` the server has API keys configured (a write key, `WRITE_KEY`, and a read key) and
every request carries the write key (``Authorization: Bearer``), as a deployment beyond loopback
runs; without it no key is configured and every route is open (the loopback default).

Prints JSON (requests, statuses by code, failures with a curl command each, time) and writes
bench/results/fuzz.json (``--keys``: fuzz_keys.json; ``--quick``: fuzz_quick.json or
fuzz_keys_quick.json, 10 examples; ``--name``: NAME.json) with `bench._common.save`.

    python bench/fuzz.py [--examples 200] [--seed 18] [--minutes 3] [--keys] [--quick] [--name NAME]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import save  # noqa: E402
from bench._service import running_service  # noqa: E402


#: the keys of a ``--keys`` run: requests carry the write key; the read key is configured beside it
WRITE_KEY, READ_KEY = "fuzz-write-key-0123456789", "fuzz-read-key-0123456789"


def prepare(url: str, api_key: str | None = None) -> dict[str, str]:
    """A committed data set "d" (200 x 4), a completed model "m" and a clustering "c" on it, created
    with ``api_key`` (None: no key)."""
    from client import upload_array

    upload_array(url, "d", np.random.default_rng(0).normal(size=(200, 4)), progress=False, api_key=api_key)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=url, timeout=120, headers=headers) as api:
        kernel = {"type": "gaussian", "sigma": 2.0}
        api.post("/v1/models", json={"name": "m", "dataset": "d", "kernel": kernel, "n_components": 2,
                                     "solver": "kha", "params": {"passes": 1, "seed": 0}}).raise_for_status()
        api.post("/v1/clusterings", json={"name": "c", "dataset": "d", "n_clusters": 2,
                                          "kernel": kernel}).raise_for_status()
        for route, name in (("/v1/models", "m"), ("/v1/clusterings", "c")):
            while api.get(f"{route}/{name}").json()["status"] in ("queued", "running"):
                pass
    return {"datasets": "d", "models": "m", "clusterings": "c"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=200, help="examples per operation and kind")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--minutes", type=float, default=3.0, help="no new operation is started after this")
    ap.add_argument("--keys", action="store_true", help="API keys on the server, the write key in every request")
    ap.add_argument("--quick", action="store_true", help="10 examples, 1 minute")
    ap.add_argument("--name", default=None, help="the result's name under bench/results (default as above)")
    args = ap.parse_args()
    if args.quick:
        args.examples, args.minutes = 10, 1.0
    from bench._fuzzing import fuzz_operations

    key = WRITE_KEY if args.keys else None
    keys = [f"{WRITE_KEY}:write", f"{READ_KEY}:read"] if args.keys else []
    with running_service(register_prefixes=[], api_keys=keys) as url:
        known = prepare(url, key)
        report = fuzz_operations(url, args.examples, seed=args.seed, deadline_s=args.minutes * 60, known=known,
                                 api_key=key)
    figures = report.as_dict()
    name = "fuzz_keys" if args.keys else "fuzz"
    save(args.name or (f"{name}_quick" if args.quick else name), {
        "api_keys": "write key in every request" if args.keys else "none configured",
        "examples_per_operation_and_kind": args.examples,
        "seed": args.seed,
        "time_limit_s": args.minutes * 60,
        **figures,
    })


if __name__ == "__main__":
    main()

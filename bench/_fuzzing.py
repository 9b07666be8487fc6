"""Schemathesis over the service's own OpenAPI document: shared by bench/fuzz.py (the long run) and
tests/service/test_schemathesis.py (bounded, derandomized, in CI). It lives in bench/ so that the
bench script imports nothing from tests/; it needs the test extra (schemathesis, Hypothesis).

`fuzz_operations` loads ``/openapi.json`` from a running server, generates requests for every
operation (positive and negative data, Hypothesis strategies from schemathesis 4) and checks each
response: no 5xx, a documented status code, the documented content type, headers and body schema.
Every failure is collected (not only the first), with the request as a curl command, so one run
lists every hole found.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# a model archive (POST /v1/models/import) is raw bytes, like application/octet-stream
schemathesis.serializer.alias("application/x-tar", "application/octet-stream")
MODES = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
REQUEST_TIMEOUT_S = 60.0


@dataclass
class FuzzReport:
    """What a run sent and found: requests, status counts per code, failures (one dict each)."""

    requests: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    failures: list[dict] = field(default_factory=list)
    operations: int = 0
    elapsed_s: float = 0.0

    def as_dict(self) -> dict:
        """JSON-ready figures: counts of requests, statuses (by code), failures, time."""
        return {
            "operations": self.operations,
            "requests": self.requests,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "server_errors": sum(v for k, v in self.statuses.items() if k >= 500),
            "failures": len(self.failures),
            "failure_list": self.failures,
            "elapsed_s": round(self.elapsed_s, 2),
        }


def load_schema(base_url: str, headers: dict | None = None):
    """The service's OpenAPI document (fetched with ``headers``: the API key where keys are configured)
    as a schemathesis schema whose requests go to ``base_url``."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", timeout=30, headers=headers or {})
    schema.config.update(base_url=base_url)
    return schema


def _record(report: FuzzReport, case, response, failure: BaseException, headers: dict | None = None) -> None:
    failures = failure.exceptions if isinstance(failure, FailureGroup) else (failure,)
    for item in failures:
        title = getattr(item, "title", type(item).__name__)
        entry = {
            "operation": case.operation.label,
            "check": title,
            "status": None if response is None else response.status_code,
            "message": str(getattr(item, "message", item))[:500],
            "curl": case.as_curl_command(headers=headers)[:1500],
        }
        if not any(e["operation"] == entry["operation"] and e["check"] == entry["check"]
                   and e["status"] == entry["status"] for e in report.failures):
            report.failures.append(entry)


def fuzz_operations(base_url: str, max_examples: int, *, seed: int | None = None,
                    deadline_s: float | None = None, include_delete: bool = True,
                    known: dict[str, str] | None = None, api_key: str | None = None) -> FuzzReport:
    """Run generated requests against every operation of the server at ``base_url``.

    Parameters
    ----------
    base_url : str
        ``http://127.0.0.1:port`` of a running server.
    max_examples : int
        Hypothesis examples per operation and generation mode (positive, negative).
    seed : int or None
        None: derandomized (the same requests on every run, as CI needs); an int seeds Hypothesis.
    deadline_s : float or None
        Time for the whole run, shared equally by the operations and kinds (each stops generating
        when its share is spent); None: no limit.
    include_delete : bool
        Whether DELETE operations are exercised (they may remove the fixtures' data).
    known : dict or None
        Existing resources by collection (``{"datasets": "d", "models": "m"}``): operations under
        ``/v1/{collection}/{name}`` are also run, positive data only, with that ``name``, so that
        generated bodies reach the code behind the 404 of a random name.
    api_key : str or None
        Sent as ``Authorization: Bearer <api_key>`` with every request (over a generated
        ``Authorization`` header), for a server with API keys configured; None: no key.

    Returns
    -------
    FuzzReport
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    schema = load_schema(base_url, headers)
    report = FuzzReport()
    started = time.monotonic()
    session = requests.Session()
    operations = [result.ok() for result in schema.get_all_operations()]
    # DELETE last, so that the other operations still find the data the caller prepared.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    if not include_delete:
        operations = [op for op in operations if op.method.upper() != "DELETE"]
    runs = []
    for operation in operations:
        runs += [operation.as_strategy(generation_mode=mode) for mode in MODES]
        name = _known_name(operation.path, known or {})
        if name is not None:
            runs.append(operation.as_strategy(path_parameters={"name": name}))
    share = None if deadline_s is None else deadline_s / len(runs)
    report.operations = len(operations)
    for strategy in runs:
        _fuzz_one(strategy, base_url, session, report, max_examples, seed, share, headers)
    report.elapsed_s = time.monotonic() - started
    return report


def _known_name(path: str, known: dict[str, str]) -> str | None:
    parts = path.strip("/").split("/")
    if len(parts) >= 3 and parts[0] == "v1" and parts[2] == "{name}":
        return known.get(parts[1])
    return None


class _TimeUp(Exception):
    """This operation's share of the time is spent."""


def _fuzz_one(strategy, base_url, session, report, max_examples, seed, share_s, headers=None) -> None:
    stop_at = None if share_s is None else time.monotonic() + share_s
    config = settings(
        max_examples=max_examples,
        derandomize=seed is None,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )

    def one(case):
        if stop_at is not None and time.monotonic() > stop_at:
            raise _TimeUp
        response = None
        try:
            response = case.call(base_url=base_url, session=session, headers=headers, timeout=REQUEST_TIMEOUT_S)
            report.requests += 1
            report.statuses[response.status_code] += 1
            case.validate_response(response, checks=CHECKS, transport_kwargs={"base_url": base_url})
        except (Failure, FailureGroup) as failure:
            _record(report, case, response, failure, headers)
        except requests.RequestException as exc:
            report.requests += 1
            report.statuses[0] += 1  # 0: no response (connection reset, timeout)
            _record(report, case, None, exc, headers)

    test = given(strategy)(one)
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    try:
        config(test)()
    except _TimeUp:
        pass
    except Unsatisfiable:
        pass  # nothing to negate: an operation without parameters or body has no invalid request

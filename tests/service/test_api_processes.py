"""``python -m service --api-processes 2`` (issue 30, `service.processes`): a supervisor with the embedded
cluster and two API processes on one socket, as a real child process on a loopback port.

What must hold: both API processes answer; a data set uploaded through them, a fit started through one
and polled through any completes once, and its projection is served; the request metrics are summed
over the processes; an API process killed is replaced; SIGTERM stops every process; a supervisor
killed outright takes its API processes with it."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import psutil
import pytest

from tests.e2e.service_process import free_port
from tests.waiting import PATIENCE_S, answers_healthz, wait_until


def listeners(supervisor: psutil.Process, port: int) -> set[int]:
    """The supervisor's child processes listening on ``port`` (the API processes)."""
    found = set()
    for child in supervisor.children():
        try:
            if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in child.net_connections("tcp")):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def wait_for(condition, what: str):
    """`wait_until` ``condition`` (polled every 0.2 s), failing with ``what``; its value."""
    return wait_until(condition, what=what, interval=0.2)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """The supervisor (psutil.Process), its URL, port and temporary folder (where its metrics folder is)."""
    root = tmp_path_factory.mktemp("processes")
    (root / "tmp").mkdir()
    port = free_port()
    env = {**os.environ, "KPCA_N_WORKERS": "1", "KPCA_WATCHDOG_S": "1", "TMPDIR": str(root / "tmp")}
    env.pop("KPCA_API_PROCESSES", None)
    proc = subprocess.Popen([sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(root / "data"), "--api-processes", "2"],
                            env=env, stdout=open(root / "access.log", "wb"),
                            stderr=open(root / "service.log", "wb"),
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or answers_healthz(url), "the service to start")
        assert proc.poll() is None, (root / "service.log").read_text()
        supervisor = psutil.Process(proc.pid)
        wait_for(lambda: len(listeners(supervisor, port)) == 2, "two API processes to start")
        yield {"supervisor": supervisor, "proc": proc, "url": url, "port": port, "root": root}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=PATIENCE_S)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def counted(url: str, route: str) -> float:
    """``kpca_http_requests_total`` of GET ``route`` with status 200, from one scrape."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    pattern = re.compile(r'^kpca_http_requests_total\{method="GET",route="' + re.escape(route) +
                         r'",status="200"\} (\S+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


def test_both_processes_answer_and_the_metrics_are_summed_over_them(service):
    url, root = service["url"], service["root"]
    before = counted(url, "/v1/datasets")
    for _ in range(30):  # a connection each: the kernel hands them to either process
        with httpx.Client(base_url=url, timeout=60) as api:
            assert api.get("/v1/datasets").status_code == 200
    assert counted(url, "/v1/datasets") - before == 30  # whichever process answers the scrape
    folders = list((root / "tmp").glob("kpca-metrics-*"))
    assert len(folders) == 1
    pids = {int(m.group(1)) for f in folders[0].iterdir() if (m := re.match(r"counter_(\d+)\.db$", f.name))}
    assert pids == listeners(service["supervisor"], service["port"])  # both recorded requests


def test_every_api_process_answers_healthz_in_its_protocol(service):
    """Each API process serves with `service.health_protocol`: ``/healthz`` is answered before the app, so
    the app's request metrics, summed over the processes, never count it."""
    url = service["url"]
    for _ in range(10):  # a connection each: both processes answer some
        assert httpx.get(f"{url}/healthz", timeout=60).json() == {"status": "ok"}
    assert httpx.get(f"{url}/v1/datasets", timeout=60).status_code == 200
    assert counted(url, "/v1/datasets") > 0  # the scrape counts what the apps saw
    assert counted(url, "/healthz") == 0


def test_every_api_process_writes_its_access_lines_in_order(service):
    """uvicorn's line per request reaches standard output through `service.access_log` (its handler class
    is named by the logging configuration each API process loads), from both processes, each line once,
    and each process's lines in the order it answered. The two processes' lines interleave by their
    batches (`service.access_log` writes a process's lines a few at a time), not by the requests' order."""
    url, root = service["url"], service["root"]
    for index in range(20):  # a connection each: both processes answer some
        assert httpx.get(f"{url}/v1/datasets?limit={index + 1}", timeout=60).status_code == 200
    with httpx.Client(base_url=url, timeout=60) as api:  # one connection: one process answers them all
        for index in range(20):
            assert api.get(f"/v1/datasets?limit={index + 101}").status_code == 200
    def written() -> list[int]:
        text = (root / "access.log").read_text()
        return [int(m) for m in re.findall(r'"GET /v1/datasets\?limit=(\d+) HTTP/1.1" 200', text)]
    wait_for(lambda: len(written()) == 40, "the 40 access lines to be written")
    assert sorted(written()) == list(range(1, 21)) + list(range(101, 121))  # each once, none lost
    assert [n for n in written() if n > 100] == list(range(101, 121))  # one process's lines: in order


def test_a_fit_started_through_one_process_completes_once_and_serves(service):
    url = service["url"]
    rows = np.random.default_rng(0).standard_normal((300, 5))
    with httpx.Client(base_url=url, timeout=30) as api:
        api.post("/v1/datasets", json={"name": "d", "n_features": 5}).raise_for_status()
        api.put("/v1/datasets/d/chunks/0", json={"rows": rows.tolist()}).raise_for_status()
        api.post("/v1/datasets/d/commit", json={}).raise_for_status()
        api.post("/v1/models", json={"name": "m", "dataset": "d", "kernel": {"type": "gaussian", "sigma": 2.0},
                                     "n_components": 3, "solver": "kha", "params": {"passes": 6, "tol": 0}}
                 ).raise_for_status()
    seen = {}

    def ended() -> bool:  # polled over fresh connections: both processes see the one record
        with httpx.Client(base_url=url, timeout=30) as api:
            record = seen["record"] = api.get("/v1/models/m").json()
        return record["status"] in ("completed", "failed", "cancelled")

    wait_until(ended, what=lambda: f"the fit to end (last seen: {seen['record']})", interval=0.3)
    record = seen["record"]
    assert record["status"] == "completed", record
    assert [h["pass"] for h in record["history"]] == list(range(1, 7))  # one run: no pass twice
    with httpx.Client(base_url=url, timeout=30) as api:
        projected = api.post("/v1/models/m/project", json={"rows": rows[:4].tolist()})
    assert projected.status_code == 200, projected.text
    assert np.asarray(projected.json()["components"]).shape == (4, 3)


def ignores_sigint(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its ``SigIgn`` mask in /proc)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError(f"no SigIgn line for process {pid}")


def test_ctrl_c_is_left_to_the_supervisor(service):
    """Ctrl-C reaches the whole process group; an API process that ended on it was restarted by uvicorn's
    supervisor before the supervisor saw its own (and one still starting printed a KeyboardInterrupt). The
    API processes ignore SIGINT: the supervisor stops them with SIGTERM. Sent to one of them alone, it
    changes nothing."""
    supervisor, port, url = service["supervisor"], service["port"], service["url"]
    api_processes = listeners(supervisor, port)
    assert len(api_processes) == 2 and all(ignores_sigint(pid) for pid in api_processes)
    assert not ignores_sigint(supervisor.pid)
    os.kill(min(api_processes), signal.SIGINT)
    time.sleep(1.0)  # what would follow, if anything did (nothing to wait for: on a loaded machine, a weaker check)
    assert listeners(supervisor, port) == api_processes and answers_healthz(url)


def test_a_killed_api_process_is_replaced(service):
    supervisor, port, url = service["supervisor"], service["port"], service["url"]
    old = listeners(supervisor, port)
    victim = min(old)
    os.kill(victim, signal.SIGKILL)
    def replaced():
        now = listeners(supervisor, port)
        return now if len(now) == 2 and victim not in now else None

    now = wait_for(replaced, "the killed API process to be replaced")
    assert now - old and answers_healthz(url)


def test_sigterm_stops_every_process(service):
    supervisor, proc = service["supervisor"], service["proc"]
    family = supervisor.children(recursive=True)
    assert len(family) >= 3  # two API processes and a dask worker (and its helpers)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=PATIENCE_S) == 0
    gone, alive = psutil.wait_procs(family, timeout=PATIENCE_S)
    assert not alive, [p.cmdline() for p in alive]


# A process that starts `stop_with_parent` and sleeps: its SIGTERM is the watch's only way out.
WATCHED = """
import sys, time
from service.processes import stop_with_parent
stop_with_parent(int(sys.argv[1]), interval_s=0.05)
print("watching", flush=True)
time.sleep(3600)
"""
# A middle process (the supervisor's stand-in) that starts WATCHED with its own pid and waits.
MIDDLE = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())], stdout=subprocess.PIPE, text=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
child.wait()
"""
# Both import this checkout's service, whatever the working folder (as tests/service/test_readme.py's do).
WATCH_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def test_stop_with_parent_sends_sigterm_once_the_parent_is_gone():
    """The watch of `service.processes.stop_with_parent` on its own (the slow test below runs it in a
    real service): a parent killed with SIGKILL, the child stops by its own SIGTERM (within a second on a
    quiet machine; the bound is generous, the child would sleep an hour); a child whose parent was already
    gone when it started stops at once."""
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, WATCHED], stdout=subprocess.PIPE, text=True,
                              env=WATCH_ENV)
    pid, state = middle.stdout.readline().split()
    assert state == "watching"
    child = psutil.Process(int(pid))
    middle.kill()
    middle.wait()
    child.wait(timeout=PATIENCE_S)  # not our child: no status to read, but it sleeps an hour unless signalled
    assert not child.is_running()
    late = subprocess.run([sys.executable, "-c", WATCHED, str(os.getpid() + 10**6)], capture_output=True, text=True,
                          timeout=PATIENCE_S, env=WATCH_ENV)
    assert late.returncode == -signal.SIGTERM, late.stderr[-2000:]


@pytest.mark.slow
def test_a_supervisor_killed_outright_takes_its_api_processes(tmp_path):
    port = free_port()
    env = {**os.environ, "KPCA_N_WORKERS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port),
                             "--data-dir", str(tmp_path / "data"), "--api-processes", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        supervisor = psutil.Process(proc.pid)
        wait_for(lambda: answers_healthz(f"http://127.0.0.1:{port}"), "the service to start")
        api = wait_for(lambda: len(listeners(supervisor, port)) == 2, "two API processes to start") and \
            listeners(supervisor, port)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        gone, alive = psutil.wait_procs([psutil.Process(pid) for pid in api], timeout=PATIENCE_S)
        assert not alive  # before: they went on serving on the socket, without the cluster
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

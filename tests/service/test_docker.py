"""The Dockerfile and docker-compose.yml, read as data (no docker engine here), and their health-check
commands run for real: against this module's server and a real ``dask scheduler`` process.

Defends against: an image with no port, health check, command or non-root user; a numba cache in /tmp
(every container compiling from scratch) or one not filled at build time; compose services that start
before what they need is healthy, or stay down after a crash; an image built from pyproject.toml's ranges
(whatever was newest that day) instead of uv.lock's versions, those tested (issue 54); workers and API that
share a volume, or see different object stores, where they should share nothing but the store (issue 57).
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in (REPO / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            keyword, _, rest = current.partition(" ")
            lines.append((keyword.upper(), rest.strip()))
            current = ""
    return lines


def index_of(keyword: str, contains: str = "") -> int:
    found = [i for i, (k, rest) in enumerate(instructions()) if k == keyword and contains in rest]
    assert found, f"no {keyword} {contains}"
    return found[0]


def exec_form(text: str) -> list[str]:
    return json.loads(text[text.index("["):])


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_the_image_exposes_serves_and_checks_as_a_non_root_user():
    steps = instructions()
    assert ("EXPOSE", "8000") in steps
    user = steps[index_of("USER")][1]
    assert user not in ("root", "0")
    cmd = exec_form(steps[index_of("CMD")][1])
    assert cmd[:3] == ["python", "-m", "service"] and cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert index_of("USER") < index_of("CMD")
    health = steps[index_of("HEALTHCHECK")][1]
    assert "/healthz" in health and exec_form(health)[0] == "python"  # the slim image has no curl
    assert any(k == "COPY" and rest.split()[0] == "client" for k, rest in steps)


def test_the_numba_cache_is_outside_tmp_owned_by_the_user_and_filled_at_build_time():
    steps = instructions()
    env = steps[index_of("ENV", "NUMBA_CACHE_DIR")][1]
    cache = dict(item.split("=", 1) for item in shlex.split(env))["NUMBA_CACHE_DIR"]
    assert not cache.startswith("/tmp")
    owned = index_of("RUN", "chown")
    assert cache in steps[owned][1] and "/data" in steps[owned][1]
    warm = index_of("RUN", "kpca.warmup")
    # compiled by the user that runs the service, into the cache it reads
    assert index_of("USER") < warm and index_of("ENV", "NUMBA_CACHE_DIR") < warm
    assert steps[warm][1] == "python -m kpca.warmup"


def test_the_image_installs_the_locked_versions_then_the_project_without_resolving_again(tmp_path):
    """The dependencies come from uv.lock (exported by the Dockerfile's own ``uv export`` command, run here
    on the repository's lock: every requirement pinned to its locked version, with hashes, none of the test
    extra), installed with their hashes required; the project then with ``--no-deps``, so that nothing
    is resolved from pyproject.toml's ranges."""
    steps = instructions()
    export_step = index_of("RUN", "uv export")
    assert index_of("COPY", "uv.lock") < export_step < index_of("RUN", "--no-deps .")
    commands = [part.strip() for part in steps[export_step][1].split("&&")]
    export = shlex.split(next(c for c in commands if c.startswith("uv export")))
    assert "--frozen" in export and "--no-dev" in export and "--no-emit-project" in export
    assert "--no-hashes" not in export
    output = export[export.index("-o") + 1]
    assert any(c.startswith("pip install") and "--require-hashes" in c and f"-r {output}" in c for c in commands)
    assert steps[index_of("RUN", "--no-deps .")][1].startswith("pip install --no-cache-dir --no-deps . ")

    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is not installed here (make install fell back to pip)")
    for name in ("pyproject.toml", "uv.lock"):
        (tmp_path / name).write_bytes((REPO / name).read_bytes())
    subprocess.run([str(uv), *export[1:]], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    text = (tmp_path / output).read_text()
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    locked = {(package["name"], package["version"]) for package in lock["package"]}
    pinned = [Requirement(line.split(" \\")[0]) for line in text.splitlines() if line[:1].isalnum()]
    assert pinned and all(str(r.specifier).startswith("==") for r in pinned)
    assert {(r.name, str(r.specifier)[2:]) for r in pinned} <= locked
    names = {r.name for r in pinned}
    assert {"fastapi", "uvicorn", "numba", "dask"} <= names and not {"pytest", "mypy", "kpca-stream"} & names
    assert text.count("--hash=sha256:") >= len(pinned)


LONG_RUNNING = {"minio", "scheduler", "worker", "api"}
BUCKET_SETUP = {"condition": "service_completed_successfully"}


def test_compose_restarts_everything_and_waits_for_health(compose):
    """Every long-running service restarts unless stopped and has a health check its dependents wait for;
    the bucket's setup runs once (a restart policy would run it again and again) once MinIO is healthy, and
    what reads or writes the bucket starts only after it completed."""
    services = compose["services"]
    assert set(services) == LONG_RUNNING | {"minio-setup"}
    for name in LONG_RUNNING:
        assert services[name].get("restart") == "unless-stopped", name
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    assert services["minio-setup"].get("restart", "no") == "no" and "healthcheck" not in services["minio-setup"]
    assert services["minio-setup"]["depends_on"] == {"minio": {"condition": "service_healthy"}}
    assert services["worker"]["depends_on"] == {"scheduler": {"condition": "service_healthy"},
                                                "minio-setup": BUCKET_SETUP}
    assert services["api"]["depends_on"] == {"scheduler": {"condition": "service_healthy"},
                                             "worker": {"condition": "service_healthy"},
                                             "minio-setup": BUCKET_SETUP}
    assert "KPCA_API_KEYS" in services["api"]["environment"]  # the image's 0.0.0.0 needs keys


def _aws(service: dict) -> dict:
    return {k: v for k, v in service.get("environment", {}).items() if k.startswith("AWS_")}


def test_workers_and_api_share_nothing_but_the_object_store(compose):
    """Issue 57: the workers and the API share no volume; the API keeps its data in the bucket
    (``--data-dir s3://kpca/...``) and passes that to the fit tasks, so the workers get no KPCA_DATA_DIR,
    only the same AWS_* settings as the API (another endpoint or key and a worker would read another store,
    or none). The endpoint is MinIO's, plain http, which obstore refuses unless AWS_ALLOW_HTTP is true;
    the keys are MinIO's root user's, and the bucket made is the one the API names."""
    services = compose["services"]
    for name in ("scheduler", "worker", "api"):
        assert "volumes" not in services[name], name
    assert set(compose["volumes"]) == {"minio-data"}
    assert services["minio"]["volumes"] == ["minio-data:/data"]

    command = shlex.split(services["api"]["command"])
    data_dir = command[command.index("--data-dir") + 1]
    assert re.fullmatch(r"s3://kpca/[\w/-]+", data_dir), data_dir
    assert "KPCA_DATA_DIR" not in services["worker"]["environment"]

    aws = _aws(services["api"])
    assert aws == _aws(services["worker"])
    assert set(aws) == {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                        "AWS_ALLOW_HTTP"}
    assert aws["AWS_ENDPOINT_URL"] == "http://minio:9000" and aws["AWS_ALLOW_HTTP"] == "true"
    minio = services["minio"]["environment"]
    assert (aws["AWS_ACCESS_KEY_ID"], aws["AWS_SECRET_ACCESS_KEY"]) == (minio["MINIO_ROOT_USER"],
                                                                         minio["MINIO_ROOT_PASSWORD"])
    assert _aws(services["scheduler"]) == {}  # the scheduler never touches the store

    setup = " ".join(services["minio-setup"]["command"])
    assert "mc mb --ignore-existing local/kpca" in setup and "http://minio:9000" in setup
    # $$ reaches the container as $: its shell reads the credentials from its own environment
    assert "$$MINIO_ROOT_USER" in setup and "$$MINIO_ROOT_PASSWORD" in setup
    assert services["minio-setup"]["environment"] == minio


def test_the_minio_images_are_pinned_and_checked_without_curl(compose):
    """MinIO's images are pinned to a release (the upstream repositories are archived: a floating tag can
    only move sideways) on quay.io, where they are still published; the server's health check runs the
    image's own ``mc ready`` (recent images dropped curl for a minimal base image)."""
    services = compose["services"]
    for name, image in (("minio", "quay.io/minio/minio"), ("minio-setup", "quay.io/minio/mc")):
        repository, _, tag = services[name]["image"].partition(":")
        assert repository == image and tag.startswith("RELEASE."), services[name]["image"]
    assert services["minio"]["healthcheck"]["test"] == ["CMD", "mc", "ready", "local"]
    assert services["minio"]["command"].split()[:2] == ["server", "/data"]


def _run_check(command: list[str], port_from: int, port_to: int) -> int:
    """A health-check command with its port replaced (the test servers use free ports)."""
    command = [part.replace(f"127.0.0.1:{port_from}", f"127.0.0.1:{port_to}") for part in command]
    assert command[0] == "python"
    return subprocess.run([sys.executable, *command[1:]], capture_output=True, timeout=30).returncode


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_compose_config_and_build_need_no_variable_set():
    """Issue 29, stumble 9: ``${KPCA_API_KEYS:?...}`` made even ``docker compose config`` and ``build`` fail
    unless the keys were set. Every variable the file interpolates has a default (``${X:-...}``), none
    is required (``${X:?...}``, ``${X?...}``) or bare (``$X``, ``${X}``: a warning and an empty value)."""
    text = (REPO / "docker-compose.yml").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    references = re.findall(r"\$(\{[^}]*\}|[A-Za-z_]\w*)", code.replace("$$", ""))
    assert references, "no interpolation found"
    for reference in references:
        assert re.fullmatch(r"\{[A-Za-z_]\w*:?-[^}]*\}", reference), f"${reference} has no default"


def test_the_api_health_checks_pass_against_a_running_service(server, compose):
    port = int(server.rsplit(":", 1)[1])
    image_check = exec_form(instructions()[index_of("HEALTHCHECK")][1])
    assert _run_check(image_check, 8000, port) == 0
    assert _run_check(compose["services"]["api"]["healthcheck"]["test"][1:], 8000, port) == 0
    assert _run_check(image_check, 8000, _free_port()) != 0  # nothing listening: unhealthy


def test_the_scheduler_and_worker_health_checks_pass_against_real_dask_processes(compose):
    scheduler_port, dashboard, worker_dashboard = _free_port(), _free_port(), _free_port()
    dask = str(Path(sys.executable).with_name("dask"))
    processes = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(scheduler_port),
                                   "--dashboard-address", f"127.0.0.1:{dashboard}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        processes.append(subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{scheduler_port}", "--nthreads", "1",
                                           "--dashboard-address", f"127.0.0.1:{worker_dashboard}"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        checks = {"scheduler": (8787, dashboard), "worker": (8789, worker_dashboard)}
        for name, (port_from, port_to) in checks.items():
            command = compose["services"][name]["healthcheck"]["test"][1:]
            assert f"--dashboard-address :{port_from}" in compose["services"][name]["command"]
            deadline = time.monotonic() + 60
            while _run_check(command, port_from, port_to) != 0:
                assert time.monotonic() < deadline, f"{name} never became healthy"
                time.sleep(0.5)
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)

"""The ``kpca`` command line through a real server: upload -> fit -> watch -> project, and the exit status
of each kind of failure (`client.cli.EPILOG`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

from client.api import ApiError, Client, ConnectionFailed
from client.cli import cli
from tests.api_checks import upload_rows, wait_for_fit, wait_for_pass
from tests.e2e.service_process import free_port
from tests.waiting import PATIENCE_S, answers_healthz, wait_until


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """A .npy file of 120 rows x 5 features and its array."""
    array = np.random.default_rng(20240531).normal(size=(120, 5))
    path = tmp_path_factory.mktemp("cli") / "rows.npy"
    np.save(path, array)
    return path, array


def test_upload_fit_watch_project(kpca, rows, tmp_path):
    path, array = rows
    uploaded = kpca("--json", "upload", "points", str(path), "--chunk-rows", "50")
    assert uploaded.exit_code == 0, uploaded.output
    meta = json.loads(uploaded.stdout)
    assert (meta["n_rows"], meta["n_features"], meta["status"]) == (120, 5, "ready")

    started = kpca("fit", "m", "--dataset", "points", "--sigma", "3", "--components", "3", "--passes", "3",
                   "--param", "seed=0", "--param", "init=random")  # the paper's passes: all 3 run
    assert started.exit_code == 0, started.output
    watched = kpca("watch", "m")
    assert watched.exit_code == 0, watched.output
    assert "pass 3/3" in watched.stderr and watched.stdout.strip() == "m: completed"

    events = kpca("--json", "watch", "m")  # a finished fit replays its history, one JSON line per event
    lines = [json.loads(line) for line in events.stdout.splitlines()]
    assert events.exit_code == 0 and [e["pass"] for e in lines if e["event"] == "progress"] == [1, 2, 3]
    assert lines[-1] == {"event": "end", "status": "completed"}

    out = tmp_path / "components.npy"
    projected = kpca("project", "m", str(path), "-o", str(out))
    assert projected.exit_code == 0, projected.output
    assert np.load(out).shape == (120, 3)

    listed = kpca("--json", "ls", "models")
    assert [m["name"] for m in json.loads(listed.stdout)] == ["m"]
    header, row = kpca("ls", "datasets").stdout.splitlines()[:2]  # a header row, then the sets (issue 58)
    assert header.split() == ["NAME", "STATUS", "ROWS", "FEATURES", "VERSION"] and row.split()[:4] == [
        "points", "ready", "120", "5"]
    header, row = kpca("ls", "models").stdout.splitlines()[:2]
    assert header.split() == ["NAME", "STATUS", "DATASET", "SOLVER", "PASSES"] and row.split()[:3] == [
        "m", "completed", "points"]
    again = kpca("upload", "points", str(path))  # the same rows: said, and nothing sent
    assert again.exit_code == 0 and "unchanged" in again.stdout, again.output


def test_fit_wait_and_rm(kpca, rows):
    path, _ = rows
    assert kpca("upload", "waited", str(path)).exit_code == 0
    result = kpca("fit", "w", "--dataset", "waited", "--sigma", "3", "--components", "2", "--passes", "2",
                  "--wait")
    assert result.exit_code == 0, result.output
    assert "w: completed" in result.stdout
    assert kpca("rm", "model", "w").exit_code == 0
    assert kpca("rm", "datasets", "waited").exit_code == 0
    assert "waited" not in kpca("ls", "datasets").stdout


def test_denoise_rows_and_an_image(kpca, api, rng, tmp_path):
    from PIL import Image

    upload_rows(api, "patches", rng.uniform(0, 255, size=(150, 16)))  # 4x4 grey patches
    assert kpca("fit", "p", "--dataset", "patches", "--sigma", "300", "--components", "2", "--passes", "2",
                "--wait").exit_code == 0
    noisy = tmp_path / "noisy.npy"
    np.save(noisy, rng.uniform(0, 255, size=(3, 16)))
    cleaned = tmp_path / "clean.npy"
    result = kpca("denoise", "p", str(noisy), "-o", str(cleaned))
    assert result.exit_code == 0, result.output
    assert np.load(cleaned).shape == (3, 16)

    image, out = tmp_path / "in.png", tmp_path / "out.png"
    Image.fromarray(rng.integers(0, 256, size=(12, 12), dtype=np.uint8)).save(image)
    result = kpca("denoise-image", "p", str(image), "-o", str(out), "--patch", "4", "--stride", "2")
    assert result.exit_code == 0, result.output
    assert Image.open(out).size == (12, 12)
    assert "components" in result.output and "noise" in result.output  # what the tuning chose
    result = kpca("denoise-image", "p", str(image), "-o", str(out), "--tune", "off", "--n-components", "1")
    assert result.exit_code == 0, result.output
    assert "1 components" in result.output and "no second stage" in result.output  # tune off: off unless asked for
    assert "None" not in result.output and "second_stage" not in result.output  # words, not Python values (issue 58)
    result = kpca("denoise-image", "p", str(image), "-o", str(out), "--tune", "off", "--second-stage", "wiener")
    assert result.exit_code == 0 and "second stage wiener" in result.output, result.output
    side_by_side = tmp_path / "compare.png"
    result = kpca("denoise-image", "p", str(image), "-o", str(side_by_side), "--compare")
    assert result.exit_code == 0, result.output
    assert Image.open(side_by_side).size[0] > 2 * 12  # the input and the answer, each enlarged
    too_far = kpca("denoise-image", "p", str(image), "-o", str(out), "--stride", "5")
    assert too_far.exit_code == 1 and "[field: stride]" in too_far.stderr
    assert kpca("denoise-image", "p", str(image), "-o", str(out), "--patch", "5").exit_code == 2


def test_upload_image_makes_a_data_set_of_its_patches(kpca, rng, tmp_path):
    from PIL import Image

    image = tmp_path / "small.png"
    Image.fromarray(rng.integers(0, 256, size=(14, 10), dtype=np.uint8)).save(image)
    result = kpca("--json", "upload-image", "small-patches", str(image), "--patch", "4", "--stride", "3")
    assert result.exit_code == 0, result.output
    meta = json.loads(result.stdout)
    # starts 0, 3, 6, 9 and the edge 10 down, 0, 3, 6 across (the last patch touches the edge)
    assert (meta["n_rows"], meta["n_features"], meta["status"]) == (5 * 3, 16, "ready")
    again = kpca("upload-image", "small-patches", str(image), "--patch", "4")
    assert again.exit_code == 1 and "[field: name]" in again.stderr
    assert kpca("upload-image", "x", str(image), "--patch", "1").exit_code == 2


def test_unknown_model_is_1_with_the_servers_message(kpca, rows):
    result = kpca("project", "nobody", str(rows[0]))
    assert result.exit_code == 1
    assert "nobody" in result.stderr and "HTTP 404 not_found" in result.stderr
    as_json = kpca("--json", "watch", "nobody")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["error"]["status"] == 404


def test_a_refused_field_is_named(kpca):
    result = kpca("fit", "bad", "--dataset", "missing", "--sigma", "3", "--components", "2")
    assert result.exit_code == 1 and "[field: dataset]" in result.stderr


def test_bad_option_is_2(kpca):
    assert kpca("fit", "m", "--components", "zero").exit_code == 2
    assert kpca("--bogus").exit_code == 2
    assert kpca("rm", "widgets", "x").exit_code == 2


def test_unreachable_url_is_3(rows):
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "ls"])
    assert result.exit_code == 3 and "cannot reach" in result.stderr
    with pytest.raises(ConnectionFailed):
        Client("http://127.0.0.1:9").ls("models")


def test_watch_of_a_cancelled_fit_is_4(kpca, api, rng):
    upload_rows(api, "slow-set", rng.normal(size=(400, 8)))
    api.post("/v1/models", json={"name": "stopped", "dataset": "slow-set", "n_components": 4,
                                 "kernel": {"type": "gaussian", "sigma": 3.0},
                                 "params": {"passes": 400, "block_size": 25, "seed": 0, "init": "random"}}
             ).raise_for_status()
    wait_for_pass(api, "stopped", 1)
    api.post("/v1/models/stopped/cancel", json={}).raise_for_status()
    assert wait_for_fit(api, "stopped")["status"] == "cancelled"
    result = kpca("watch", "stopped")
    assert result.exit_code == 4 and "stopped: cancelled" in result.stdout


def test_client_errors_are_typed(server):
    with Client(server) as client:
        with pytest.raises(ApiError) as refused:
            client.model("nobody")
    assert (refused.value.status, refused.value.code, refused.value.field) == (404, "not_found", "name")
    assert "nobody" in refused.value.message


def test_ls_follows_every_page(server, api, rng):
    for name in ("paged-a", "paged-b", "paged-c"):
        upload_rows(api, name, rng.normal(size=(4, 2)))
    with Client(server) as client:
        names = [item["name"] for item in client.ls("datasets", page_size=1)]
    assert {"paged-a", "paged-b", "paged-c"} <= set(names) and names == sorted(names)


def test_the_installed_entry_point_runs():
    result = subprocess.run([sys.executable, "-m", "client", "--help"], capture_output=True, text=True,
                            timeout=PATIENCE_S)
    assert result.returncode == 0, result.stderr
    assert "Exit status" in result.stdout and "watch" in result.stdout and "--api-key" in result.stdout


def test_serve_passes_its_options_to_the_service(tmp_path):
    """``kpca serve --host 0.0.0.0`` without API keys is the service's own refusal (exit 2), before it starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KPCA_")}
    result = subprocess.run([sys.executable, "-m", "client", "serve", "--host", "0.0.0.0", "--data-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=PATIENCE_S, env=env)
    assert result.returncode == 2 and "refusing to listen on 0.0.0.0" in result.stderr


def test_serve_runs_the_service_as_its_own_process():
    """``kpca serve --help`` lists the flags of ``python -m service``, read by a child process: the client's
    own process loads none of the server's packages."""
    code = ("import sys\nfrom client.cli import cli\ntry:\n    cli(['serve', '--help'], prog_name='kpca')\n"
            "except SystemExit as exc:\n    status = exc.code\n"
            "print('STATUS', status, 'LOADED', sorted(m for m in sys.modules if m.split('.')[0] in "
            "('service', 'workers', 'store', 'kpca')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PATIENCE_S)
    assert "Usage: kpca serve" in result.stdout and "--data-dir" in result.stdout, result.stderr
    assert result.stdout.rstrip().endswith("STATUS 0 LOADED []"), result.stdout[-500:]


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_serve_stops_with_the_service_and_passes_its_status(tmp_path, stop):
    """``kpca serve`` running a real service: Ctrl-C (SIGINT to the terminal's whole process group) or a
    SIGTERM to the CLI alone shuts the service down gracefully (once: each API process's lifespan completes), the CLI
    waits for it and exits with its status, and the service is gone. After SIGTERM uvicorn ends by
    raising the signal again, which a shell reports as 128 + 15 (older uvicorn exits 0)."""
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KPCA_")}, "KPCA_N_WORKERS": "1"}
    # its own session stands for the terminal's foreground process group
    cli_process = subprocess.Popen([sys.executable, "-m", "client", "serve", "--port", str(port), "--data-dir",
                                    str(tmp_path)], env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def up() -> bool:
            assert cli_process.poll() is None, cli_process.stderr.read().decode()
            return answers_healthz(f"http://127.0.0.1:{port}")

        wait_until(up, what="the service to answer /healthz", interval=0.2)
        if stop == "ctrl-c":  # with a fit running: the stop says it resumes, in words (issue 58, item 7)
            with Client(f"http://127.0.0.1:{port}") as client:
                client.upload("busy-set", np.random.default_rng(0).normal(size=(2000, 8)))
                client.fit("busy", "busy-set", {"type": "gaussian", "sigma": 3}, 4, "kha",
                           params={"passes": 10000, "tol": 0, "init": "random"})
                wait_until(lambda: ((client.model("busy").get("progress") or {}).get("pass") or 0) >= 1,
                           what="the fit's first pass", interval=0.2)
            os.killpg(cli_process.pid, signal.SIGINT)
        else:
            cli_process.send_signal(signal.SIGTERM)
        status, log = cli_process.wait(timeout=PATIENCE_S), cli_process.stderr.read().decode()
        assert status in ((0,) if stop == "ctrl-c" else (0, 128 + signal.SIGTERM)), log[-2000:]
        served_by = log.count("Started server process")  # its API processes (docs/scaling.md#api-processes)
        assert served_by >= 1 and log.count("Application shutdown complete") == served_by, log[-2000:]
        # issue 29's walkthrough: Ctrl-C reached the dask worker processes too, which died printing
        # KeyboardInterrupt tracebacks; they now stop when the service closes its cluster
        assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-3000:]
        if stop == "ctrl-c":  # dask's CancelledError and "still alive ... killing" are a stop's, said once, ours
            assert "stopping with 1 fit(s) running (model 'busy' (pass " in log, log[-3000:]
            assert "resumes from its last checkpoint when the service starts again" in log, log[-3000:]
            assert "CancelledError" not in log and "still alive" not in log, log[-3000:]
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
    finally:
        with contextlib.suppress(ProcessLookupError):  # anything left in its group: the service, dask workers
            os.killpg(cli_process.pid, signal.SIGKILL)
        cli_process.wait()


def test_upload_fit_project_export_import_project(kpca, server, digits, tmp_path):
    """The whole life of a model through the CLI: upload 300 digits, fit (3 components, 3 passes) and
    wait, project, export, import under another name and data set (through the installed entry point),
    project again: the same components to 1e-12."""
    rows, probe = tmp_path / "digits.npy", tmp_path / "probe.npy"
    np.save(rows, digits[:300])
    np.save(probe, digits[300:320])
    assert kpca("upload", "digits", str(rows), "--chunk-rows", "128").exit_code == 0
    fitted = kpca("fit", "dg", "--dataset", "digits", "--sigma", "3", "--components", "3", "--passes", "3",
                  "--param", "seed=0", "--wait")
    assert fitted.exit_code == 0 and "dg: completed" in fitted.stdout, fitted.output
    before = tmp_path / "before.npy"
    assert kpca("project", "dg", str(probe), "-o", str(before)).exit_code == 0

    archive = tmp_path / "dg.tar"
    exported = kpca("--json", "export", "dg", "-o", str(archive))
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.stdout)["bytes"] == archive.stat().st_size > 300 * 64 * 4  # the rows travel

    imported = subprocess.run([sys.executable, "-m", "client", "--url", server, "--json", "import", str(archive),
                               "--name", "dg-copy", "--dataset", "digits-copy"],
                              capture_output=True, text=True, timeout=PATIENCE_S)
    assert imported.returncode == 0, imported.stderr
    record = json.loads(imported.stdout)
    assert (record["name"], record["status"], record["dataset"]) == ("dg-copy", "completed", "digits-copy")
    after = tmp_path / "after.npy"
    assert kpca("project", "dg-copy", str(probe), "-o", str(after)).exit_code == 0
    np.testing.assert_allclose(np.load(after), np.load(before), rtol=0, atol=1e-12)

    same_rows = kpca("--json", "import", str(archive), "--name", "dg-again")  # reuses data set "digits"
    assert same_rows.exit_code == 0 and json.loads(same_rows.stdout)["dataset"] == "digits", same_rows.output
    assert kpca("rm", "model", "dg-again").exit_code == 0


def test_export_and_import_failures_have_their_exit_status(kpca, api, rng, tmp_path, data_dir):
    archive = tmp_path / "m.tar"
    unknown = kpca("export", "nobody", "-o", str(archive))
    assert unknown.exit_code == 1 and "HTTP 404" in unknown.stderr and not archive.exists()

    upload_rows(api, "unfinished-set", rng.normal(size=(300, 4)))
    api.post("/v1/models", json={"name": "unfinished", "dataset": "unfinished-set", "n_components": 2,
                                 "kernel": {"type": "gaussian", "sigma": 2.0},
                                 "params": {"passes": 400, "block_size": 25, "seed": 0, "init": "random"}}
             ).raise_for_status()
    running = kpca("--json", "export", "unfinished", "-o", str(archive))
    assert running.exit_code == 1 and json.loads(running.stdout)["error"]["status"] == 409
    assert "completed" in running.stderr and "[field: name]" in running.stderr and not archive.exists()
    api.post("/v1/models/unfinished/cancel", json={}).raise_for_status()
    wait_for_fit(api, "unfinished")

    upload_rows(api, "small", rng.normal(size=(60, 4)))
    assert kpca("fit", "small-m", "--dataset", "small", "--sigma", "2", "--components", "2", "--passes", "1",
                "--wait").exit_code == 0
    assert kpca("export", "small-m", "-o", str(archive)).exit_code == 0
    clash = kpca("import", str(archive))
    assert clash.exit_code == 1 and "HTTP 409" in clash.stderr and "[field: name]" in clash.stderr
    corrupt = tmp_path / "corrupt.tar"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the rows or the checkpoint
    corrupt.write_bytes(bytes(data))
    damaged = kpca("import", str(corrupt), "--name", "small-copy")
    assert damaged.exit_code == 1 and "HTTP 422" in damaged.stderr and "[field: body]" in damaged.stderr
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(archive.read_bytes()[:5000])
    assert kpca("import", str(truncated), "--name", "small-copy").exit_code == 1
    assert api.get("/v1/models/small-copy").status_code == 404
    assert not [p for p in (data_dir / ".imports").rglob("*") if p.is_file()]  # nothing left behind
    wrong_type = api.post("/v1/models/import", content=archive.read_bytes(), headers={"Content-Type": "application/gzip"})
    assert wrong_type.status_code == 415 and wrong_type.json()["error"]["field"] == "content-type"
    as_bytes = api.post("/v1/models/import", content=archive.read_bytes(),  # a tar as generated clients send it
                        headers={"Content-Type": "application/octet-stream"})
    assert as_bytes.status_code == 409 and as_bytes.json()["error"]["field"] == "name"  # read: its name is taken

    assert kpca("import", str(tmp_path / "missing.tar")).exit_code == 2
    assert kpca("export", "small-m").exit_code == 2  # -o is required
    assert kpca("import", str(archive), "--bogus").exit_code == 2
    offline = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "import", str(archive)])
    assert offline.exit_code == 3 and "cannot reach" in offline.stderr
    offline = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "export", "small-m", "-o", str(archive)])
    assert offline.exit_code == 3


@pytest.mark.parametrize("progress, status, shown", [
    ({"pass": 3, "passes": 20}, "running", "3/20"), ({"pass": 20, "passes": 20}, "completed", "20/20"),
    ({"pass": 0, "passes": 20}, "completed", "0, exact start"), ({"pass": 7, "passes": 20}, "completed", "7, converged"),
    ({"pass": 4, "passes": 20}, "cancelled", "4/20"), ({}, "queued", ""),
])
def test_ls_says_why_a_completed_fit_ran_fewer_passes(progress, status, shown):
    """`kpca ls` reads as the dashboard (issue 58, item 4): a completed fit is not "0/20"."""
    from client.cli_data import _passes

    assert _passes(progress, status) == shown

"""The README's and docs/api.md's commands, run as pasted against a real server (``KPCA_URL`` set to it,
``.venv/bin`` standing for this interpreter's folder, the repository's code first on the path): the
five minutes to a denoised picture, the command-line session, the Python session, the curl sessions.

Defends against: a README whose commands no longer work as written (a flag renamed, a step that waits
for nothing, a port written in), which is what a new user meets first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed on this machine")


def block(document: str, after: str, language: str = "") -> str:
    """The fenced block that follows the line ``after`` in ``document`` (a path under the repository)."""
    text = (ROOT / document).read_text()
    found = re.search(re.escape(after) + r"\n\n```" + language + r"\n(.*?)```", text, re.S)
    assert found, f"{document}: no block after {after!r}"
    return found.group(1)


def run(script: str, server: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``script`` in bash (``set -e``) with the service at ``server``, this interpreter's scripts as
    ``.venv/bin`` and the repository's packages first on the path."""
    script = re.sub(r"(?<![\w/])\.venv/bin/", f"{BIN}/", script)
    script = re.sub(r"(?<![\w/])examples/", f"{ROOT}/examples/", script).replace("http://127.0.0.1:8000", server)
    env = {**os.environ, "KPCA_URL": server, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", "set -e\n" + script], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env)


@pytest.mark.slow  # among the longest cases; the route and the CLI it calls have their own tests (test_api_denoise, test_cli)
def test_the_first_five_minutes_denoise_the_photograph(server, tmp_path):
    """The denoised photograph is at least 4 dB better than the noisy one."""
    done = run(block("README.md", "In a second terminal, in the same folder:"), server, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    snr = dict(re.findall(r"^(noisy|denoised) .*SNR (-?[0-9.]+) dB$", done.stdout, re.M))
    assert float(snr["denoised"]) > float(snr["noisy"]) + 4, done.stdout
    assert {"camera-noisy.png", "camera-denoised.png", "camera-compare.png"} <= {p.name for p in tmp_path.iterdir()}


@pytest.mark.slow
def test_the_command_line_session(server, tmp_path):
    done = run(block("README.md", "A session on scikit-learn's digits:"), server, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "digits: 1797 rows x 64 features, version 1, ready" in out, out
    assert re.search(r"^history \(one line per pass\):$", out, re.M) and "wrote components.npy (1797, 16)" in out
    assert "stopped early    yes (params.tol met)" in out, out  # the default fit stops once it has converged
    assert re.search(r"^slow: cancelled after pass \d+ of 500$", out, re.M) and "slow: completed" in out, out
    assert "digits-10: 1797 labels in 10 clusters" in out and "digits-copy: completed" in out, out
    assert out.rstrip().endswith("deleted data set digits and what used it"), out[-500:]


def test_the_python_session(server, tmp_path):
    script = tmp_path / "session.py"
    script.write_text(block("README.md", "## From Python", "python"))
    done = run(f"{sys.executable} {script}", server, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["completed", "(5,", "16)", "(5,", "16)"], done.stdout


@needs_curl
def test_the_curl_session(server, tmp_path):
    done = run(block("docs/api.md", "The same with curl:"), server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"error":{' not in done.stdout, done.stdout  # no step answered with an error body
    last = done.stdout[done.stdout.rindex('{"components"'):]  # curl prints no newlines: the projection ends it
    assert np.asarray(json.loads(last)["components"]).shape == (1, 2), last


@needs_curl
def test_the_clustering_session_shows_a_completed_clustering(server, tmp_path):
    """Issue 29, stumble 4: the docs' GET showed ``"status": "completed"`` where the first call says
    ``queued``; the session now waits for the end before it reads the labels."""
    script = block("docs/api.md", "| `POST /v1/clusterings/{name}/predict` | `{\"rows\": [[...]]}` → `{\"labels\": [...]}`, "
                   "the Nystrom extension of the eigenvectors |")
    done = run(script, server, tmp_path)
    assert done.returncode == 0, done.stderr
    answers = json_answers(done.stdout)
    record = [a for a in answers if a.get("name") == "pts-2"][-1]  # the GET after the POST
    assert (record["status"], record["variation_of_information"], record["labels_total"]) == ("completed", 0.0, 6)
    assert sorted(answers[-1]["labels"]) == [0, 1], answers[-1]


def json_answers(text: str) -> list[dict]:
    """The JSON bodies curl printed one after the other (no newline between them)."""
    decoder, answers, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        answer, at = decoder.raw_decode(text, at)
        answers.append(answer)
    return answers

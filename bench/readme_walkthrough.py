"""The README's "Five minutes to a denoised picture", run as written, and what it prints.

The service is started as ``make run`` starts it (the Makefile's ``run`` recipe, checked here:
``python -m service --host 127.0.0.1 --port P --data-dir D``), on a free loopback port with a temporary
data folder, in a process of its own that is stopped at the end, on an error too. The second terminal's
commands are read from README.md's code block and run one by one, each by ``bash -c`` in a temporary
folder that holds ``.venv`` (this interpreter's environment) and ``examples`` (this checkout's), with
``KPCA_URL`` the service's address (the README's ``export KPCA_URL=...`` line says to set it to
``make run``'s address: that is the one step not run verbatim) and this checkout first on
``PYTHONPATH``. Records every step's command, seconds, exit status and output, and the noisy and
denoised SNR that ``examples/noisy_camera.py`` prints, and writes bench/results/readme_walkthrough.json.

    python bench/readme_walkthrough.py [--step-timeout 900]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

from bench._common import ROOT, save  # noqa: E402

SECTION = "## Five minutes to a denoised picture"
RUN_RECIPE = "$(BIN)/python -m service --host 127.0.0.1 --port $(KPCA_PORT) --data-dir $(KPCA_DATA_DIR)"
SNR_LINE = re.compile(r"^(noisy|denoised)\s+\S+: SNR (-?[\d.]+|inf) dB$", re.MULTILINE)
URL_EXPORT = re.compile(r"^export KPCA_URL=\S+")


def code_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block of ``text``, in order."""
    return [block.strip("\n").splitlines() for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)]


def walkthrough(readme: str) -> tuple[list[str], list[str]]:
    """The walkthrough's two code blocks in ``readme`` (the first terminal's, the second's), their
    non-blank lines as written."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    blocks = code_blocks(readme[start:end if end >= 0 else None])
    if len(blocks) < 2:
        raise ValueError(f"README.md: {SECTION!r} has {len(blocks)} code blocks, not 2")
    first, second = ([line for line in block if line.strip()] for block in blocks[:2])
    return first, second


def run_recipe(makefile: str) -> str:
    """The command of the Makefile's ``run`` target (its first recipe line, stripped)."""
    lines = makefile.splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(r"^run\s*:", line))
    return lines[at + 1].strip()


def printed_snrs(output: str) -> dict:
    """The SNR values (dB, as printed) ``examples/noisy_camera.py FILE`` wrote, by name."""
    return {name: float(value) for name, value in SNR_LINE.findall(output)}


def workspace(folder: Path) -> None:
    """Make ``folder`` look like the clone to the README's commands: ``.venv`` is this interpreter's
    environment, ``examples`` this checkout's."""
    (folder / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (folder / "examples").symlink_to(ROOT / "examples", target_is_directory=True)


def run_step(line: str, folder: Path, env: dict, timeout: float) -> dict:
    """Run one README line with ``bash -c`` in ``folder``; its seconds, exit status and output's tail."""
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)
    seconds = time.perf_counter() - started
    return {"command": line, "seconds": seconds, "returncode": done.returncode,
            "stdout": done.stdout[-4000:], "stderr": done.stderr[-2000:]}


def stop_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that the service is stopped by the context's exit then too."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def main() -> None:
    """Start the service, run the README's second terminal line by line, save what each did."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-timeout", type=float, default=900.0, help="seconds one README line may take")
    args = ap.parse_args()
    stop_on_sigterm()
    recipe = run_recipe((ROOT / "Makefile").read_text())
    if recipe != RUN_RECIPE:
        raise SystemExit(f"the Makefile's run target changed ({recipe!r}): update this bench to start it so")
    first, second = walkthrough((ROOT / "README.md").read_text())
    if [line.split()[:2] for line in first] != [["make", "run"]]:
        raise SystemExit(f"the README's first terminal runs {first!r}, not make run: update this bench")

    from bench._service import service_process

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]  # the service's processes import this checkout too
    started = time.perf_counter()
    steps = []
    with service_process(cwd=str(ROOT)) as url, tempfile.TemporaryDirectory(prefix="readme-walkthrough-") as tmp:
        service_start = time.perf_counter() - started
        env["KPCA_URL"] = url
        folder = Path(tmp)
        workspace(folder)
        for line in second:
            if URL_EXPORT.match(line):
                steps.append({"command": line, "ran": f"KPCA_URL={url} (the service's address)", "seconds": 0.0,
                              "returncode": 0, "stdout": "", "stderr": ""})
                continue
            step = run_step(line, folder, env, args.step_timeout)
            steps.append(step)
            print(f"{step['seconds']:7.1f} s  rc {step['returncode']}  {line}", flush=True)
            if step["returncode"] != 0:
                raise SystemExit(f"README step failed ({step['returncode']}): {line}\n{step['stdout']}{step['stderr']}")
    scored = [s for s in steps if "noisy_camera.py" in s["command"] and printed_snrs(s["stdout"])]
    if not scored:
        raise SystemExit("examples/noisy_camera.py printed no SNR: the README's walkthrough changed")
    save("readme_walkthrough", {
        "first_terminal": first, "second_terminal": second, "run_recipe": recipe,
        "service_start_seconds": service_start, "steps": steps,
        "snr_db": printed_snrs(scored[-1]["stdout"]), "snr_command": scored[-1]["command"],
        "seconds": time.perf_counter() - started})


if __name__ == "__main__":
    main()

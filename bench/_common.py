"""What every bench script shares: where results go, the machine they were measured on, an
iterative solver's first state, and measures of a fit (principal angles, excess errors).

Results are JSON documents in ``bench/results/`` (or the folder named by the environment
variable ``KPCA_BENCH_RESULTS``: the Makefile's quick set writes there, so that small runs never
replace the full-size results). `save` adds an ``"environment"`` entry (`environment`: commit,
CPU, cores, library versions, BLAS) and writes atomically. The figures themselves live in these
files and in the tables of docs/, not in docstrings.

The bench scripts put the repository root on ``sys.path`` so that ``python bench/x.py`` can
import ``bench._common`` and ``bench._stepwise`` (the step-by-step references, which the tests
compare against too); ``python -m bench.x`` works too. Nothing here imports from tests/.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = ROOT / "bench" / "results"
RESULTS_VARIABLE = "KPCA_BENCH_RESULTS"
LIBRARIES = ("numpy", "scipy", "numba", "zarr", "dask", "distributed", "scikit-learn", "fastapi")


def results_dir() -> Path:
    """The folder results go to (created): ``$KPCA_BENCH_RESULTS`` if set, else bench/results."""
    folder = Path(os.environ.get(RESULTS_VARIABLE) or DEFAULT_RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def output_path(filename: str) -> Path:
    """Where a result file other than the JSON (a PNG) goes: ``results_dir() / filename``."""
    return results_dir() / filename


def git_state(root: Path = ROOT) -> dict:
    """``{"commit": full hash or None, "dirty": bool or None}`` of the repository the code ran from;
    dirty counts untracked files too (a new module changes what runs), but not the results folders
    (bench/results): a script that adds to a saved result has changed it, not the code."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=root, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".", ":(exclude)bench/results")
    return {"commit": commit.strip() if commit else None, "dirty": None if status is None else bool(status.strip())}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else `platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_versions() -> dict:
    """Installed version of each of `LIBRARIES` (None where not installed)."""
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def blas() -> list[dict] | None:
    """The BLAS libraries loaded in this process (threadpoolctl): API, version, threads, architecture."""
    try:
        import numpy  # noqa: F401 - loads the BLAS that threadpoolctl reports
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keys = ("internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: d.get(k) for k in keys} for d in threadpool_info() if d.get("user_api") == "blas"]


def environment() -> dict:
    """Where and with what a result was measured.

    Returns
    -------
    dict with ``commit`` and ``dirty`` (`git_state`), ``cpu`` (model name), ``logical_cores``
    (`os.cpu_count`), ``available_cores`` (this process's affinity), ``python``, ``platform``,
    ``libraries`` (`library_versions`), ``blas`` (`blas`), ``numba_threads``
    (``NUMBA_NUM_THREADS``), ``argv`` (the command that ran) and ``utc`` (ISO 8601, seconds).
    """
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count()
    try:
        import numba

        numba_threads = int(numba.config.NUMBA_NUM_THREADS)
    except ImportError:
        numba_threads = None
    return {
        **git_state(),
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "available_cores": available,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": library_versions(),
        "blas": blas(),
        "numba_threads": numba_threads,
        "argv": [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv else [],
        "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def save(name: str, payload: dict) -> Path:
    """Write ``{"environment": environment(), **payload}`` to ``results_dir() / f"{name}.json"``
    atomically (a temporary file in the same folder, then `os.replace`), print it, and return the path."""
    if "environment" in payload:
        raise ValueError("payload: 'environment' is added by save")
    doc = {"environment": environment(), **payload}
    text = json.dumps(doc, indent=1)
    path = results_dir() / f"{name}.json"
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # bench/results/*.tmp is git-ignored
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    print(text)
    print(f"wrote {path}", file=sys.stderr)
    return path


def start_iterative(solver_name: str, rows, n_components: int, mean_diagonal: float, **given):
    """An iterative solver's first state through the registry (`kpca.solvers.SOLVERS`).

    ``rows`` is a row source (`kpca.rows.KernelRows` with its centring set, or
    `bench._stepwise.DenseRows`); ``mean_diagonal`` is ``trace(K') / l``, from which the default
    gains follow; ``given`` are parameters as a request would give them (``seed``, ``init``, ...).
    The start is the paper's random one unless ``init`` is given: the benches time and follow the
    iteration itself (a fit's default, ``init="auto"``, starts warm where affordable).
    Returns ``(params, state)``: every parameter's resolved value, and the state.
    """
    from kpca.solvers import SOLVERS, FitContext

    solver = SOLVERS[solver_name]
    context = FitContext(n_rows=rows.n_rows, n_components=n_components, mean_diagonal=mean_diagonal)
    params = solver.resolved({"init": "random", **given}, context)
    return params, solver.start(rows, n_components, params)


def subspace_angles(A1, A2, Kc):
    """Principal angles (radians, ascending) between span(A1 Phi') and span(A2 Phi'), from the
    feature-space Gram matrices ``Ai K' Aj^T`` (each subspace orthonormalised by a Cholesky factor of
    its own). O(r l^2)."""
    import numpy as np

    from kpca._dense import cholesky, solve, svd

    G11 = A1 @ Kc @ A1.T
    G22 = A2 @ Kc @ A2.T
    G12 = A1 @ Kc @ A2.T
    L1 = cholesky(G11)
    L2 = cholesky(G22)
    M = solve(L1, solve(L2, G12.T).T)
    s = np.clip(svd(M, compute_uv=False), 0.0, 1.0)
    return np.sort(np.arccos(s))


def best_of(repeat: int, call) -> tuple[float, object]:
    """The shortest wall time of ``repeat`` calls of ``call``, and the last result."""
    import time

    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return min(times), result


def jittered_digits(l: int, seed: int = 0):
    """The 1797 digits (pixels / 16, n = 64) repeated to l rows, plus Gaussian jitter of 0.05 drawn
    with ``seed``: a data set of any size with the digits' structure. O(l n)."""
    import numpy as np
    from sklearn.datasets import load_digits

    X = np.resize(load_digits().data / 16.0, (l, 64))
    return X + np.random.default_rng(seed).normal(scale=0.05, size=X.shape)


def excess_errors(X, kernel, projections: dict, eigenvalues) -> dict:
    """Seed 000 eq. 22's excess error ``E / E_min - 1`` of each entry's served training projections
    (``{key: Z (r, l)}``, the same r for all) on the rows X with ``kernel`` (a `kpca.kernels.KernelSpec`),
    with ``E^2 = ||K'||_F^2 - 2 tr(Z K' Z^T) + ||Z Z^T||_F^2`` (Z centred) and ``E_min^2 = ||K'||_F^2 -
    sum_i lambda_i^2`` from the exact leading ``eigenvalues``: ``||K'||_F^2`` and every ``tr(Z K' Z^T)``
    from one pass of centred kernel rows (256 at a time), the Z stacked. O(l^2 n) for the pass, O(l^2 r s)
    for s entries."""
    import numpy as np

    from kpca.rows import KernelRows

    keys = list(projections)
    r = np.asarray(projections[keys[0]]).shape[0]
    Z = np.vstack([projections[k] - projections[k].mean(axis=1, keepdims=True) for k in keys])
    rows = KernelRows(X, kernel)
    rows.fit_centering()
    l = X.shape[0]
    norm2, ZKZ = 0.0, np.zeros(len(keys))
    for a in range(0, l, 256):
        idx = np.arange(a, min(a + 256, l))
        block = rows.block(idx)  # K'[idx, :]
        norm2 += float(np.einsum("ij,ij->", block, block))
        ZK = Z @ block.T  # (Z K')[:, idx], K' symmetric
        ZKZ += np.einsum("ij,ij->i", ZK, Z[:, idx]).reshape(len(keys), r).sum(axis=1)
    e_min2 = norm2 - float(np.sum(np.asarray(eigenvalues[:r]) ** 2))
    out = {}
    for i, key in enumerate(keys):
        Zi = Z[i * r : (i + 1) * r]
        e2 = norm2 - 2.0 * ZKZ[i] + float(np.sum((Zi @ Zi.T) ** 2))
        out[key] = float(np.sqrt(max(e2, 0.0) / e_min2) - 1.0)
    return out

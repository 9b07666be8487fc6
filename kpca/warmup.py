"""Compile (and cache) the jitted kernels before the first request: ``python -m kpca.warmup``.

The kernels are ``numba.njit(cache=True)``: the first call of each, per argument types, compiles it
(seconds) and writes the machine code under ``NUMBA_CACHE_DIR``. `warm_up` fits a tiny model of
every registered solver, and of every kernel, on float32 and float64 rows with kernel tiles in the same
precision (``kernel_precision``, where the solver has it), then projects and reconstructs through it;
it also runs the default fit (`warm_default`) and the KHA family's stochastic passes. So a container
image built with this step starts with a full cache. Cost: the compilation of every kernel on an empty
cache; on a full one only the tiny fits.

``--part autoencoders`` compiles the autoencoder solvers' runs alone and ``--part others`` the rest: the
autoencoders' own jitted training code takes about as long to compile as every other kernel together,
so two processes, one per part, fill an empty cache in about half the time (``make warm``, before the
tests).
"""

from __future__ import annotations

import argparse

import numpy as np

from kpca.estimator import KernelHebbianPCA
from kpca.kernels import KERNELS
from kpca.solvers import SOLVERS

#: kernels that a solver is defined for, where it is not every kernel (seed 003: <x, y>^2 only)
_KERNEL_OF = {"akpca": {"kernel": "polynomial", "degree": 2, "offset": 0.0},
              "ds-akpca": {"kernel": "polynomial", "degree": 2, "offset": 0.0}}


#: ``--part`` of the command line: which of `warm_runs` a process compiles
PARTS = ("all", "autoencoders", "others")


def warm_runs(part: str = "all") -> list[tuple[str, dict]]:
    """The ``(solver, kernel parameters)`` fits `warm_up` runs: every solver on its kernel (Gaussian by
    default), and the default solver (ritz) on every other kernel; ``part`` ``"autoencoders"`` keeps the solvers of
    `_KERNEL_OF` (seed 003's autoencoders), ``"others"`` the rest, ``"all"`` both. O(1)."""
    if part not in PARTS:
        raise ValueError(f"part: {part!r} is not one of {PARTS}")
    runs = [(name, _KERNEL_OF.get(name, {"kernel": "gaussian"})) for name in SOLVERS]
    runs += [("ritz", {"kernel": kernel}) for kernel in KERNELS if kernel != "gaussian"]
    if part == "all":
        return runs
    return [(solver, kernel) for solver, kernel in runs if (solver in _KERNEL_OF) == (part == "autoencoders")]


def warm_up(n_rows: int = 60, n_features: int = 4, part: str = "all") -> list[str]:
    """Fit, project and reconstruct a 2-component model of each run of `warm_runs` (``part``) on
    ``n_rows`` random rows, in float32 and float64; with every part but the autoencoders' also the
    default fit (`warm_default`: float32 tiles over float64 rows) and the KHA family's stochastic passes
    (``init`` random: the paper's passes, jitted per sub-block). The runs done. Errors propagate: a
    kernel that cannot compile fails here."""
    runs = warm_runs(part)  # an unknown part is refused before anything compiles
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, n_features))
    done = []
    if part != "autoencoders":
        done += warm_default()
        for solver in ("kha", "kha-smd"):
            KernelHebbianPCA(n_components=2, solver=solver, passes=2, solver_params={"init": "random"}).fit(X)
            done.append(f"{solver}/stochastic")
    for solver, kernel in runs:
        for dtype in (np.float32, np.float64):
            rows = X.astype(dtype)
            # float32 tiles are the fit's kernel_precision, not the data's dtype (the rows cast it)
            tiles = {"kernel_precision": np.dtype(dtype).name} if SOLVERS[solver].param("kernel_precision") else {}
            model = KernelHebbianPCA(n_components=2, solver=solver, passes=2, solver_params=tiles, **kernel).fit(rows)
            model.inverse_transform(model.transform(rows[:5]))
            done.append(f"{solver}/{kernel['kernel']}/{np.dtype(dtype).name}")
    return done


def warm_default(n_rows: int = 300, n_features: int = 4) -> list[str]:
    """Compile (or load from the cache) the code of the default fit and of serving only: the Nyström start
    and Rayleigh-Ritz passes over float32 tiles (`kernel_precision` ``auto``'s choice above 1000 rows,
    asked for here on ``n_rows`` rows), the same in float64, and a projection and pre-image through the
    model (float64). What a worker needs before its first fit and projection; a second or so on a full
    cache. Returns the runs done."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, n_features))
    done = []
    for precision in ("float32", "float64"):
        model = KernelHebbianPCA(n_components=2, passes=2, solver_params={
            "init": "nystrom", "init_size": min(100, n_rows - 1), "tol": 0, "kernel_precision": precision}).fit(X)
        model.inverse_transform(model.transform(X[:5]))
        done.append(f"default/{precision}")
    return done


def warm_projection(n_rows: int = 40, n_features: int = 4) -> list[str]:
    """Compile (or load from the cache) the code of a projection through a Gaussian model whose rows are
    float32 and float64: one KHA pass over ``n_rows`` rows of each, and a projection of two float64 rows
    through it. What a process that projects small models itself (an API process) needs before its first
    projection, which would otherwise load it with the interpreter lock held. Returns the runs done."""
    X = np.random.default_rng(0).normal(size=(n_rows, n_features))
    done = []
    for dtype in (np.float32, np.float64):
        model = KernelHebbianPCA(n_components=2, solver="kha", passes=1, solver_params={"init": "random"})
        model.fit(X.astype(dtype)).transform(X[:2])
        done.append(f"projection/{np.dtype(dtype).name}")
    return done


def main(argv: list[str] | None = None) -> None:
    """``python -m kpca.warmup [--part autoencoders|others]``: compile a part of the kernels (all by
    default) into numba's cache and say how many fits ran."""
    parser = argparse.ArgumentParser(prog="python -m kpca.warmup", description="Compile the jitted kernels into "
                                     "numba's cache.")
    parser.add_argument("--part", choices=PARTS, default="all",
                        help="the autoencoder solvers' fits, the others', or all (default)")
    part = parser.parse_args(argv).part
    print(f"kpca warm-up ({part}): {len(warm_up(part=part))} fits compiled")


if __name__ == "__main__":
    main()

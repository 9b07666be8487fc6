"""Autoencoder KPCA against linear PCA and exact KPCA on digits: reconstruction and denoising (seed 003 Fig. 3-4, 8, 10).

Data: scikit-learn's digits (1797 x 64, pixels / 16), the stand-in for the
paper's MNIST. Training set: ``--train-per-class`` random digits of each
class (default 100, 1000 rows); held out: the other 797. The paper (§6)
trains on 300 digits per class (3000) of MNIST downsampled to 14 x 14
(d = 196), and on 28 x 28 and a 3500-per-class set besides; digits are
8 x 8 already (d = 64, no pooling), and the whole set has about 180 per
class, so this is the "short" setting scaled down to 1000 rows. Its
components k = 5 to 25 become ``--ks`` 1, 2, 4, 8, 16, 32.

Methods, each fitted on the training rows for every k:

* ``linear_pca``: scikit-learn's PCA (centred, as the paper reports it),
  reconstruction ``mean + W^T W (x - mean)``;
* ``kpca_gradient`` and ``kpca_learned``: exact KPCA (solver ``exact``,
  centred in feature space) with the kernel ``<x, y>^2``, and a pre-image:
  ``gradient`` (L-BFGS-B on ``||Psi(x) - phi(z)||^2`` from the better of x
  and the Kwok-Tsang point; `kpca.preimage`), the pre-image proper, and
  ``learned`` (Bakir et al.'s kernel ridge map from components to inputs,
  fitted on the training rows), which reconstructs better. Fixed point is
  for radial kernels; Kwok-Tsang alone is worse than gradient at every k. For
  this kernel the exact minimiser is known: the rank-one part
  ``sqrt(lambda_1) v_1`` of ``M(Psi) = sum_i gamma_i x_i x_i^T``; the JSON's
  ``closed_form_check`` compares gradient's error with it on held-out rows;
* ``akpca`` and ``ds-akpca`` (`kpca.solvers._akpca`, `kpca.solvers._ds_akpca`):
  ``--passes`` passes (default 30) from the solver's random start (``--seed``),
  blocks of 64 rows, every other parameter the default (the step rule
  `kpca.solvers._autoencoder.STEP_RULE`, eta0 1); reconstruction by the
  model's decoder.

Figures (all relative: ``sum ||x_hat - x||^2 / sum ||x||^2`` over the rows,
x the clean rows; the paper plots the unnormalised sum, §6):

* ``train_error``, ``test_error``: reconstruction of the training rows (Fig. 3)
  and of the held-out rows (Fig. 4);
* ``denoise``: held-out rows corrupted, reconstructed, compared with the clean
  rows (Fig. 8 and 10); ``noisy_input`` is the corrupted rows' own error.
  Gaussian noise: the paper's sigma 0.02, 0.04, 0.06 are on data divided by
  the largest row norm, so here sigma times that norm (about 4.8, so 0.096 to
  0.29 in pixels of [0, 1]); speckle: each pixel set to 0 with p 0.2, 0.3, 0.4
  (`kpca.noise`);
* ``fit_s``: seconds from the rows to a model (exact KPCA: the kernel matrix
  and its eigenpairs, plus the learned map for ``kpca_learned``; the
  autoencoders: the start and the passes, jitted code compiled beforehand);
  ``reconstruct_s``: seconds to reconstruct the held-out rows; ``passes``:
  reads of the training rows (PCA 1; exact KPCA 2, the centring pass and the
  kernel matrix; the autoencoders 1 for the data's scale, plus the passes);
* ``surrogate_per_pass``: the autoencoders' mean spectral-norm surrogate
  (eq. 17-18) over each pass;
* ``uncentred_pca``: a reference, not a method of the paper's figures: the
  rows projected on the k leading right singular vectors of the uncentred
  training rows. The autoencoders do not centre, and at k = 1 AKPCA's
  decoder outputs lie on at most two lines through 0.

BLAS runs on one thread (a shared 2-core machine; bench/reduced_set.py).
Writes bench/results/akpca.json and .png (``--quick``: akpca_quick, 30
digits per class, the first 200 held-out rows, k 2 and 8, 5 passes); prints
the JSON (`bench._common.save`).

    python bench/akpca.py [--train-per-class 100] [--held-out 0] [--ks 1,2,4,8,16,32] [--passes 30] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench._common

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402

from bench._common import output_path, save  # noqa: E402
from kpca._threads import blas_limit  # noqa: E402
from kpca.driver import PassHooks, run_passes  # noqa: E402
from kpca.kernels import KernelSpec  # noqa: E402
from kpca.solvers import served_model  # noqa: E402
from kpca.noise import gaussian_noise, speckle_noise  # noqa: E402
from kpca.preimage import LearnedInverse, reconstruct  # noqa: E402
from kpca.rows import KernelRows  # noqa: E402
from kpca.solvers import SOLVERS, FitContext  # noqa: E402
from kpca.solvers._autoencoder import KERNEL, STEP_RULE  # noqa: E402

POLY2 = KernelSpec(**KERNEL)
METHODS = ("linear_pca", "kpca_gradient", "kpca_learned", "akpca", "ds-akpca")
LABELS = {"linear_pca": "linear PCA", "kpca_gradient": "KPCA, gradient pre-image",
          "kpca_learned": "KPCA, learned pre-image", "akpca": "AKPCA", "ds-akpca": "DS-AKPCA"}
GAUSSIAN_PAPER = (0.02, 0.04, 0.06)  # seed 003 §6, on data divided by the largest row norm
SPECKLE = (0.2, 0.3, 0.4)
DENOISE_PLOT_KS = (8, 16)  # the paper plots k = 10 and 20 of d = 196
BLOCK_SIZE = 64
CHECK_ROWS = 200  # held-out rows of the closed-form check


def relative_error(estimate: np.ndarray, clean: np.ndarray) -> float:
    """``sum ||estimate - clean||^2 / sum ||clean||^2``."""
    return float(np.sum((estimate - clean) ** 2) / np.sum(clean * clean))


def split(X: np.ndarray, y: np.ndarray, per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``per_class`` random rows of each class for training, the rest held out (both in data order)."""
    rng = np.random.default_rng([seed, 3])
    train = np.sort(np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class] for c in np.unique(y)]))
    held_out = np.setdiff1d(np.arange(X.shape[0]), train)
    return np.ascontiguousarray(X[train]), np.ascontiguousarray(X[held_out])


def fit_autoencoder(solver: str, train: np.ndarray, k: int, passes: int, seed: int):
    """``(model, seconds, surrogate per pass)``: the solver's start and ``passes`` passes, timed."""
    surrogates = []
    started = time.perf_counter()
    rows = KernelRows(train, POLY2)
    declared = SOLVERS[solver]
    params = declared.resolved({"seed": seed}, FitContext(n_rows=train.shape[0], n_components=k,
                                                          exact_limit=train.shape[0]))
    state = declared.start(rows, k, params)
    hooks = PassHooks(on_pass=lambda s: surrogates.append(float(s["surrogate_sum"]) / train.shape[0]))
    state, _ = run_passes(rows, state, passes, BLOCK_SIZE, hooks)
    model = declared.model(state)
    return model, time.perf_counter() - started, surrogates, int(state.get("gain_reductions", 0))


def fit_exact(train: np.ndarray, k: int):
    """``(served model, seconds)``: solver ``exact`` with ``<x, y>^2``, as the worker runs it."""
    started = time.perf_counter()
    rows = KernelRows(train, POLY2)
    context = FitContext(n_rows=train.shape[0], n_components=k, exact_limit=train.shape[0], kernel=POLY2)
    declared = SOLVERS["exact"]
    state = declared.fit(rows, k, declared.resolved({}, context), context)
    return served_model(state, rows, POLY2), time.perf_counter() - started


def closed_form(model, X: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The exact pre-image for ``<x, y>^2``: ``sqrt(lambda_1) v_1`` of ``M(Psi(x)) = sum_i gamma_i x_i x_i^T``
    (zero if lambda_1 <= 0), sign by ``v_1 . mean >= 0``. O(m l d^2)."""
    P = model.rows.take(np.arange(model.rows.n_rows))
    gamma = model.target(model.check_points(X)).gamma
    out = np.zeros_like(X)
    for i, g in enumerate(gamma):
        w, V = np.linalg.eigh((P.T * g) @ P)
        v = V[:, -1] if V[:, -1] @ mean >= 0 else -V[:, -1]
        out[i] = np.sqrt(max(w[-1], 0.0)) * v
    return out


def timed(function, *args):
    started = time.perf_counter()
    out = function(*args)
    return out, time.perf_counter() - started


def run(per_class: int, held_out: int, ks, passes: int, seed: int) -> dict:
    digits = load_digits()
    X = digits.data / 16.0
    train, test = split(X, digits.target, per_class, seed)
    test = test[:held_out] if held_out else test
    max_norm = float(np.linalg.norm(train, axis=1).max())
    right = np.linalg.svd(train, full_matrices=False)[2]
    uncentred = {f"{part}_error": [relative_error(Z @ right[:k].T @ right[:k], Z) for k in ks]
                 for part, Z in (("train", train), ("test", test))}
    gaussian = [s * max_norm for s in GAUSSIAN_PAPER]
    noisy = {"gaussian": [gaussian_noise(test, s, np.random.default_rng([seed, 1, i])) for i, s in enumerate(gaussian)],
             "speckle": [speckle_noise(test, p, np.random.default_rng([seed, 2, i])) for i, p in enumerate(SPECKLE)]}
    for solver in ("akpca", "ds-akpca"):  # compile the jitted code before anything is timed
        model, *_ = fit_autoencoder(solver, train[:50], 2, 1, seed)
        model.reconstruct(test[:5])
    results, surrogate, check = [], {"akpca": {}, "ds-akpca": {}}, {}
    for k in ks:
        models = {}
        pca, seconds = timed(lambda: PCA(k).fit(train))
        models["linear_pca"] = (lambda Z, pca=pca: pca.inverse_transform(pca.transform(Z)), seconds, 1)
        exact, seconds = fit_exact(train, k)
        models["kpca_gradient"] = (lambda Z, m=exact: reconstruct(m, Z, "gradient"), seconds, 2)
        inverse, inverse_seconds = timed(lambda: LearnedInverse.fit(exact, rng=np.random.default_rng([seed, 5])))
        models["kpca_learned"] = (inverse, seconds + inverse_seconds, 2)
        for solver in ("akpca", "ds-akpca"):
            model, seconds, surrogates, reductions = fit_autoencoder(solver, train, k, passes, seed)
            models[solver] = (model.reconstruct, seconds, 1 + passes)
            surrogate[solver][str(k)] = surrogates
            if reductions:
                print(f"{solver} k = {k}: eta0 reduced {reductions} times", file=sys.stderr)
        for method in METHODS:
            rebuild, seconds, reads = models[method]
            test_hat, rebuild_seconds = timed(rebuild, test)
            row = {"k": k, "method": method, "fit_s": seconds, "passes": reads,
                   "train_error": relative_error(rebuild(train), train),
                   "test_error": relative_error(test_hat, test), "reconstruct_s": rebuild_seconds,
                   "denoise": {noise: [relative_error(rebuild(Z), test) for Z in sets] for noise, sets in noisy.items()}}
            results.append(row)
            print({key: value for key, value in row.items() if key != "denoise"}, file=sys.stderr, flush=True)
        rows = test[:CHECK_ROWS]
        check[str(k)] = {"gradient": relative_error(reconstruct(exact, rows, "gradient"), rows),
                         "closed_form": relative_error(closed_form(exact, rows, train.mean(axis=0)), rows)}
    return {"train": int(train.shape[0]), "held_out": int(test.shape[0]), "features": int(X.shape[1]),
            "max_row_norm": max_norm, "ks": list(ks),
            "noise": {"gaussian_sigma_paper": list(GAUSSIAN_PAPER), "gaussian_sigma": gaussian,
                      "speckle_p": list(SPECKLE)},
            "noisy_input": {noise: [relative_error(Z, test) for Z in sets] for noise, sets in noisy.items()},
            "results": results, "uncentred_pca": uncentred, "closed_form_check": check,
            "surrogate_per_pass": surrogate}


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks, results = payload["ks"], payload["results"]
    denoise_ks = [k for k in DENOISE_PLOT_KS if k in ks] or [ks[-1]]
    fig, axes = plt.subplots(1 + len(denoise_ks), 2, figsize=(10, 3.6 * (1 + len(denoise_ks))), squeeze=False)
    for ax, key, title in ((axes[0, 0], "train_error", "training rows (Fig. 3)"),
                           (axes[0, 1], "test_error", "held-out rows (Fig. 4)")):
        for method in METHODS:
            ax.plot(ks, [r[key] for r in results if r["method"] == method], marker="o", label=LABELS[method])
        ax.plot(ks, payload["uncentred_pca"][key], ":", color="grey", label="uncentred PCA (reference)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("components k")
        ax.set_ylabel("relative reconstruction error")
        ax.set_title(f"reconstruction, {title}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    noise = payload["noise"]
    for row, k in zip(axes[1:], denoise_ks):
        for ax, kind, levels, xlabel in ((row[0], "gaussian", noise["gaussian_sigma_paper"],
                                          "sigma (data / largest row norm, as the paper)"),
                                         (row[1], "speckle", noise["speckle_p"], "p (pixels set to 0)")):
            ax.plot(levels, payload["noisy_input"][kind], "k--", marker="x", label="noisy input")
            for method in METHODS:
                (r,) = [r for r in results if r["method"] == method and r["k"] == k]
                ax.plot(levels, r["denoise"][kind], marker="o", label=LABELS[method])
            ax.set_title(f"denoising, {kind} noise, k = {k} (Fig. {8 if kind == 'gaussian' else 10})", fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("relative error to the clean rows")
            ax.grid(alpha=0.3)
    axes[1, 0].legend(fontsize=8)
    fig.suptitle(f"digits, {payload['train']} training / {payload['held_out']} held-out rows, kernel <x, y>^2, "
                 f"{payload['passes']} passes (seed 003 §6)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-per-class", type=int, default=100, help="training digits per class (default 100)")
    ap.add_argument("--held-out", type=int, default=0, help="held-out rows used (default 0: all)")
    ap.add_argument("--ks", default="1,2,4,8,16,32", help="numbers of components")
    ap.add_argument("--passes", type=int, default=30, help="AKPCA and DS-AKPCA passes (default 30)")
    ap.add_argument("--seed", type=int, default=0, help="the split, the noise and the autoencoders' start")
    ap.add_argument("--quick", action="store_true", help="30 digits per class, 200 held out, k 2 and 8, 5 passes")
    args = ap.parse_args()
    if args.quick:
        args.train_per_class, args.held_out, args.ks, args.passes = 30, 200, "2,8", 5
    ks = [int(k) for k in args.ks.split(",")]
    started = time.perf_counter()
    with blas_limit(1):
        payload = run(args.train_per_class, args.held_out, ks, args.passes, args.seed)
    payload = {"kernel": KERNEL, "passes": args.passes, "block_size": BLOCK_SIZE, "seed": args.seed,
               "step_rule": STEP_RULE, "error": "relative: sum ||x_hat - x||^2 / sum ||x||^2, x the clean rows",
               **payload, "seconds": time.perf_counter() - started, "load_average": list(os.getloadavg()),
               "blas_threads": 1}
    name = "akpca_quick" if args.quick else "akpca"
    save(name, payload)  # before the PNG, which would make the tree dirty
    plot(payload, output_path(f"{name}.png"))


if __name__ == "__main__":
    main()

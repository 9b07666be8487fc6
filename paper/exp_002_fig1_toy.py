"""Seed 002 §4.1, Fig. 1: the first three kernel principal components of a 2-D toy set, KPCA against KHA.

The paper (Kim, Franz, Schölkopf, *Kernel Hebbian Algorithm*) draws l points with x uniform on
[-1, 1] and y = -x^2 + xi, xi ~ N(0, 0.2^2), and shows contour lines of the first three components
of exact KPCA and of the KHA (eq. 10-13) with a degree-2 polynomial kernel; it claims "visual
similarity". The paper gives neither l, the kernel's offset, the gain nor the number of passes; here
l = 300, the homogeneous kernel (x.y)^2 (the kernel of Schölkopf et al.'s 1998 KPCA toy, which this
one copies) and, as a second case, (x.y + 1)^2, whose centred feature space has 5 dimensions instead
of 3, so that the 3-component subspace is not the whole range of K'. The KHA is the project's ``kha``
solver (constant gain, the paper's sparse random start), its gain eta0 picked on {1, 2, 5} x 10^b.
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

from bench._common import subspace_angles
from kpca.estimator import KernelHebbianPCA
from paper._common import graded, save_figure, verdict_word
from paper._criteria import criterion

TITLE = "Seed 002 Fig. 1: first three kernel PCs of a toy set, KPCA vs KHA (polynomial kernel)"
SIMILARITY = criterion("002_fig1_similarity")
SEED = "002"
NAME = "002_fig1_toy"
R = 3
KERNELS = {"(x.y)^2": 0.0, "(x.y + 1)^2": 1.0}  # label -> offset of the degree-2 polynomial kernel


def toy_data(l: int, seed: int = 0) -> np.ndarray:
    """The paper's toy set: x ~ U[-1, 1], y = -x^2 + N(0, 0.2^2); shape (l, 2)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, l)
    return np.column_stack([x, -x**2 + 0.2 * rng.normal(size=l)])


def gain_grid(low: int, high: int) -> list[float]:
    """The paper's grid {1, 2, 5} x 10^b for b = low..high."""
    return [m * 10.0**b for b in range(low, high + 1) for m in (1, 2, 5)]


def component_cosines(A: np.ndarray, AK: np.ndarray, E: np.ndarray, EK: np.ndarray) -> np.ndarray:
    """|cos| of the feature-space angle between component i of ``A Phi'`` and of ``E Phi'`` (AK = A K')."""
    cross = np.einsum("ij,ij->i", AK, E)
    norms = np.einsum("ij,ij->i", AK, A) * np.einsum("ij,ij->i", EK, E)
    return np.abs(cross) / np.sqrt(np.maximum(norms, 1e-300))


def rayleigh(A: np.ndarray, AK: np.ndarray) -> np.ndarray:
    """Per-component eigenvalue estimates ``||a_i K'||^2 / (a_i K' a_i)`` (eigenvalues of K')."""
    return np.einsum("ij,ij->i", AK, AK) / np.einsum("ij,ij->i", AK, A)


def fit_kha(X, offset, eta0, passes):
    """The paper's KHA: constant gain eta0, sparse random start, ``passes`` passes in random order."""
    return KernelHebbianPCA(R, kernel="polynomial", degree=2, offset=offset, solver="kha", init="random",
                            eta0=eta0, passes=passes, random_state=0).fit(X)


def compare(X, offset, grid, passes) -> dict:
    """Exact KPCA and the KHA at every gain of ``grid``; the best gain by mean component |cos|."""
    exact = KernelHebbianPCA(R, kernel="polynomial", degree=2, offset=offset, solver="exact").fit(X)
    Kc = exact.rows_.dense()
    E = exact.coefficients_
    EK = E @ Kc
    tried = []
    for eta0 in grid:
        try:
            est = fit_kha(X, offset, eta0, passes)
        except Exception as exc:  # a gain that diverges beyond the solver's guard
            tried.append({"eta0": eta0, "error": type(exc).__name__})
            continue
        A, AK = est.state_["A"], est.state_["AK"]
        cos = component_cosines(A, AK, E, EK)
        tried.append({"eta0": eta0, "cos": cos, "reduced": int(est.params_used_.get("gain_reductions", 0)),
                      "est": est})
    ok = [t for t in tried if "cos" in t and t["reduced"] == 0]
    best = max(ok, key=lambda t: float(np.mean(t["cos"])))
    est = best["est"]
    A, AK = est.state_["A"], est.state_["AK"]
    lam_all = np.linalg.eigvalsh(Kc)[::-1]
    return {"exact": exact, "kha": est, "A": A, "E": E, "best": best, "tried": tried, "Kc": Kc,
            "angles": np.degrees(subspace_angles(A, E, Kc)), "lam_exact": exact.eigenvalues_,
            "lam_kha": rayleigh(A, AK), "rank": int(np.sum(lam_all > 1e-9 * lam_all[0])),
            "orth": float(np.linalg.norm(AK @ A.T - np.eye(R)))}


def plot(path: pathlib.Path, X: np.ndarray, results: dict) -> None:
    """Contours of the 3 components on a grid: per kernel one KPCA row and one KHA row (signs aligned)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gx, gy = np.meshgrid(np.linspace(-1.2, 1.2, 60), np.linspace(-1.6, 0.7, 60))
    G = np.column_stack([gx.ravel(), gy.ravel()])
    fig, axes = plt.subplots(2 * len(results), R, figsize=(3.2 * R, 2.7 * 2 * len(results)))
    for k, (label, res) in enumerate(results.items()):
        rows = res["exact"].rows_.transform_block(G)  # centred kernel rows k'(g), same centring for both
        ve, vk = rows @ res["E"].T, rows @ res["A"].T
        sign = np.sign(np.einsum("ij,ij->i", res["A"] @ res["Kc"], res["E"]))
        for i in range(R):
            for j, (name, v, lam) in enumerate((("KPCA", ve[:, i], res["lam_exact"][i]),
                                                ("KHA", sign[i] * vk[:, i], res["lam_kha"][i]))):
                ax = axes[2 * k + j, i]
                ax.contour(gx, gy, v.reshape(gx.shape), levels=12, cmap="coolwarm", linewidths=0.8)
                ax.scatter(X[:, 0], X[:, 1], s=3, c="k")
                ax.set_title(f"{name} {label}: PC {i + 1}, λ={lam:.3g}", fontsize=8)
                ax.set_xticks([])
                ax.set_yticks([])
    save_figure(fig, path, dpi=90)


def run(figures: pathlib.Path, quick: bool = False) -> dict:
    """Fig. 1 of seed 002 with numbers; writes figures/002_fig1_toy.png."""
    t0 = time.perf_counter()
    figures = pathlib.Path(figures)
    figures.mkdir(parents=True, exist_ok=True)
    l, passes, grid = (40, 5, gain_grid(-2, -1)) if quick else (300, 100, gain_grid(-4, 0))
    X = toy_data(l)
    results = {label: compare(X, offset, grid, passes) for label, offset in KERNELS.items()}
    fig_name = f"{NAME}.png"
    plot(figures / fig_name, X, results)

    lines = ["**Claim (§4.1, Fig. 1).** \"Figure 1 shows the first three PCs of a toy data set, extracted by KPCA "
             "and KHA with a polynomial kernel. Visual similarity of PCs from both algorithms show the approximation "
             "capability of KHA to KPCA.\"", "",
             f"**Criterion (paper/criteria/002_fig1_similarity.json, committed before the run).** {SIMILARITY.text}.", "",
             f"**Setup.** l = {l} points, x ~ U[-1, 1], y = -x² + ξ, ξ ~ N(0, 0.2²) (the paper's recipe; it does not "
             "give l). Degree-2 polynomial kernel; the paper gives no offset, so both (x·y)² (the kernel of Schölkopf "
             "et al.'s 1998 KPCA toy; its centred feature space has only 3 dimensions, so the three components span "
             "all of it and only their order and rotation are tested) and (x·y + 1)² (5 dimensions: the 3-component "
             "subspace is a real test). Exact KPCA: the `exact` solver. KHA: the `kha` solver, constant gain η₀ "
             f"(eq. 10-13), the paper's sparse random start, {passes} passes in random order (the paper gives no "
             "count). η₀ is picked on the paper's grid {1, 2, 5} × 10^b, "
             f"b = {int(np.log10(grid[0]))}..{int(np.log10(grid[-1]))}, as the gain with the highest mean |cos| "
             "between KHA's and KPCA's components (an oracle choice that favours the KHA; gains at which the "
             "solver's divergence guard had to reduce η₀ are excluded). The components compared are the KHA's raw "
             "iterate A (the paper's output), not the Rayleigh-Ritz rotation the project serves.", "",
             f"![KPCA vs KHA contours]({'figures/' + fig_name})", "",
             "| kernel | rank of K' | best η₀ | abs(cos) PC1, PC2, PC3 | subspace angles (°) | eigenvalues of K': "
             "exact | KHA (Rayleigh quotients) | ‖AK'Aᵀ − I‖ |", "|---|---|---|---|---|---|---|---|"]
    claims_ok = []
    for label, res in results.items():
        cos = res["best"]["cos"]
        claims_ok.append(bool(np.min(cos) > SIMILARITY["min_abs_cos"]))
        lines.append(f"| {label} | {res['rank']} | {res['best']['eta0']:g} | {', '.join(f'{c:.4f}' for c in cos)} "
                     f"| {', '.join(f'{a:.2f}' for a in res['angles'])} | "
                     f"{', '.join(f'{v:.4g}' for v in res['lam_exact'])} | "
                     f"{', '.join(f'{v:.4g}' for v in res['lam_kha'])} | {res['orth']:.3g} |")
    lines += ["", "Min abs(cos) over the three components at each gain of the grid (– : diverged or gain reduced):", "",
              "| η₀ | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for g, eta0 in enumerate(grid):
        cells = []
        for res in results.values():
            t = res["tried"][g]
            cells.append("–" if "cos" not in t or t["reduced"] else f"{np.min(t['cos']):.4f}")
        lines.append(f"| {eta0:g} | " + " | ".join(cells) + " |")
    lam_err = max(float(np.max(np.abs(r["lam_kha"] / r["lam_exact"] - 1))) for r in results.values())
    verdict = graded(sum(claims_ok), len(claims_ok))
    word = verdict_word(verdict)
    why = ("the KHA's three components match exact KPCA's (every |cos| > "
           f"{SIMILARITY['min_abs_cos']:g}, eigenvalues within "
           f"{100 * lam_err:.1f} %) for both kernels, so the contours are visually the same" if verdict == "reproduced" else
           f"some KHA component is not within |cos| {SIMILARITY['min_abs_cos']:g} of the exact one at the best gain "
           "of the grid")
    lines += ["", f"**Verdict:** {word} — {why}" + (" (quick run: numbers mean nothing)." if quick else ".")]
    claims = [SIMILARITY.result(verdict, f"figures/{fig_name}")]
    return {"markdown": "\n".join(lines), "claims": claims, "seconds": time.perf_counter() - t0}

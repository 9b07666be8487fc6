"""Seed 003 Fig. 3-4, 8, 10: autoencoder KPCA against PCA and KPCA, from the committed bench run.

`bench/akpca.py` at its full size takes about 4 minutes on 2 cores (its ``--quick`` is too small to mean
anything), and rerunning it would add that
to `make paper`'s 2 to 5 minutes, on a machine it shares with seed 002's experiments; this module reads its
committed result, bench/results/akpca.json (and akpca.png), and states the run that made them.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
TITLE = "Seed 003 Fig. 3-4, 8, 10: autoencoder KPCA on digits (committed bench run)"
SEED = "003"
FOUR = ("linear_pca", "kpca_gradient", "akpca", "ds-akpca")  # the paper's four methods
NAMES = {"linear_pca": "PCA", "kpca_gradient": "KPCA (gradient pre-image)", "kpca_learned": "KPCA (learned map)",
         "akpca": "AKPCA", "ds-akpca": "DS-AKPCA"}


def run(figures: Path, quick: bool = False) -> dict:
    t0 = time.perf_counter()
    doc = json.loads((RESULTS / "akpca.json").read_text())
    shutil.copyfile(RESULTS / "akpca.png", figures / "003_akpca.png")
    env = doc["environment"]
    by = {(r["k"], r["method"]): r for r in doc["results"]}
    ks = doc["ks"]
    table = "\n".join(f"| {k} | " + " | ".join(f"{by[k, m]['test_error']:.3g} ({by[k, m]['train_error']:.2g})"
                                               for m in NAMES) + " |" for k in ks)
    best_test = {k: min(FOUR, key=lambda m: by[k, m]["test_error"]) for k in ks}
    pca_beats_kpca = [k for k in ks if by[k, "linear_pca"]["test_error"] <= by[k, "kpca_gradient"]["test_error"]]
    gauss_best = {(k, i): min(FOUR, key=lambda m: by[k, m]["denoise"]["gaussian"][i]) for k in (8, 16) for i in range(3)}
    speckle_best = {(k, i): min(FOUR, key=lambda m: by[k, m]["denoise"]["speckle"][i]) for k in (8, 16) for i in range(3)}
    ak_best = [k for k in ks if best_test[k] == "akpca"]
    g_ak = [f"k {k}, sigma {doc['noise']['gaussian_sigma_paper'][i]}" for (k, i), m in gauss_best.items() if m == "akpca"]
    s_auto = [f"k {k}, p {doc['noise']['speckle_p'][i]}" for (k, i), m in speckle_best.items() if m in ("akpca", "ds-akpca")]
    md = f"""**Claims (seed 003 §6).** On MNIST (14 x 14 and 28 x 28, 3000 or 35000 training digits): AKPCA
reconstructs held-out digits best of PCA, KPCA (degree-2 polynomial kernel with a pre-image), AKPCA and
DS-AKPCA at every number of components (Fig. 3-4), and PCA beats KPCA with a pre-image; AKPCA denoises Gaussian
noise best "so long as the standard deviation of the noise was small to moderately large" (Fig. 8); under
speckle noise both autoencoders beat PCA and KPCA on 14 x 14 digits "under all conditions studied" (Fig. 10).

**Not rerun here.** `bench/akpca.py` at full size takes about 4 minutes on this 2-core machine
({doc['seconds']:.0f} s in the committed run) and its `--quick` is too small to mean anything, so `make paper`
(2 to 5 minutes without it) reads its committed result: bench/results/akpca.json, run at commit `{env['commit'][:10]}` on {env['utc']}
({env['cpu']}, {env['available_cores']} cores, load average {doc['load_average'][0]:.1f}). Rerun it with
`python bench/akpca.py`. Its setup (README, *Autoencoder KPCA*): scikit-learn's digits for MNIST, 100 per
class for training ({doc['train']} rows, 8 x 8 = {doc['features']} pixels, no pooling), the other
{doc['held_out']} held out; k in {ks} for the paper's 5 to 25; {doc['passes']} passes, blocks of
{doc['block_size']}, seed {doc['seed']}; step rule: {doc['step_rule']} (eta0 1, the library default, where the
paper hand-tuned a step per data set; not tuned here). Gaussian noise sigma {doc['noise']['gaussian_sigma_paper']}
on data divided by the largest row norm as the paper's; speckle p {doc['noise']['speckle_p']}. Errors are
relative, sum ||x_hat - x||^2 / sum ||x||^2 (the paper plots the unnormalised sum).

Held-out error (training error in brackets):

| k | {' | '.join(NAMES.values())} |
|---|{'---|' * len(NAMES)}
{table}

![bench/akpca.py: reconstruction and denoising error against k](figures/003_akpca.png)

**Verdict:** partly reproduced -- AKPCA has the lowest held-out error of the paper's four methods at k =
{', '.join(map(str, ak_best)) or 'none'} (not at every k: without centring, and with a decoder that returns one
scaled eigenvector, it is behind PCA at small k); PCA beats KPCA with the gradient pre-image at k =
{', '.join(map(str, pca_beats_kpca))}; AKPCA is the best Gaussian denoiser of the four at
{'; '.join(g_ak) or 'no setting'}; an autoencoder is the best speckle denoiser at {'; '.join(s_auto) or 'no setting'}
(the paper: every setting on 14 x 14). Why they differ is not settled (README): 64 pixels to 196, 1000 training
rows to 3000, the step rule is not the paper's, 30 passes do not finish the descent, one seed.
"""
    fig = "figures/003_akpca.png"
    claims = [
        {"claim": "Fig. 3-4: AKPCA reconstructs best of PCA, KPCA, AKPCA, DS-AKPCA at every k", "figure": fig,
         "verdict": "reproduced" if len(ak_best) == len(ks) else ("partly" if ak_best else "not reproduced")},
        {"claim": "§6: PCA beats KPCA with a pre-image", "figure": fig,
         "verdict": "reproduced" if len(pca_beats_kpca) == len(ks) else ("partly" if pca_beats_kpca else "not reproduced")},
        {"claim": "Fig. 8: AKPCA best Gaussian denoiser for small to moderate noise", "figure": fig,
         "verdict": "partly" if g_ak else "not reproduced"},
        {"claim": "Fig. 10: both autoencoders beat PCA and KPCA under speckle noise", "figure": fig,
         "verdict": "partly" if s_auto else "not reproduced"},
    ]
    return {"markdown": md, "claims": claims, "seconds": time.perf_counter() - t0}

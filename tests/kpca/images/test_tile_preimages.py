"""kpca.images.tile_preimages: every rank and method from one tile's shared projections and kernel values
equals the pre-images computed for that candidate alone (`kpca.images.denoising.preimages` of the leading
model), to rounding (issue 55)."""

import numpy as np
import pytest

from kpca.images.denoising import fit_patch_model, leading, preimages, training_rows
from kpca.images.patches import extract_patches
from kpca.images.tile_preimages import TilePreimages

CANDIDATES = [(1, "fixed-point", {"n_iter": 1}), (6, "fixed-point", {"n_iter": 1}), (6, "fixed-point", {"n_iter": 3}),
              (6, "kwok-tsang", {"n_neighbors": 7}), (12, "kwok-tsang", {}), (6, "gradient", {"n_iter": 3}),
              (3, "learned", {}), (12, "learned", {})]


@pytest.fixture(scope="module")
def patches():
    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 1.0, 20)
    clean = 0.5 + 0.4 * np.sin(6 * x)[:, None] * np.cos(4 * x)[None, :]
    P, _ = extract_patches(clean + rng.normal(0.0, 0.1, clean.shape), 5, 1)
    return P  # 256 patches of 25 values


@pytest.mark.parametrize("max_rows", [400, 150], ids=["all-patches-train", "a-sample-trains"])
def test_every_candidate_equals_its_own_preimages(patches, max_rows):
    training = training_rows(np.arange(patches.shape[0]), max_rows, seed=3)  # positions in the tile's patches
    model = fit_patch_model(patches[training], sigma=0.1 * 1.6 * np.sqrt(50), n_components=12)
    tile = TilePreimages(model, patches, training)
    for rank, method, options in CANDIDATES:
        want = preimages(leading(model, rank), patches, method, options)
        got = tile.preimages(rank, method, options, n_samples=max_rows)
        scale = float(np.abs(want).max())
        assert np.abs(got - want).max() <= 1e-10 * scale, (rank, method, options)
        assert not np.allclose(got, patches), "the candidate moved the patches"


def test_an_unknown_method_names_the_field(patches):
    model = fit_patch_model(patches[:60], sigma=1.0, n_components=3)
    with pytest.raises(ValueError, match="method"):
        TilePreimages(model, patches[:60]).preimages(2, "bogus")


def test_tiles_on_two_threads_give_the_one_thread_answer_and_report_in_order():
    """`kpca.images.denoising.denoise_candidates` runs its tiles on the caller's cores (`kpca.images.patch_bands.map_ordered`); the
    answer does not depend on how many, and progress is reported tile by tile, in order."""
    from kpca.images.denoising import Candidate, PatchSettings, denoise_candidates

    rng = np.random.default_rng(2)
    y, x = np.mgrid[0:40, 0:40] / 39.0
    noisy = 0.5 + 0.3 * np.sin(5 * x) * np.cos(3 * y) + rng.normal(0.0, 0.1, (40, 40))
    settings = PatchSettings(patch=5, stride=2, tile=16)
    candidates = [Candidate(2, "fixed-point", {"n_iter": 1}), Candidate(4, "kwok-tsang", {"n_neighbors": 5})]
    reports = {1: [], 2: []}
    answers = {threads: denoise_candidates(noisy, settings, 0.1, candidates, threads=threads,
                                           report=lambda done, total, t=threads: reports[t].append((done, total)))
               for threads in (1, 2)}
    for key in answers[1]:
        assert np.array_equal(answers[1][key], answers[2][key]), key
    assert reports[1] == reports[2] == [(k, 4) for k in range(1, 5)]  # 2 x 2 tiles of about 16 pixels


def test_a_report_that_stops_leaves_the_remaining_tiles_undone():
    from kpca.errors import Stopped
    from kpca.images.patch_bands import map_ordered

    started = []

    def work(k):
        started.append(k)
        return {"k": k}

    got = []
    with pytest.raises(Stopped):
        for out in map_ordered(work, 50, threads=2):
            got.append(out["k"])
            if len(got) == 3:
                raise Stopped("asked to stop")
    assert got == [0, 1, 2]
    assert len(started) <= 3 + 2 * 2, "at most two tiles per thread run ahead of the one read"
    assert sorted(started) == list(range(len(started)))


def test_the_fixed_point_step_past_the_slopes_budget_is_the_same_step(patches, monkeypatch):
    """Where a tile's kernel slopes would not fit in `SLOPES_ENTRIES`, the step is computed block by block
    from the kernel rows (`kpca.preimage._objective.kernel_moments`): the same step."""
    import kpca.images.tile_preimages as tile_preimages

    model = fit_patch_model(patches[:150], sigma=0.1 * 1.6 * np.sqrt(50), n_components=6)
    want = preimages(leading(model, 4), patches, "fixed-point", {"n_iter": 1})
    monkeypatch.setattr(tile_preimages, "SLOPES_ENTRIES", 10)
    got = TilePreimages(model, patches).preimages(4, "fixed-point", {"n_iter": 1})
    assert np.abs(got - want).max() <= 1e-10 * np.abs(want).max()


def test_a_model_of_other_patches_serves_every_candidate_from_its_own_projections(patches):
    """Issue 55: the tuner's probe denoises stride-2 patches through a model fitted on a sample of the
    stride-1 ones, so the model's rows are not among the patches; the learned map reads their projections
    from the model (``AK = A K'``, ``training_components``) and every candidate still equals its own
    pre-images."""
    model = fit_patch_model(patches[::2], sigma=0.1 * 1.6 * np.sqrt(50), n_components=12)
    others = patches[1::2]
    tile = TilePreimages(model, others, training_components=model.AK.T)
    for rank, method, options in CANDIDATES:
        want = preimages(leading(model, rank), others, method, options)
        got = tile.preimages(rank, method, options, n_samples=model.rows.n_rows)
        assert np.abs(got - want).max() <= 1e-10 * float(np.abs(want).max()), (rank, method, options)
    np.testing.assert_allclose(model.AK.T, model.project(patches[::2]), atol=1e-10)

"""kpca.images.tile_preimages: every rank and method from one tile's shared projections and kernel values
equals the pre-images computed for that candidate alone (`kpca.images.denoising.preimages` of the leading
model), to rounding (issue 55)."""

import numpy as np
import pytest

from kpca.images.denoising import fit_patch_model, leading, positions, preimages, training_rows
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
    indices = np.arange(patches.shape[0])
    training = training_rows(indices, max_rows, seed=3)
    model = fit_patch_model(patches[training], sigma=0.1 * 1.6 * np.sqrt(50), n_components=12)
    tile = TilePreimages(model, patches, positions(indices, training))
    for rank, method, options in CANDIDATES:
        want = preimages(leading(model, rank), patches, method, options)
        got = tile.preimages(rank, method, options, n_samples=max_rows)
        scale = float(np.abs(want).max())
        assert np.abs(got - want).max() <= 1e-10 * scale, (rank, method, options)
        assert not np.allclose(got, patches), "the candidate moved the patches"


def test_positions_are_found_only_for_a_subset():
    indices = np.array([2, 5, 9, 14])
    assert positions(indices, np.array([5, 14])).tolist() == [1, 3]
    assert positions(indices, np.array([5, 6])) is None
    assert positions(indices, np.array([20])) is None


def test_an_unknown_method_names_the_field(patches):
    model = fit_patch_model(patches[:60], sigma=1.0, n_components=3)
    with pytest.raises(ValueError, match="method"):
        TilePreimages(model, patches[:60]).preimages(2, "bogus")

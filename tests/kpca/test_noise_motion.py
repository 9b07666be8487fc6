import numpy as np
import pytest

from kpca.noise import gaussian_noise, speckle_noise
from paper.motion import BONES, JOINT_NAMES, PARENTS, bone_length_error, bone_lengths, walking_motion

# ---------------------------------------------------------------- noise


def test_gaussian_noise_statistics(rng):
    X = np.full((400, 500), 0.5)
    noisy = gaussian_noise(X, 0.04, rng)
    assert noisy.shape == X.shape and noisy.dtype == np.float64
    eps = noisy - X
    # 200,000 draws: standard error of the mean 9e-5, of the std about 6e-5.
    assert abs(eps.mean()) < 5e-4
    assert eps.std() == pytest.approx(0.04, rel=0.01)
    assert np.all(X == 0.5)  # input untouched


def test_gaussian_noise_options(rng):
    X = rng.random((50, 50))
    np.testing.assert_array_equal(gaussian_noise(X, 0.0, rng), X)
    clipped = gaussian_noise(X, 0.5, rng, clip=(0.0, 1.0))
    assert clipped.min() == 0.0 and clipped.max() == 1.0
    assert gaussian_noise(X, 0.5, rng).min() < 0.0  # no clipping by default
    assert gaussian_noise(X.astype(np.float32), 0.1, rng).dtype == np.float32
    assert gaussian_noise(np.zeros(4, dtype=np.uint8), 0.1, rng).dtype == np.float64


def test_gaussian_noise_is_reproducible_from_the_generator():
    X = np.zeros(10)
    a = gaussian_noise(X, 1.0, np.random.default_rng(5))
    b = gaussian_noise(X, 1.0, np.random.default_rng(5))
    c = gaussian_noise(X, 1.0, np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("p", [0.0, 0.2, 0.4, 1.0])
def test_speckle_fraction(p, rng):
    X = rng.random((300, 300)) + 0.1  # no zeros to begin with
    noisy = speckle_noise(X, p, rng)
    assert noisy.dtype == X.dtype and noisy.shape == X.shape
    dropped = noisy == 0
    # 90,000 draws: standard error of the fraction <= 1.7e-3.
    assert dropped.mean() == pytest.approx(p, abs=0.01)
    np.testing.assert_array_equal(noisy[~dropped], X[~dropped])  # the rest is unchanged
    assert X.min() >= 0.1  # input untouched


def test_speckle_keeps_integer_dtype(rng):
    X = np.full((10, 10, 3), 200, dtype=np.uint8)
    out = speckle_noise(X, 0.5, rng)
    assert out.dtype == np.uint8 and set(np.unique(out)) == {0, 200}


def test_noise_validation(rng):
    X = np.zeros(3)
    with pytest.raises(ValueError, match="sigma"):
        gaussian_noise(X, -0.1, rng)
    with pytest.raises(ValueError, match="sigma"):
        gaussian_noise(X, float("nan"), rng)
    with pytest.raises(ValueError, match="clip"):
        gaussian_noise(X, 0.1, rng, clip=(1.0, 0.0))
    with pytest.raises(ValueError, match="p"):
        speckle_noise(X, 1.5, rng)
    with pytest.raises(ValueError, match="p"):
        speckle_noise(X, -0.01, rng)
    with pytest.raises(TypeError, match="rng"):
        gaussian_noise(X, 0.1, 42)
    with pytest.raises(TypeError, match="rng"):
        speckle_noise(X, 0.1, None)


# ---------------------------------------------------------------- motion


def test_walking_motion_shapes_and_skeleton():
    frames, names = walking_motion(120, fps=60)
    assert frames.shape == (120, 48) and frames.dtype == np.float64
    assert names == JOINT_NAMES and len(names) == 16
    for joint in ("pelvis", "head", "l_knee", "r_ankle", "l_wrist", "r_shoulder"):
        assert joint in names
    assert len(BONES) == 15 and PARENTS[0] == -1
    assert all(PARENTS[j] < j for j in range(1, 16))
    joints = frames.reshape(120, 16, 3)
    z = {name: joints[:, names.index(name), 2] for name in names}
    assert np.all(z["head"] > z["neck"]) and np.all(z["neck"] > z["pelvis"])
    assert np.all(z["pelvis"] > z["l_knee"]) and np.all(z["pelvis"] > z["r_knee"])
    assert z["l_ankle"].min() > 0.0 and z["l_ankle"].min() < 0.15  # feet reach the floor
    y = joints[:, :, 1]
    assert np.all(y[:, names.index("l_hip")] > y[:, names.index("r_hip")])  # y is the walker's left


def test_walking_motion_is_deterministic_given_the_seed():
    a, _ = walking_motion(50, rng=3)
    b, _ = walking_motion(50, rng=np.random.default_rng(3))
    c, _ = walking_motion(50, rng=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert np.abs(a - c).max() < 0.5  # the seed only jitters


def test_walking_motion_moves_forward_unless_in_place():
    frames, names = walking_motion(240, fps=60, jitter=False)
    pelvis_x = frames[:, 3 * names.index("pelvis")]
    speed = np.diff(pelvis_x) * 60
    np.testing.assert_allclose(speed, speed[0], rtol=1e-9)  # constant
    assert 1.0 < speed[0] < 1.8  # m/s, a normal walk
    still, _ = walking_motion(240, fps=60, jitter=False, in_place=True)
    assert np.all(still[:, 3 * names.index("pelvis")] == 0.0)
    moved = frames.copy()
    moved[:, 0::3] -= pelvis_x[:, None]
    np.testing.assert_allclose(moved, still, atol=1e-12)


def test_in_place_motion_is_periodic():
    # Without jitter a 1.1 s cycle at 60 fps is exactly 66 frames.
    frames, _ = walking_motion(300, fps=60, jitter=False, in_place=True)
    np.testing.assert_allclose(frames[66:], frames[:-66], atol=1e-12)
    # Half a cycle is not a period: the legs are swapped.
    assert np.abs(frames[33:] - frames[:-33]).max() > 0.3
    # With jitter the period is within 3% of 66 frames and the motion still repeats.
    frames, _ = walking_motion(300, fps=60, rng=7, in_place=True)
    lags = np.arange(55, 78)
    mismatch = [np.abs(frames[lag:] - frames[:-lag]).max() for lag in lags]
    best = lags[int(np.argmin(mismatch))]
    assert abs(best - 66) <= 2
    # Within a frame of the period, joints move < 5 cm per frame at 60 fps.
    assert min(mismatch) < 0.05
    assert min(mismatch) < 0.2 * max(mismatch)


def test_gait_phases():
    frames, names = walking_motion(66, fps=60, jitter=False, in_place=True)
    joints = frames.reshape(66, 16, 3)
    x = {name: joints[:, names.index(name), 0] for name in names}
    # Arms swing opposite to the legs: left wrist forward when the left ankle is back.
    legs = x["l_ankle"] - x["r_ankle"]
    arms = x["l_wrist"] - x["r_wrist"]
    assert np.corrcoef(legs, arms)[0, 1] < -0.8
    # Knee flexion (angle between thigh and shank) spans roughly 0 to 60 degrees.
    hip, knee, ankle = (joints[:, names.index(n)] for n in ("r_hip", "r_knee", "r_ankle"))
    thigh, shank = knee - hip, ankle - knee
    cos = np.einsum("ij,ij->i", thigh, shank) / np.linalg.norm(thigh, axis=1) / np.linalg.norm(shank, axis=1)
    flexion = np.degrees(np.arccos(np.clip(cos, -1, 1)))
    assert flexion.min() < 10 and 50 < flexion.max() < 65
    # Hip flexion about +-25 degrees.
    hip_angle = np.degrees(np.arctan2(thigh[:, 0], -thigh[:, 2]))
    assert 20 < hip_angle.max() < 30 and -30 < hip_angle.min() < -20
    # Pelvis bobs twice per cycle.
    pelvis_z = joints[:, 0, 2]
    assert 0.03 < np.ptp(pelvis_z) < 0.05
    assert np.sum(np.diff(np.sign(np.diff(np.r_[pelvis_z, pelvis_z[:2]]))) < 0) == 2  # two maxima


def test_bone_lengths_constant_in_clean_motion():
    frames, _ = walking_motion(200, rng=1)
    lengths = bone_lengths(frames)
    assert lengths.shape == (200, 15)
    assert np.ptp(lengths, axis=0).max() < 1e-12
    assert lengths.min() > 0.1 and lengths.max() < 0.5
    assert bone_length_error(frames, frames) == 0.0
    assert bone_length_error(frames, frames[0]) < 1e-14


def test_noise_increases_bone_length_error(rng):
    clean, _ = walking_motion(200, rng=1)
    errors = [bone_length_error(gaussian_noise(clean, sigma, rng), clean) for sigma in (0.005, 0.02, 0.05)]
    assert 0 < errors[0] < errors[1] < errors[2]
    # For sigma << bone length the length error is about sigma sqrt(2) * E|N(0,1)| = 1.13 sigma.
    assert errors[1] == pytest.approx(0.02 * np.sqrt(2) * np.sqrt(2 / np.pi), rel=0.15)


def test_motion_validation():
    with pytest.raises(ValueError, match="n_frames"):
        walking_motion(0)
    with pytest.raises(ValueError, match="fps"):
        walking_motion(10, fps=0)
    with pytest.raises(ValueError, match="cycle_seconds"):
        walking_motion(10, cycle_seconds=-1.0)
    with pytest.raises(ValueError, match="frames"):
        bone_lengths(np.zeros((3, 45)))
    frames, _ = walking_motion(10)
    with pytest.raises(ValueError, match="reference"):
        bone_length_error(frames, frames[:5])

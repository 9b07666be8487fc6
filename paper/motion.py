"""A synthetic walking figure, standing in for the CMU mocap walk of seed 000 §5.4.

Seed 000 §5.4 denoises a walking trajectory from the CMU motion-capture
database, converted to Cartesian joint positions, by adding Gaussian noise to
the frames and reconstructing them from 25 kernel principal components. We
cannot download it, so `walking_motion` synthesises a comparable signal: an
articulated skeleton of 16 joints whose joint angles follow periodic gait
curves, turned into 3-D joint positions by forward kinematics with fixed bone
lengths. Each frame is one row ``(x_0, y_0, z_0, x_1, ..., z_15)``, metres,
in a world frame with x forward (walking direction), y to the walker's left
and z up.

Gait model, with ``phi`` the right leg's phase (the left leg's is ``phi + pi``),
advancing by ``2 pi`` per gait cycle (two steps):

* hip flexion ``A_hip sin(phi)``, ``A_hip`` = 25 deg (positive: thigh forward);
  swing is the half-cycle where the thigh moves forward, ``cos(phi) > 0``;
* knee flexion between about 5 and 60 deg: a large bump in early swing
  (peak at ``phi = -0.4``) and a small loading bump after heel strike;
* arm swing ``A_arm`` = 18 deg opposite to the leg of the same side, elbow
  flexion 12 to 27 deg (more when the arm is forward), arms slightly abducted;
* pelvis: bob ``2 cm cos(2 phi)`` (highest at mid-stance), lateral sway
  ``2 cm cos(phi)`` over the stance leg, yaw ``5 deg sin(phi)``; thorax
  counter-rotates (net yaw ``-6 deg sin(phi)``) and leans 6 deg forward;
* forward speed ``4 L sin(A_hip) / T`` (leg length L = 0.88 m, cycle T), the
  speed at which a stance foot would stay put; feet still slide a little,
  since no ground contact is enforced.

Rotations only ever act on rest-pose bone vectors, so every bone keeps its
length exactly (to rounding) in every frame; `bone_length_error` measures how
far a (noisy or denoised) motion is from that physical constraint.

Pure numpy. Test data, not numerics: it lives in paper/ because only the paper's experiment
(paper/exp_000_fig4_motion.py) and the tests (tests/kpca/test_noise_motion.py, test_motion_denoise.py)
draw their walks from here.
"""

from __future__ import annotations

import numpy as np

# (name, parent index, bone vector from the parent in the parent's rest frame, metres)
_SKELETON = (
    ("pelvis", -1, (0.0, 0.0, 0.0)),
    ("spine", 0, (0.0, 0.0, 0.22)),
    ("neck", 1, (0.0, 0.0, 0.30)),
    ("head", 2, (0.0, 0.0, 0.20)),
    ("l_shoulder", 2, (0.0, 0.18, -0.04)),
    ("l_elbow", 4, (0.0, 0.0, -0.29)),
    ("l_wrist", 5, (0.0, 0.0, -0.26)),
    ("r_shoulder", 2, (0.0, -0.18, -0.04)),
    ("r_elbow", 7, (0.0, 0.0, -0.29)),
    ("r_wrist", 8, (0.0, 0.0, -0.26)),
    ("l_hip", 0, (0.0, 0.09, -0.07)),
    ("l_knee", 10, (0.0, 0.0, -0.45)),
    ("l_ankle", 11, (0.0, 0.0, -0.43)),
    ("r_hip", 0, (0.0, -0.09, -0.07)),
    ("r_knee", 13, (0.0, 0.0, -0.45)),
    ("r_ankle", 14, (0.0, 0.0, -0.43)),
)

JOINT_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _SKELETON)
"""Names of the 16 joints, in column order (joint j is columns 3j, 3j+1, 3j+2)."""

PARENTS: tuple[int, ...] = tuple(parent for _, parent, _ in _SKELETON)
"""Parent joint index of each joint (-1 for the pelvis, the root)."""

BONES: tuple[tuple[int, int], ...] = tuple((parent, j) for j, parent in enumerate(PARENTS) if parent >= 0)
"""The 15 bones as (parent, child) joint indices."""

N_JOINTS = len(_SKELETON)
_OFFSETS = np.array([offset for _, _, offset in _SKELETON])
_LEG_LENGTH = 0.45 + 0.43
_PELVIS_HEIGHT = 1.0


def _rot_x(angle):
    c, s, o, z = np.cos(angle), np.sin(angle), np.ones_like(angle), np.zeros_like(angle)
    return np.stack([o, z, z, z, c, -s, z, s, c], axis=-1).reshape(angle.shape + (3, 3))


def _rot_y(angle):
    c, s, o, z = np.cos(angle), np.sin(angle), np.ones_like(angle), np.zeros_like(angle)
    return np.stack([c, z, s, z, o, z, -s, z, c], axis=-1).reshape(angle.shape + (3, 3))


def _rot_z(angle):
    c, s, o, z = np.cos(angle), np.sin(angle), np.ones_like(angle), np.zeros_like(angle)
    return np.stack([c, -s, z, s, c, z, z, z, o], axis=-1).reshape(angle.shape + (3, 3))


def _bump(phase, centre, concentration):
    """Smooth periodic bump, 1 at ``centre``, ``exp(-2 concentration)`` opposite it."""
    return np.exp(concentration * (np.cos(phase - centre) - 1.0))


def _knee_flexion(phase):
    """Knee flexion (radians) of a leg at its gait phase: swing peak ~60 deg, loading bump."""
    return np.deg2rad(2.0 + 58.0 * _bump(phase, -0.4, 1.5) + 10.0 * _bump(phase, np.pi / 2 + 0.6, 8.0))


def _forward_kinematics(root_position, local_rotations):
    """Joint positions (n, J, 3) from the root path (n, 3) and local rotations (n, J, 3, 3).

    The rotation at joint j turns the bone vectors of j's children:
    ``G_j = G_parent(j) L_j`` and ``p_j = p_parent(j) + G_parent(j) offset_j``.
    """
    n = root_position.shape[0]
    positions = np.empty((n, N_JOINTS, 3))
    global_rot = np.empty((n, N_JOINTS, 3, 3))
    positions[:, 0] = root_position
    global_rot[:, 0] = local_rotations[:, 0]
    for j in range(1, N_JOINTS):
        parent = PARENTS[j]
        positions[:, j] = positions[:, parent] + global_rot[:, parent] @ _OFFSETS[j]
        global_rot[:, j] = global_rot[:, parent] @ local_rotations[:, j]
    return positions


def walking_motion(
    n_frames: int = 400,
    fps: float = 60.0,
    rng: int | np.random.Generator = 0,
    *,
    in_place: bool = False,
    cycle_seconds: float = 1.1,
    jitter: bool = True,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Joint positions of a synthetic walking figure, one frame per row.

    Parameters
    ----------
    n_frames : int
        Number of frames, ``>= 1``.
    fps : float
        Frames per second (CMU mocap is captured at 120; 60 keeps frames distinct).
    rng : int or numpy.random.Generator
        Seed or generator for the jitter; the motion is a deterministic
        function of it.
    in_place : bool
        If True, the pelvis does not advance along x (its x is 0 throughout),
        as on a treadmill; the motion is then periodic with the gait cycle,
        which is what a denoising experiment wants.
    cycle_seconds : float
        Duration of a gait cycle (two steps) before jitter, ``> 0``.
    jitter : bool
        If True the generator perturbs the cycle duration by up to +-3 %,
        the hip amplitude (hence stride length and speed) by up to +-5 % and
        the initial phase by up to +-0.25 rad, uniformly. If False, the cycle
        is exactly `cycle_seconds`, ``A_hip`` is 25 deg, the right leg starts
        at phase 0 (mid-swing) and `rng` is not used.

    Returns
    -------
    frames : ndarray of shape (n_frames, 3 * 16), float64
        Row t holds ``(x, y, z)`` of every joint at time ``t / fps``, joints
        in the order of `joint_names`, metres.
    joint_names : tuple of 16 str
        `JOINT_NAMES`: pelvis, spine, neck, head, left and right shoulder,
        elbow, wrist, then left and right hip, knee, ankle.

    Cost: O(n_frames J) small matrix products.
    """
    if int(n_frames) != n_frames or n_frames < 1:
        raise ValueError(f"n_frames: must be an integer >= 1, got {n_frames}")
    if not fps > 0:
        raise ValueError(f"fps: must be > 0, got {fps}")
    if not cycle_seconds > 0:
        raise ValueError(f"cycle_seconds: must be > 0, got {cycle_seconds}")
    n_frames = int(n_frames)
    cycle, hip_amplitude, phase0 = float(cycle_seconds), np.deg2rad(25.0), 0.0
    if jitter:
        u = np.random.default_rng(rng).uniform(-1.0, 1.0, size=3)
        cycle *= 1.0 + 0.03 * u[0]
        hip_amplitude *= 1.0 + 0.05 * u[1]
        phase0 = 0.25 * u[2]

    time = np.arange(n_frames) / fps
    right = 2.0 * np.pi * time / cycle + phase0  # right leg's phase
    left = right + np.pi
    sin_r = np.sin(right)

    arm_amplitude = np.deg2rad(18.0)
    pelvis_yaw = np.deg2rad(5.0) * sin_r
    thorax_yaw = -np.deg2rad(6.0) * sin_r
    lean = np.deg2rad(6.0)
    abduction = np.deg2rad(8.0)
    swing_left_arm = arm_amplitude * sin_r  # opposite to the left leg, whose flexion is -A sin(phi)
    swing_right_arm = -arm_amplitude * sin_r

    def elbow(swing):
        return np.deg2rad(12.0 + 15.0 * (1.0 + swing / arm_amplitude) / 2.0)

    zero = np.zeros(n_frames)
    identity = np.broadcast_to(np.eye(3), (n_frames, 3, 3))
    local = np.empty((n_frames, N_JOINTS, 3, 3))
    local[:] = identity[:, None]
    local[:, 0] = _rot_z(pelvis_yaw)
    local[:, 1] = _rot_z(thorax_yaw - pelvis_yaw) @ _rot_y(zero + lean)
    local[:, 2] = _rot_y(zero - lean)  # head and shoulder girdle upright again
    local[:, 4] = _rot_x(zero + abduction) @ _rot_y(-swing_left_arm)
    local[:, 5] = _rot_y(-elbow(swing_left_arm))
    local[:, 7] = _rot_x(zero - abduction) @ _rot_y(-swing_right_arm)
    local[:, 8] = _rot_y(-elbow(swing_right_arm))
    # R_y(-a) turns a downward bone forward by a, R_y(+a) backward.
    local[:, 10] = _rot_y(-hip_amplitude * np.sin(left))
    local[:, 11] = _rot_y(_knee_flexion(left))
    local[:, 13] = _rot_y(-hip_amplitude * sin_r)
    local[:, 14] = _rot_y(_knee_flexion(right))

    speed = 4.0 * _LEG_LENGTH * np.sin(hip_amplitude) / cycle
    root = np.stack(
        [
            zero if in_place else speed * time,
            0.02 * np.cos(right),
            _PELVIS_HEIGHT + 0.02 * np.cos(2.0 * right),
        ],
        axis=-1,
    )
    positions = _forward_kinematics(root, local)
    return positions.reshape(n_frames, 3 * N_JOINTS), JOINT_NAMES


def bone_lengths(frames: np.ndarray) -> np.ndarray:
    """Length of each bone in each frame.

    Parameters
    ----------
    frames : ndarray of shape (..., 3 * 16)

    Returns
    -------
    ndarray of shape (..., 15), bones in the order of `BONES`.
    """
    frames = np.asarray(frames, dtype=np.float64)
    if frames.shape[-1] != 3 * N_JOINTS:
        raise ValueError(f"frames: expected {3 * N_JOINTS} columns (16 joints x 3), got {frames.shape[-1]}")
    joints = frames.reshape(frames.shape[:-1] + (N_JOINTS, 3))
    parents = np.array([b[0] for b in BONES])
    children = np.array([b[1] for b in BONES])
    return np.linalg.norm(joints[..., children, :] - joints[..., parents, :], axis=-1)


def bone_length_error(frames: np.ndarray, reference: np.ndarray) -> float:
    """Mean absolute deviation of bone lengths from those of a clean reference.

    ``mean_{t, b} | len_b(frames[t]) - len_b(reference[t]) |``, metres. The
    reference is either the clean motion frame for frame (same shape as
    `frames`) or a single clean frame of shape (3 * 16,), broadcast over all
    frames; the clean skeleton's bone lengths are the same in every frame,
    so both give the same answer up to rounding. Additive noise lengthens
    bones on average, and a good denoiser should bring this back near zero.

    Parameters
    ----------
    frames : ndarray of shape (n, 3 * 16) or (3 * 16,)
    reference : ndarray of shape (n, 3 * 16) or (3 * 16,)
    """
    measured = bone_lengths(frames)
    clean = bone_lengths(reference)
    try:
        deviation = np.abs(measured - clean)
    except ValueError:
        raise ValueError(
            f"reference: shape {np.shape(reference)} does not match frames {np.shape(frames)} "
            "(give the clean motion frame for frame, or one clean frame)"
        ) from None
    return float(deviation.mean())

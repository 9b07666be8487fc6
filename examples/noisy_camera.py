"""The README's first five minutes: a noisy photograph to denoise, and a score for the result.

    python examples/noisy_camera.py                      # writes camera-clean.png and camera-noisy.png
    python examples/noisy_camera.py camera-denoised.png  # SNR of the noisy and the denoised image (dB)

The photograph is scikit-image's bundled ``camera`` (nothing is downloaded),
reduced to 256 x 256 by 2 x 2 block means; its top-left 128 x 128 quarter
gets Gaussian noise of standard deviation 0.1 (pixels in [0, 1], seed 0), as
in ``bench/denoise_image.py`` (seed 000's multipatch denoising).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image
from skimage import data

from kpca.images.patches import downscale_mean, snr_db, split_quadrants
from kpca.noise import gaussian_noise

CLEAN, NOISY = Path("camera-clean.png"), Path("camera-noisy.png")


def _read(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("L"), dtype=np.float64) / 255.0


def _write(image: np.ndarray, path: Path) -> None:
    Image.fromarray(np.clip(np.round(image * 255), 0, 255).astype(np.uint8)).save(path)


def make() -> None:
    """Write the clean and the noisy 128 x 128 image."""
    clean = split_quadrants(downscale_mean(data.camera() / 255.0, 2))[0]
    _write(clean, CLEAN)
    _write(gaussian_noise(clean, 0.1, np.random.default_rng(0)), NOISY)
    print(f"wrote {CLEAN} and {NOISY} (128 x 128, noise 0.1)")


def score(denoised: Path) -> None:
    """Print the SNR (dB) of the noisy and of the ``denoised`` image against the clean one."""
    clean = _read(CLEAN)
    for name, path in (("noisy", NOISY), ("denoised", denoised)):
        print(f"{name:9s} {path}: SNR {snr_db(clean, _read(path)):.1f} dB")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        score(Path(sys.argv[1]))
    else:
        make()

"""The image wing of `kpca`: denoising and hyperresolution of images through kernel PCA models of
their patches.

It stands on the core (`kpca.fitting`, `kpca.model`, `kpca.preimage`, `kpca.rows`, `kpca.solvers`) and
nothing in the core imports it (`tests/test_structure.py`). Modules, each imported by name:
`patches` (patches, quadrants, rescaling, unit range, SNR, a request's patch plan), `denoising` (a
model per tile, pre-images), `noise_level` (the noise estimate), `tuning` (parameters chosen by a
recorrupted risk estimate), `wiener` and `second_stage` (the Wiener second stage, kept where it
helps), `hyperresolution` (reconstruction constrained to reproduce the input).
"""

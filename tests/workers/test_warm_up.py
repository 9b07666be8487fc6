"""Workers load the default fit's and serving's jitted code when they start (`workers.plugins.WarmKernels`)."""

from tests.waiting import wait_until
from workers import Backend


def warm_state(dask_worker) -> str | None:
    return getattr(dask_worker, "kpca_warm", None)


def compiled(precision: str) -> bool:
    """Whether this process has the Gaussian kernel's jitted panels (`kpca._tiles._panels`: a pass of kernel
    rows, what the default fit calls first) or its tile map (a block of kernel rows) compiled for
    ``precision`` tiles."""
    from kpca import _tiles

    return any(str(sig[1].dtype) == precision for sig in _tiles._panels.signatures) or any(
        str(sig[0].dtype) == precision for sig in _tiles.gaussian_tile.signatures)


def frozen() -> int:
    import gc

    return gc.get_freeze_count()


def test_a_warmed_worker_has_the_default_fits_code_before_its_first_fit(tmp_path):
    with Backend(tmp_path, n_workers=1, warm_workers=True) as backend:
        def warmed() -> bool:
            states = backend.client.run(warm_state)
            assert not any(str(s).startswith("failed") for s in states.values()), states
            return set(states.values()) == {"done"}

        wait_until(warmed, what="the worker to be warmed", interval=0.2)
        assert set(backend.client.run(compiled, "float32").values()) == {True}  # the default fit's tiles
        assert set(backend.client.run(compiled, "float64").values()) == {True}  # serving's
        assert min(backend.client.run(frozen).values()) > 10_000  # the start's objects: no full collection scans them
    with Backend(tmp_path, n_workers=1) as cold:  # not asked: nothing runs, nothing is compiled
        assert set(cold.client.run(warm_state).values()) == {None}
        assert set(cold.client.run(compiled, "float32").values()) == {False}


def test_an_api_process_loads_a_projections_code_before_its_first_request():
    """`workers.plugins.warm_projections_here`, which each API process runs at its start (with
    KPCA_WARM_WORKERS, where it projects small models itself), leaves a fresh process with serving's
    Gaussian code loaded: the first /project then loads nothing with the interpreter lock held."""
    import subprocess
    import sys

    code = ("from tests.workers.test_warm_up import compiled; from workers.plugins import warm_projections_here; "
            "print(compiled('float64'), warm_projections_here(), compiled('float64'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split() == ["False", "True", "True"], out.stderr[-2000:]

"""`client.upload_array` against the real server: chunks, resume, retries."""

import numpy as np
import pytest

from client import UploadError, upload_array


class FailingArray:
    """An array whose reads fail after ``fail_after`` chunks, like a client that crashed mid-upload."""

    def __init__(self, X, fail_after):
        self.X, self.shape, self.dtype = X, X.shape, X.dtype
        self.fail_after, self.reads = fail_after, 0

    def __getitem__(self, sl):
        self.reads += 1
        if self.reads > self.fail_after:
            raise OSError("disk went away")
        return self.X[sl]


def test_upload_is_resumed_after_an_interruption(api, rng):
    X = rng.normal(size=(1000, 7)).astype(np.float32)
    with pytest.raises(OSError):
        upload_array(api, "resumed", FailingArray(X, fail_after=3), chunk_rows=128, progress=False)
    meta = api.get("/v1/datasets/resumed").json()
    assert meta["status"] == "open" and meta["chunks"] == [0, 1, 2]
    again = FailingArray(X, fail_after=10**9)
    meta = upload_array(api, "resumed", again, chunk_rows=128, progress=True)
    assert again.reads == 5  # only chunks 3..7 were sent the second time
    assert meta["status"] == "ready" and meta["n_rows"] == 1000 and meta["chunks"] == list(range(8))


def test_upload_of_a_zarr_array_uses_its_chunking(api, rng, tmp_path):
    import zarr

    X = rng.normal(size=(500, 3))
    z = zarr.create_array(tmp_path / "x.zarr", shape=X.shape, chunks=(100, 3), dtype="float64")
    z[:] = X
    meta = upload_array(api, "from-zarr", z, dtype="float64", progress=False)
    assert meta["chunks"] == [0, 1, 2, 3, 4] and meta["n_rows"] == 500


def test_unreachable_server_is_retried_then_reported(rng):
    with pytest.raises(UploadError, match="after 3 attempts"):
        upload_array("http://127.0.0.1:9", "x", rng.normal(size=(4, 2)), retries=2, backoff=0.01, progress=False)


def test_feature_mismatch_with_an_existing_set_is_refused(api, rng):
    upload_array(api, "narrow", rng.normal(size=(10, 2)), progress=False)
    with pytest.raises(UploadError, match="2 features"):
        upload_array(api, "narrow", rng.normal(size=(10, 5)), progress=False)

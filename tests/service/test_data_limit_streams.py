"""``KPCA_MAX_DATA_BYTES`` holds while a body streams (issue 52, item 2): with a 20 MB limit a 300 MB archive
streamed without a ``Content-Length`` was written in full (the data folder peaked at 306 MB) before its 413,
and N such imports could each write up to ``KPCA_MAX_IMPORT_BYTES``. Now each piece is counted before it is
written: the 413 ``storage_full`` comes while the body streams, and the data folder, sampled all along,
never holds more than the limit, for one import or three at once; a chunk upload likewise."""

from __future__ import annotations

import os
import threading

import pytest

from tests.service.raw_http import flood, request_head

LIMIT = 20_000_000
SERVER_SETTINGS = {"max_data_bytes": LIMIT}
CAP = 300_000_000
TAR = "application/x-tar"


class FolderPeak:
    """The most bytes the data folder held, sampled in a thread until stopped."""

    def __init__(self, folder):
        self.folder, self.peak, self._stop = str(folder), 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            total = 0
            for parent, _dirs, files in os.walk(self.folder):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(parent, name)).st_size
                    except OSError:
                        continue
            self.peak = max(self.peak, total)
            self._stop.wait(0.005)

    def __enter__(self) -> "FolderPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def refused_while_streaming(server: str, path: str, content_type: str) -> int:
    answer, sent, _after = flood(server, request_head("POST" if "import" in path else "PUT", path, content_type,
                                                      "Transfer-Encoding: chunked"), CAP)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b'"code":"storage_full"' in answer, answer[:400]
    assert sent < CAP, f"all {sent} bytes were taken before the answer"
    return sent


def test_a_chunked_import_is_refused_while_it_streams_and_never_holds_more_than_the_limit(server, data_dir):
    with FolderPeak(data_dir) as folder:
        refused_while_streaming(server, "/v1/models/import", TAR)
    assert 0 < folder.peak <= LIMIT, folder.peak


def test_concurrent_chunked_imports_together_never_hold_more_than_the_limit(server, data_dir):
    with FolderPeak(data_dir) as folder:
        floods = [threading.Thread(target=refused_while_streaming, args=(server, "/v1/models/import", TAR))
                  for _ in range(3)]
        for thread in floods:
            thread.start()
        for thread in floods:
            thread.join(timeout=600)
    assert 0 < folder.peak <= LIMIT, folder.peak
    assert not list((data_dir / ".imports").glob(".upload-*"))


@pytest.fixture(scope="module")
def open_set(api) -> str:
    assert api.post("/v1/datasets", json={"name": "open", "n_features": 4, "dtype": "float64"}).status_code == 201
    return "open"


def test_a_chunked_chunk_upload_is_refused_while_it_streams(server, open_set):
    refused_while_streaming(server, f"/v1/datasets/{open_set}/chunks/0", "application/octet-stream")

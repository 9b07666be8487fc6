"""`store.running`: the requests a principal runs now, held under a lock that dies with its process, counted
from any process sharing the data folder (what ``POST /v1/denoise-image`` counts against
``KPCA_MAX_FITS_PER_KEY``)."""

from __future__ import annotations

import pytest

from store.running import RunningRequests


def test_a_held_request_is_counted_for_its_owner_only_while_held(root):
    running = RunningRequests(root)
    assert running.count("ab12") == 0
    with running.hold("ab12"):
        with running.hold("ab12"):
            assert running.count("ab12") == 2 and RunningRequests(root).count("ab12") == 2
        assert running.count("ab12") == 1
        assert running.count("cd34") == 0 and running.count(None) == 0
    assert running.count("ab12") == 0 and not list((root / "running").iterdir())


def test_a_request_whose_process_died_is_not_counted_and_its_file_is_removed(root):
    running = RunningRequests(root)
    (root / "running").mkdir()
    (root / "running" / "anonymous.0badc0ffee").write_bytes(b"")  # no lock holds it: its process is gone
    assert running.count(None) == 0
    assert not (root / "running" / "anonymous.0badc0ffee").exists()


def test_an_owner_that_is_not_a_key_id_is_refused(root):
    with pytest.raises(ValueError):
        RunningRequests(root).count("../x")

"""An image job's progress written by its worker (`workers.image_jobs.JobProgress`): a heartbeat while a long
step reports nothing, so that a record no longer written says its worker stopped (`store.image_jobs.STALE_S`)."""

from __future__ import annotations

import threading

from store.image_jobs import ImageJobStore
from tests.waiting import wait_until
from workers import image_jobs
from workers.image_jobs import JobProgress


def test_a_job_is_written_while_a_step_reports_nothing_and_not_after(tmp_path, monkeypatch):
    monkeypatch.setattr(image_jobs, "HEARTBEAT_S", 0.05)
    progress = JobProgress(str(tmp_path), "photo", "denoise-image-fit")
    store = ImageJobStore(tmp_path)
    first = store.get("photo").updated_at
    with progress.heartbeat():
        wait_until(lambda: store.get("photo").updated_at != first, what="a heartbeat")  # the step said nothing
        written = store.get("photo").updated_at
        wait_until(lambda: store.get("photo").updated_at != written, what="another heartbeat")
    last = store.get("photo").updated_at
    threading.Event().wait(0.3)  # six periods: the heartbeat has stopped with its block
    assert store.get("photo").updated_at == last and store.get("photo").status == "running"


def test_without_a_job_there_is_no_heartbeat(tmp_path):
    progress = JobProgress(str(tmp_path), None, "denoise-image-fit")
    with progress.heartbeat():
        assert not [t for t in threading.enumerate() if t.name.startswith("kpca-image-job-")]


def test_an_image_request_takes_the_cores_a_fit_would_have(tmp_path):
    """Its tiles and bands run on every core when nothing else fits, as a lone fit's do (they ran on the worker's
    one kernel thread; bench/results/photo_job.json has the time it cost)."""
    import numpy as np

    from kpca._threads import map_threads
    from workers.placement import fit_threads, machine_cores

    progress = JobProgress(str(tmp_path), None, "denoise-image-fit")
    _, info = image_jobs._run(progress, lambda: (np.zeros(1), {"threads": map_threads()}))
    assert info["threads"] == fit_threads(machine_cores(), 1) == machine_cores()

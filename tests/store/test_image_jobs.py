"""The image job store (`store.image_jobs`): a named image request's progress and cancel flag, on a real
data folder."""

from __future__ import annotations

import pytest

from store.errors import Conflict, Invalid, NotFound
from store.image_jobs import ImageJobStore


def test_a_job_starts_reports_and_ends(tmp_path):
    jobs = ImageJobStore(tmp_path)
    record = jobs.start("photo", "denoise-image-fit")
    assert (record.status, record.phase, record.schema_version) == ("running", "starting", 1)
    jobs.update("photo", phase="tuning", done=3, total=12, steps=[{"step": "noise", "seconds": 0.5}])
    read = jobs.get("photo")
    assert (read.phase, read.done, read.total, read.fraction) == ("tuning", 3, 12, 0.25)
    assert read.steps[0].step == "noise" and read.updated_at >= read.created_at
    with pytest.raises(Conflict):
        jobs.start("photo", "denoise-image-fit")  # a running job keeps its name
    jobs.update("photo", status="completed", chosen={"method": "fixed-point"})
    again = jobs.start("photo", "hyperresolution")  # an ended job's name is free again
    assert again.status == "running" and again.kind == "hyperresolution" and again.chosen is None


def test_cancel_is_a_flag_the_worker_reads(tmp_path):
    jobs = ImageJobStore(tmp_path)
    jobs.start("photo", "denoise-image")
    assert not jobs.cancel_requested("photo")
    jobs.request_cancel("photo")
    assert jobs.cancel_requested("photo")
    jobs.update("photo", status="cancelled")
    with pytest.raises(Conflict) as raised:
        jobs.request_cancel("photo")
    assert raised.value.field == "job"
    jobs.start("photo", "denoise-image")
    assert not jobs.cancel_requested("photo")  # a new run starts without the old flag


def test_unknown_and_bad_names(tmp_path):
    jobs = ImageJobStore(tmp_path)
    with pytest.raises(NotFound) as raised:
        jobs.get("nobody")
    assert raised.value.field == "job"
    with pytest.raises(Invalid):
        jobs.start("../escape", "denoise-image")
    jobs.start("photo", "denoise-image")
    jobs.delete("photo")
    with pytest.raises(NotFound):
        jobs.delete("photo")

"""The image job store (`store.image_jobs`): a named image request's progress and cancel flag, on a real
data folder."""

from __future__ import annotations

import numpy as np
import pytest

from store.errors import Conflict, Damaged, Invalid, NotFound
from store.image_job_objects import ObjectImageJobStore
from store.image_jobs import ImageJobStore
from store.objects.folder import FolderObjects
from tests.store_checks import aged_image_job as aged


@pytest.fixture(params=["folder", "objects-folder", "objects-s3"])
def make(request):
    """The store of a data folder: the folder's, the object-store one over the same folder (the same files), and
    the object-store one on S3 (moto on loopback; the data folder unused) (issue 57)."""
    if request.param == "folder":
        return ImageJobStore
    if request.param == "objects-folder":
        return lambda root: ObjectImageJobStore(FolderObjects(root))
    from store.objects.open import open_objects

    url = request.getfixturevalue("s3_url")
    return lambda root: ObjectImageJobStore(open_objects(url))


def poke(jobs, root, key: str, data: bytes | None) -> None:
    """Write (or, with None, remove) ``key`` of the store's layout (``image-jobs/photo/result.npy``) behind its
    back, as a damaged disk or a hand would."""
    if isinstance(jobs, ObjectImageJobStore):
        if data is None:
            jobs.objects.delete(key)
        else:
            jobs.objects.put(key, data)
    elif data is None:
        (root / key).unlink()
    else:
        (root / key).write_bytes(data)


def peek(jobs, root, key: str) -> bytes | None:
    if isinstance(jobs, ObjectImageJobStore):
        return jobs.objects.get(key).data if jobs.objects.version(key) is not None else None
    return (root / key).read_bytes() if (root / key).exists() else None


def test_a_job_starts_reports_and_ends(tmp_path, make):
    jobs = make(tmp_path)
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


def test_cancel_is_a_flag_the_worker_reads(tmp_path, make):
    jobs = make(tmp_path)
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


def test_unknown_and_bad_names(tmp_path, make):
    jobs = make(tmp_path)
    with pytest.raises(NotFound) as raised:
        jobs.get("nobody")
    assert raised.value.field == "job"
    with pytest.raises(Invalid):
        jobs.start("../escape", "denoise-image")
    jobs.start("photo", "denoise-image")
    jobs.delete("photo")
    with pytest.raises(NotFound):
        jobs.delete("photo")


def test_a_background_jobs_answer_is_kept_checked_and_cleared_by_the_next_run(tmp_path, make):
    jobs = make(tmp_path)
    jobs.start("photo", "denoise-image-fit", background=True, owner="key-a")
    jobs.start("other", "denoise-image-fit", background=True, owner="key-b")
    jobs.start("inline", "denoise-image-fit", owner="key-a")  # answers its own request: not counted
    assert (jobs.running("key-a"), jobs.running("key-b"), jobs.running(None)) == (1, 1, 0)
    with pytest.raises(NotFound):
        jobs.result("photo")  # not kept yet
    pixels = np.arange(12, dtype=np.uint16).reshape(3, 4)
    jobs.save_result("photo", pixels, {"chosen": {"method": "linear", "psnr_db": float("inf")},
                                       "noise": np.float64(0.1)})
    jobs.update("photo", status="completed")
    image, info = jobs.result("photo")
    np.testing.assert_array_equal(image, pixels)
    assert image.dtype == np.uint16 and info == {"chosen": {"method": "linear", "psnr_db": None}, "noise": 0.1}
    assert jobs.running("key-a") == 0
    data = bytearray(peek(jobs, tmp_path, "image-jobs/photo/result.npy"))
    data[-1] ^= 1
    poke(jobs, tmp_path, "image-jobs/photo/result.npy", bytes(data))  # altered on disk
    with pytest.raises(Damaged, match="digest"):
        jobs.result("photo")
    jobs.start("photo", "denoise-image-fit", background=True)  # the next run starts without the old answer
    assert peek(jobs, tmp_path, "image-jobs/photo/result.npy") is None
    with pytest.raises(NotFound):
        jobs.result("photo")


def test_a_record_reports_the_time_its_step_has_left(tmp_path, make):
    jobs = make(tmp_path)
    jobs.start("photo", "denoise-image-fit")
    assert jobs.get("photo").phase_left_s is None
    record = jobs.update("photo", phase="denoising", done=4, total=16, phase_elapsed_s=2.0)
    assert record.phase_left_s == 6.0
    assert jobs.update("photo", status="completed").phase_left_s is None


def test_a_running_record_its_worker_stopped_writing_reads_as_failed(tmp_path, make):
    """A job whose worker was killed would hold its name and its key's count of running work for ever: a running
    record not written for STALE_S seconds reads as failed, with what to do."""
    from store.atomic import dump_json
    from store.image_jobs import STALE_S

    jobs = make(tmp_path)
    jobs.start("orphan", "denoise-image-fit", background=True, owner="key")
    assert jobs.running("key") == 1 and jobs.get("orphan").status == "running"
    record = jobs.get("orphan").model_dump(mode="json")
    poke(jobs, tmp_path, "image-jobs/orphan/job.json",
         dump_json({**record, "updated_at": "2026-01-01T00:00:00.000Z"}))  # its worker's last word, long ago
    seen = jobs.get("orphan")
    assert seen.status == "failed" and "worker stopped" in seen.error and f"{STALE_S:g} s" in seen.error
    assert jobs.running("key") == 0
    with pytest.raises(Conflict):
        jobs.request_cancel("orphan")  # nothing runs to cancel
    assert jobs.start("orphan", "denoise-image-fit").status == "running"  # the name is free again


def test_jobs_that_ended_long_ago_are_pruned_with_their_answers(tmp_path, make):
    """`ImageJobStore.prune`: a job that ended more than ``keep_s`` ago goes, answer and all; one that ended
    recently stays, a running one stays (however old its start), one whose worker went silent counts as
    ended (failed) from its last write, and a damaged record is left for the request that names it."""
    jobs = make(tmp_path)
    for name in ("old", "recent", "busy", "silent", "broken"):
        jobs.start(name, "denoise-image-fit", background=True)
    jobs.update("old", status="completed")
    jobs.save_result("old", np.zeros((4, 4), dtype=np.uint8), {})
    aged(jobs, "old", 7200)
    jobs.update("recent", status="failed", error="x")
    aged(jobs, "recent", 60)
    aged(jobs, "silent", 7200)  # running, its worker silent for two hours: read as failed
    poke(jobs, tmp_path, "image-jobs/broken/job.json", b"{not json")
    assert jobs.prune(keep_s=3600) == ["old", "silent"]
    assert jobs.names() == ["broken", "busy", "recent"]
    with pytest.raises(NotFound):
        jobs.result("old")
    assert jobs.get("busy").status == "running" and jobs.prune(keep_s=3600) == []


def test_of_requests_racing_for_a_free_name_one_runs(tmp_path, make):
    import threading

    jobs = make(tmp_path)
    jobs.start("raced", "denoise-image-fit")
    jobs.update("raced", status="completed")  # the name is free again: six requests want it at once
    won, refused, barrier = [], [], threading.Barrier(6)

    def start(i: int) -> None:
        barrier.wait()
        try:
            jobs.start("raced", "denoise-image-fit", owner=f"k{i}")
            won.append(i)
        except Conflict:
            refused.append(i)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == 5 and jobs.get("raced").owner == f"k{won[0]}"

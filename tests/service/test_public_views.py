"""The API's views of stored records (`service.public`): every field a view shows comes from the record,
and nothing the API keeps private leaks.

Defends against: a view field the mapping forgets (it would answer its default, not the record's
value); a stored-only field (``owner``, ``schema_version``, ``placement.exact_limit``, ``fit_kernel``)
showing in an answer; the schemas drifting back to being built from the store's records.
"""

from __future__ import annotations

import ast
from pathlib import Path

from service.public import (
    checkpoints_public,
    clustering_labelled,
    clustering_public,
    dataset_public,
    image_job_public,
    model_public,
    model_summary,
)
from store.datasets.records import DatasetInfo
from store.image_jobs import ImageJobRecord
from store.jobs.clusterings import ClusteringRecord
from store.jobs.records import ModelRecord

ROOT = Path(__file__).resolve().parents[2]
CONVERGENCE = {"metric": "excess_error", "value": 0.1, "iterate": 0.2, "residual": 0.3}
HISTORY = [{"pass": i, "elapsed_s": 1.5 * i, "convergence": CONVERGENCE, "eigenvalues": [3.0, 2.0], "workers": 2}
           for i in (1, 2)]
PROGRESS = {"pass": 2, "passes": 5, "t": 100, "fraction": 0.4, "elapsed_s": 3.0, "remaining_s": 4.5,
            "eigenvalues": [3.0, 2.0], "gains": [1.0, 0.5], "convergence": CONVERGENCE, "workers": 2}
#: a record with every field away from its default
JOB = dict(name="m1", dataset="d", dataset_version=2, dataset_checksum="abc", n_features=3,
           kernel={"type": "gaussian", "sigma": "auto"}, fit_kernel={"type": "gaussian", "sigma": 2.0},
           solver="kha", params={"passes": 5, "seed": 1}, placement={"workers": "all", "exact_limit": 99,
                                                                      "device": "cpu"},
           checkpoint_keep=7, status="completed", progress=PROGRESS, history=HISTORY,
           error={"code": "x", "message": "y"}, params_used={"passes": 5, "eta0": 0.1}, stopped_early=True,
           warnings=["w"], best_checkpoint={"pass": 2, "value": 0.1}, checkpoint={"pass": 2, "sha256": "ff"},
           created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:01Z", owner="key1")


def expected_view(record) -> dict:
    """The stored document less what only the service keeps, ``params_used.kernel`` the fitted kernel."""
    document = record.document()
    for private in ("schema_version", "owner"):
        document.pop(private)
    document["params_used"] = {**document["params_used"], "kernel": document.pop("fit_kernel")}
    document["placement"].pop("exact_limit")
    return document


def test_a_model_view_shows_every_field_of_its_record_but_the_private_ones():
    record = ModelRecord(**JOB, n_components=2)
    shown = model_public(record).model_dump(by_alias=True)
    assert shown == expected_view(record)
    assert list(shown)[-1] == "n_components" and list(shown)[:2] == ["name", "dataset"]  # the order answered
    summary = model_summary(record, False).model_dump(by_alias=True)
    assert "history" not in summary and summary["progress"] == shown["progress"]
    assert model_summary(record, True).model_dump(by_alias=True) == {**summary, **shown}


def test_a_clustering_view_shows_every_field_of_its_record_but_the_private_ones():
    history = [{**entry, "variation_of_information": 0.5, "labels_change": 0.25} for entry in HISTORY]
    record = ClusteringRecord(**{**JOB, "history": history}, n_clusters=3, n_rows=10, labels_dataset="l",
                              labels_dataset_version=1, variation_of_information=0.4, labels_sha256="aa",
                              coordinates_sha256="bb")
    drawn = {"pictures": {"clusters": "/v1/clusterings/m1/clusters.png"}}  # what the view adds: its pictures
    assert clustering_public(record).model_dump(by_alias=True) == {**expected_view(record), **drawn}
    page = {"labels": [0, 1], "labels_offset": 4, "labels_total": 10, "next": "/v1/clusterings/m1?x"}
    assert clustering_labelled(record, **page).model_dump(by_alias=True) == {**expected_view(record), **drawn,
                                                                             **page}
    undrawn = record.model_copy(update={"coordinates_sha256": None})  # completed before coordinates were kept
    assert clustering_public(undrawn).model_dump(by_alias=True)["pictures"] == {}


def test_image_job_dataset_and_checkpoint_views_carry_every_field():
    job = ImageJobRecord(name="j", kind="denoise-image", status="completed", phase="denoising", done=3, total=4,
                         elapsed_s=2.5, steps=[{"step": "noise", "seconds": 1.0}], chosen={"rank": 3},
                         error="e", created_at="t0", updated_at="t1")
    private = {"schema_version", "owner", "phase_elapsed_s"}  # who started it; the step's clock, shown as its rate
    assert image_job_public(job).model_dump() == {**job.model_dump(exclude=private), "fraction": 0.75,
                                                  "step_left_s": None}
    running = job.model_copy(update={"status": "running", "phase_elapsed_s": 6.0, "background": True, "owner": "k"})
    assert image_job_public(running).model_dump() == {**running.model_dump(exclude=private), "fraction": 0.75,
                                                      "step_left_s": 2.0}
    info = DatasetInfo(name="d", status="ready", n_features=3, dtype="float32", n_rows=10, chunks=[0, 1],
                       checksum="c", zarr_chunk_rows=5, created_at="t0", committed_at="t1", schema_version=2,
                       version=1, versions=[{"version": 1, "n_rows": 10, "n_chunks": 2, "checksum": "c",
                                             "committed_at": "t1"}], staged=[2],
                       source={"zarr": "/a", "resolved": "/b"}, source_dtype="int16", corrupt_chunks=[1],
                       damaged_staged=[2], error="why")
    shown = dataset_public(info).model_dump()
    assert shown == {**info.model_dump(exclude={"schema_version"}), "source": {"zarr": "/a"}}
    described = [{"pass": 1, "size_bytes": 10, "created_at": "t"}, {"pass": 2, "size_bytes": 11, "created_at": "u"}]
    assert checkpoints_public(described, 2).model_dump(by_alias=True) == {
        "checkpoints": [{**described[0], "best": False}, {**described[1], "best": True}]}


def test_the_schemas_do_not_build_the_public_views_from_stored_records():
    """Only `service.public` reads records to make answers: the schemas import no record class."""
    for path in sorted((ROOT / "service" / "schemas").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("store"):
                names = {alias.name for alias in node.names}
                assert names <= {"kernel_json_schema"}, f"{path.name} imports {names} from {node.module}"

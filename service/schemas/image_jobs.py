"""Schemas of image jobs: the progress of a named image request (``GET /v1/image-jobs/{job}``), made
from the stored record's own fields (`store.image_jobs.ImageJobRecord`) less its schema version, plus
the fraction of the current step done."""

from __future__ import annotations

from pydantic import BaseModel, Field, create_model

from store.image_jobs import ImageJobRecord


class _ImageJobBase(BaseModel):
    @classmethod
    def of(cls, record: ImageJobRecord) -> "_ImageJobBase":
        return cls(**record.model_dump(exclude={"schema_version"}), fraction=record.fraction)


ImageJobPublic = create_model(
    "ImageJobPublic", __base__=_ImageJobBase, __module__=__name__,
    **{name: (info.annotation, info) for name, info in ImageJobRecord.model_fields.items() if name != "schema_version"},
    fraction=(float, Field(description="fraction of the current step done")))
ImageJobPublic.__doc__ = "An image request's progress: the step running now, its units done, the steps finished."

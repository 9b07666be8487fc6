"""Data sets: zarr rows in immutable versions (`dataset_store.DatasetStore`), their typed ``meta.json``
(`records`), staged chunks and commits, registered arrays, the digests every read is checked against,
and repair."""

"""Staged chunks are marked with the digest of their rows when uploaded (`store.datasets.staging`): a staged
file damaged on disk, bit-flipped with its mtime put back, deleted or replaced by a folder is refused by
the commit naming the chunk (never committed as it is, nor left out of the version), shown as
``damaged_staged`` where it can be seen without reading it, and repaired by uploading it again."""

from __future__ import annotations

import pytest

from store import DatasetStore, Invalid
from tests.damage import DAMAGES, damage


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_staged_chunk_is_refused_by_the_commit_and_repaired_by_its_upload(root, rng, how):
    store = DatasetStore(root)
    store.create("d", 3, "float64")
    rows = [rng.normal(size=(50, 3)) for _ in range(3)]
    for index, chunk in enumerate(rows):
        store.put_chunk("d", index, chunk)
    damage(root / "datasets" / "d" / "staging" / "000002.npy", how)
    if how != "bit-flipped":  # seen from the file's header (or its absence): no read of its rows needed
        assert store.get("d").damaged_staged == [2] and store.get("d").status == "corrupt"
    with pytest.raises(Invalid, match="staged chunk 2 is damaged") as refused:
        store.commit("d")
    assert refused.value.field == "chunks"
    assert store.get("d").version == 0
    store.put_chunk("d", 2, rows[2])  # the repair the message asks for
    committed = store.commit("d")
    assert (committed.status, committed.n_rows, committed.version) == ("ready", 150, 1)
    assert (store.open_array("d")[100:150] == rows[2]).all()

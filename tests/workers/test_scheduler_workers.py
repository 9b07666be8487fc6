"""Which workers the cluster has, asked while the client refreshes its own copy of the scheduler's
state: every answer names every worker (`workers.shards.scheduler_workers`).

Before: `workers.shards.fit_workers` read ``client.scheduler_info(n_workers=-1)``, the client's shared
copy, which the client's periodic refresh (without the workers) replaced between the fetch and the
read at times, so that it answered no workers; a sharded fit then placed no shards and failed
(``AttributeError: 'NoneType' object has no attribute 'shape'`` in `kpca.sharded.passes.message_rows`).
"""

import dask
import pytest
from distributed import Client, LocalCluster

from kpca.kernels import KernelSpec
from workers.shards import ActorGroup, ShardLost, fit_workers, scheduler_workers

ASKED = 1000  # answers read; before the fix tens of them were empty (the refresh below every 5 ms)


@pytest.fixture(scope="module")
def client():
    # the client's periodic refresh of its copy, every 5 ms instead of 2 s, so that it often falls
    # between a fetch and its read
    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.wait_for_workers(2, timeout=60)
            yield client


def test_every_answer_names_every_worker_while_the_client_refreshes(client):
    answers = [tuple(fit_workers(client)) for _ in range(ASKED)]
    expected = tuple(sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"]))
    assert len(expected) == 2
    assert [a for a in answers if a != expected] == []


def test_the_workers_come_with_their_details(client):
    workers = scheduler_workers(client)
    assert len(workers) == 2
    assert all(info["nthreads"] == 1 for info in workers.values())


def test_a_group_of_no_workers_is_a_lost_shard_not_an_empty_fit(client, tmp_path):
    """Before: a group started on no addresses had no shards, and the fit failed later with an
    AttributeError; now the coordinator is told at once that no worker holds a shard."""
    with pytest.raises(ShardLost, match="no fit worker"):
        ActorGroup.start(client, [], [], data_dir=str(tmp_path), dataset="any", version=1,
                         kernel=KernelSpec("gaussian", sigma=1.0), precision="float64", unit_rows=64,
                         n_components=2, d=2)

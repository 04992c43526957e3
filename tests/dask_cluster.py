"""The Dask cluster the Dask test modules share: a real ``LocalCluster`` of two worker processes
(one thread each), started once per module (start-up is the slowest part), with Dask's task
shuffle for DataFrames (fastest on tiny data; a test may ask for P2P). tests/conftest.py offers
it as the ``client`` fixture (a module may define its own ``client``, which wins)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="module")
def client():
    """A ``distributed.Client`` on a fresh LocalCluster with two worker processes."""
    distributed = pytest.importorskip("distributed")
    import dask

    for name in ("distributed.shuffle", "distributed.scheduler", "distributed.worker", "distributed.nanny"):
        logging.getLogger(name).setLevel(logging.ERROR)
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                       silence_logs=logging.ERROR)
    c = distributed.Client(cluster)
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        yield c
    c.close()
    cluster.close()

"""One local Ray cluster (2 CPUs) for the Ray tests of this folder, all marked ``serial`` (it takes
both cores): started when the first of them asks for it, shut down after the last test of the
folder, so that the three modules do not each start and stop a cluster of their own."""

from __future__ import annotations

import sys
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Any:
    ray = pytest.importorskip("ray", reason="the Ray tests need ray (pip install 'assay[ray]', in the dev extra)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the folder's last test, the cluster goes (the tests after it get the machine to themselves)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and (nextitem is None or nextitem.path.parent != item.path.parent):
        ray.shutdown()

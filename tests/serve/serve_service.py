"""Start a service on this package's cluster for one module, and stop it unless the cluster is gone."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def running_service(config: Any) -> Iterator[Any]:
    import ray

    from serve.launcher import start_service, stop_service

    service = start_service(config)
    try:
        yield service
    finally:
        if ray.is_initialized():  # the package's Ray may be gone already (tests/serve/conftest.py)
            stop_service(service)

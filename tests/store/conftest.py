from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # `import tests.s3_server` however pytest was started
    sys.path.insert(0, str(_ROOT))

from tests.s3_server import FaultProxy, S3Server  # noqa: E402


@pytest.fixture(scope="module")
def s3_server():
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server):
    name = f"halo-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def fault_proxy(s3_server):
    with FaultProxy(s3_server.port) as proxy:
        yield proxy

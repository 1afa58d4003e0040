from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    from train.base_models import smollm2_dir

    return smollm2_dir()


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path):
    from train.base_models import load_tokenizer

    return load_tokenizer(smollm2_path)


@pytest.fixture(scope="session")
def tiny_model(smollm2_path, tmp_path_factory) -> Path:
    from train.base_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", smollm2_path)


@pytest.fixture(scope="package")
def ray_local():
    """One in-process Ray (2 CPUs) for the training tests; stopped before other packages run."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()

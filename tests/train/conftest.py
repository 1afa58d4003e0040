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


_HERE = Path(__file__).resolve().parent


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # "package" scope would be the whole session here (no __init__.py): stop this package's Ray
    # as soon as the next test lies elsewhere, so other packages can start their own.
    if nextitem is None or _HERE not in Path(str(nextitem.path)).resolve().parents:
        import ray

        ray.shutdown()


@pytest.fixture(scope="session")
def ray_local():
    """One in-process Ray (2 CPUs) shared by the training tests."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()

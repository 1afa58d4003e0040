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

"""The `model:DIR` and `majority:DIR` policy specs, registered by name in rollout/policies so
`halo rollout`, `halo report` and `halo eval` all know them without importing this layer first."""

from __future__ import annotations

from rollout.core.decision import Policy


def model_factory(params: str, seed: int) -> Policy:
    """model:DIR -> the trained artifact in DIR (train/policies.load_policy)."""
    from train.policies import load_policy

    if not params:
        raise ValueError("model: needs a directory, e.g. model:./models/policy-v1")
    return load_policy(params)


def majority_factory(params: str, seed: int) -> Policy:
    """majority:DIR -> always the majority agent of DIR's training data."""
    from train.policies import ConstantPolicy, majority_agent

    if not params:
        raise ValueError("majority: needs a model directory, e.g. majority:./models/policy-v1")
    return ConstantPolicy(majority_agent(params))

"""Loading trained policies from artifact directories, and the baselines they are compared to.

`load_policy(model_dir)` reads manifest.json, refuses one that does not verify (ManifestError),
and returns the policy class it names. Serving and evaluation go through here.
"""

from __future__ import annotations

import json
from pathlib import Path

from rollout.policy import Decision, Policy
from rollout.rules import RulesFirst
from rollout.state import EpisodeState
from train.manifest import Manifest, ManifestError

POLICY_CLASSES = ("hashed_linear", "llm")


def load_policy(model_dir: str | Path, *, rules_first: bool = False, device: str | None = None) -> Policy:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ManifestError(f"{model_dir}: model directory does not exist")
    manifest = Manifest.load(model_dir)
    policy: Policy
    if manifest.policy_class == "hashed_linear":
        from train.fast_policy import HashedLinearPolicy

        policy = HashedLinearPolicy.load(model_dir, manifest)
    elif manifest.policy_class == "llm":
        from train.llm_policy import LLMPolicy, LLMRuntime

        policy = LLMPolicy(LLMRuntime(model_dir, manifest=manifest, device=device))
    else:
        raise ManifestError(f"{model_dir}: unknown policy_class {manifest.policy_class!r} "
                            f"(known: {', '.join(POLICY_CLASSES)})")
    return RulesFirst(policy) if rules_first else policy


class ConstantPolicy(Policy):
    """Always the same agent: the majority-class baseline."""
    decides_inline = True

    def __init__(self, agent_id: int, name: str = "majority") -> None:
        self.agent_id = agent_id
        self.name = name
        self.version = str(agent_id)

    def _decide(self, state: EpisodeState) -> Decision:
        return Decision(self.agent_id, "model", reason=f"majority class {self.agent_id}")


def majority_agent(path: str | Path) -> int:
    """The majority agent recorded by a model manifest or a dataset card under `path`."""
    path = Path(path)
    if (path / "manifest.json").is_file():
        metrics = Manifest.load(path).metrics
        if "majority_agent" in metrics:
            return int(metrics["majority_agent"])
    card = path / "dataset_card.json"
    if card.is_file():
        return int(json.loads(card.read_text())["majority_agent"])
    raise ManifestError(f"{path}: neither a model manifest with majority_agent nor a dataset card")

"""Loading trained policies from artifact directories, and the baselines they are compared to.

`load_policy(model_dir)` reads manifest.json, refuses one that does not verify (ManifestError),
and builds the policy class it names from POLICY_CLASSES. Serving and evaluation go through here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from rollout.policies.rules import RulesFirst
from solvers.registry import Registry
from train.manifest import Manifest, ManifestError

# A trained policy class: how to build a policy from its verified artifact directory.
PolicyLoader = Callable[[Path, Manifest, "str | None"], Policy]  # (model_dir, manifest, device)


def _hashed_linear(model_dir: Path, manifest: Manifest, device: str | None) -> Policy:
    from train.fast_policy import HashedLinearPolicy

    return HashedLinearPolicy.load(model_dir, manifest)


def _llm(model_dir: Path, manifest: Manifest, device: str | None) -> Policy:
    from train.llm_policy import LLMPolicy, LLMRuntime

    return LLMPolicy(LLMRuntime(model_dir, manifest=manifest, device=device))


# manifest.policy_class -> its loader. `inline`: cheap enough to decide on the serving replica's
# event loop (anything else runs in a thread). Adding a class is its module, a loader, one line.
POLICY_CLASSES: Registry[PolicyLoader] = Registry("policy_class")
POLICY_CLASSES.register("hashed_linear", _hashed_linear, inline=True)
POLICY_CLASSES.register("llm", _llm, inline=False)


def decides_inline(policy_class: str) -> bool:
    """Whether a policy of this class decides inline (False for a class no one registered)."""
    return policy_class in POLICY_CLASSES and bool(POLICY_CLASSES.meta(policy_class).get("inline"))


def load_policy(model_dir: str | Path, *, rules_first: bool = False, device: str | None = None) -> Policy:
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ManifestError(f"{model_dir}: model directory does not exist")
    manifest = Manifest.load(model_dir)
    if manifest.policy_class not in POLICY_CLASSES:
        raise ManifestError(f"{model_dir}: unknown policy_class {manifest.policy_class!r} "
                            f"(known: {', '.join(POLICY_CLASSES.names())})")
    policy = POLICY_CLASSES.get(manifest.policy_class)(model_dir, manifest, device)
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

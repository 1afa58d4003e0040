"""The random baseline: any agent except the final renderer (12), uniformly."""

from __future__ import annotations

import hashlib
import random

from rollout.core.agent_table import AGENT_IDS, AgentId
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState

CHOICES = tuple(a for a in AGENT_IDS if a != AgentId.NATURAL_LANGUAGE)


def state_rng(seed: int, state: EpisodeState, salt: str) -> random.Random:
    """A generator fixed by (seed, the task, the step, the history): decisions do not depend on
    how many other episodes the same policy object served, so concurrent runs reproduce."""
    key = f"{salt}|{seed}|{state.task_description}|{state.step}|{state.history}|{state.error_category}"
    return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))


class RandomPolicy(Policy):
    decides_inline = True
    name = "random"
    version = "1"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def _decide(self, state: EpisodeState) -> Decision:
        agent = state_rng(self.seed, state, "random").choice(CHOICES)
        return Decision(agent, "random", reason="uniform over agents 0-11, 13-20", policy_version=self.version)

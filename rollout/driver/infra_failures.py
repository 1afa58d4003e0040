"""Infrastructure failures during a rollout job (rollout/core/infra.py): episodes that ended because
the LLM endpoint, the student service or a solver program failed are never committed.

Each such episode is run again up to `retries` times in the same session (a blip passes); one
that still fails is left out of the store, so the next resume of the run redoes it. Past `limit`
infrastructure failures the job stops as "failed" with the reason: a dead endpoint must not burn
through the whole task list producing nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rollout.core.infra import short_reason

DEFAULT_RETRIES = 2  # extra attempts per episode in one session
MIN_LIMIT = 10  # infra failures before the job stops (at least; else 5% of its episodes)


def default_limit(episodes: int) -> int:
    return max(MIN_LIMIT, episodes // 20)


@dataclass
class InfraTally:
    limit: int
    retries: int = DEFAULT_RETRIES
    failures: int = 0
    given_up: set[str] = field(default_factory=set)  # episode IDs left out of this session
    kinds: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)  # kind -> the first message seen
    _attempts: Counter[str] = field(default_factory=Counter)

    def record(self, episode_id: str, infra_error: str) -> bool:
        """Count one failure; True when the episode should run again in this session."""
        kind = short_reason(infra_error)
        self.failures += 1
        self.kinds[kind] += 1
        self.first.setdefault(kind, infra_error.splitlines()[0][:300] if infra_error else kind)
        self._attempts[episode_id] += 1
        if self._attempts[episode_id] > self.retries:
            self.given_up.add(episode_id)
            return False
        return True

    def succeeded(self, episode_id: str) -> None:
        self.given_up.discard(episode_id)

    @property
    def over_limit(self) -> bool:
        return self.failures >= self.limit

    def reason(self) -> str:
        """One line: how many, of which kind, the first message of the most common kind."""
        if not self.failures:
            return ""
        kind = self.kinds.most_common(1)[0][0]
        kinds = ", ".join(f"{k} {v}" for k, v in self.kinds.most_common())
        return (f"{self.failures} infrastructure failure(s) ({kinds}), e.g. {self.first[kind]}; "
                "nothing of them was committed: fix it and re-run the same command to redo them")

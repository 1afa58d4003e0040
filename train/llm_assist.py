"""Optional LLM help while building a dataset (off by default): paraphrasing the specification
and an LLM-as-judge filter, through any OpenAI-compatible endpoint (rollout.llm).

Both fail safe: a paraphrase that errors or comes back empty is skipped, and a judge that
errors keeps the example (the verifier already accepted its episode); failures are counted.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace

from rollout.core.agent_table import AGENT_TABLE, agent_name
from rollout.llm import LLMConfig, LLMError, OpenAIChatClient, config_from_env
from train.examples import Example, example_id_for

PARAPHRASE_SYSTEM = (
    "You rewrite planning task descriptions. Keep every object, fact, constraint and goal exactly; "
    "change only wording and sentence order. Reply with the rewritten description and nothing else."
)
JUDGE_SYSTEM = (
    "You audit decisions of an orchestrator that repairs PDDL models. Given the loop state and the repair "
    "agent that was chosen, answer ACCEPT if the choice is a sensible next step for the reported problem, "
    "or REJECT if it clearly is not. Answer with one word."
)
_VERDICT = re.compile(r"\b(ACCEPT|REJECT)\b", re.IGNORECASE)


@dataclass
class LLMAssist:
    client: OpenAIChatClient
    counts: dict[str, int] = field(default_factory=lambda: {"paraphrase_ok": 0, "paraphrase_failed": 0,
                                                            "judge_accept": 0, "judge_reject": 0,
                                                            "judge_failed": 0})

    def _chat(self, system: str, user: str, purpose: str) -> str:
        reply = asyncio.run(self.client.chat([{"role": "system", "content": system},
                                              {"role": "user", "content": user}], purpose=purpose))
        return reply.text.strip()

    def paraphrase(self, example: Example) -> Example | None:
        state = example.state
        try:
            text = self._chat(PARAPHRASE_SYSTEM, state.task_description, "dataset_paraphrase")
        except LLMError:
            self.counts["paraphrase_failed"] += 1
            return None
        if not text or text == state.task_description.strip():
            self.counts["paraphrase_failed"] += 1
            return None
        self.counts["paraphrase_ok"] += 1
        new_json = replace(state, task_description=text).to_json()
        return replace(example, state_json=new_json, augmentation="paraphrase",
                       example_id=example_id_for(new_json, example.agent_id, "paraphrase"))

    def judge(self, example: Example) -> bool:
        state = example.state
        agents = "; ".join(f"{a.agent_id} {a.name}: {a.summary}" for a in AGENT_TABLE)
        user = (f"Agents: {agents}\n\nTask: {state.task_description[:1500]}\n\nError category: "
                f"{state.error_category or 'none'}\nValidator: {state.validator_errors[-1500:]}\n"
                f"Planner log: {state.planner_log[-500:]}\nHistory: {state.history}\n\n"
                f"Chosen agent: {example.agent_id} {agent_name(example.agent_id)}")
        try:
            text = self._chat(JUDGE_SYSTEM, user, "dataset_judge")
        except LLMError:
            self.counts["judge_failed"] += 1
            return True
        m = _VERDICT.search(text)
        if m is None:
            self.counts["judge_failed"] += 1
            return True
        accept = m.group(1).upper() == "ACCEPT"
        self.counts["judge_accept" if accept else "judge_reject"] += 1
        return accept


def make_assist(base_url: str = "", model: str = "", **overrides: object) -> LLMAssist:
    config: LLMConfig = config_from_env(model or None, base_url or None, **overrides)
    return LLMAssist(OpenAIChatClient(config))

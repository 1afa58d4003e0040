"""All agents. Importing this package registers every agent module listed in AGENT_MODULES."""

import importlib

AGENT_MODULES: tuple[str, ...] = (
    "rollout.agents.llm_agents",  # LLM agents 0-10, 12, 18-20, NoOp 11, dynamic 21
    "rollout.agents.deterministic",  # agents 13-17
)

for _module in AGENT_MODULES:
    importlib.import_module(_module)

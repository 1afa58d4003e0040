"""The agents: the interface (base), LLM agents generated from the table (llm_agents), the
deterministic plan repairers (deterministic) and their helpers. Which class implements an ID is
registered in rollout.core.agent_table.AGENTS; importing this package imports no agent module."""

"""One real-LLM agent step: prompt -> chat endpoint -> extraction -> AgentOutcome.

Called by the LLM agent classes (rollout.agents.llm_agents) when the episode has a real chat
backend (`ctx.llm`). Never raises for a bad reply: the step fails with ok=False, the state's
artefacts unchanged, and a message saying why. An endpoint failure past the client's retries
(`LLMError`) is raised: it is an infrastructure failure (rollout/core/infra.py), not the agent's.
"""

from __future__ import annotations

from typing import Any

from rollout.agents.base import AgentContext, AgentOutcome
from rollout.agents.extract import ExtractionError, extract_pddl, extract_tagged_text
from rollout.agents.prompts import build_messages, prompt_for
from rollout.core.agent_table import agent_name
from rollout.core.state import EpisodeState


def _usage(reply: Any) -> dict[str, Any]:
    """Accounting from any ChatBackend reply (ChatReply or a look-alike)."""
    return {"llm_calls": 1, "tokens_in": int(getattr(reply, "tokens_in", 0) or 0),
            "tokens_out": int(getattr(reply, "tokens_out", 0) or 0),
            "cost_usd": float(getattr(reply, "cost_usd", 0.0) or 0.0),
            "latency_ms": float(getattr(reply, "latency_ms", 0.0) or 0.0)}


async def run_real_llm_agent(agent_id: int, state: EpisodeState, ctx: AgentContext,
                             dynamic_profile: str | None = None) -> AgentOutcome:
    name = agent_name(agent_id)

    def failed(message: str, **usage: Any) -> AgentOutcome:
        return AgentOutcome(state.domain, state.problem, plan=state.plan, ok=False,
                            message=f"{name}: {message}", **usage)

    if ctx.llm is None:
        return failed("no LLM backend configured for this episode")
    try:
        spec = prompt_for(agent_id)
    except KeyError as exc:
        return failed(str(exc.args[0]))
    messages = build_messages(agent_id, state, ctx.task, dynamic_profile)
    reply = await ctx.llm.chat(messages, purpose=f"agent:{name}")  # LLMError: an infra failure
    usage = _usage(reply)
    text = str(getattr(reply, "text", reply) or "")
    try:
        if spec.output == "solution":
            outline = extract_tagged_text(text, "solution")
            return AgentOutcome(state.domain, state.problem, plan="", proposed_solution=outline,
                                message=f"{name}: wrote a solution outline ({len(outline)} chars)", **usage)
        if spec.output == "instructions":
            rendered = extract_tagged_text(text, "instructions")
            return AgentOutcome(state.domain, state.problem, plan=state.plan, natural_language=rendered,
                                proposed_solution=state.proposed_solution,
                                message=f"{name}: rendered the plan as {len(rendered.splitlines())} "
                                        "instruction lines", **usage)
        pddl = extract_pddl(text, required=spec.required)
    except ExtractionError as exc:
        return failed(f"unusable reply: {exc}", **usage)
    domain = pddl.domain if pddl.domain is not None else state.domain
    problem = pddl.problem if pddl.problem is not None else state.problem
    changed = [k for k, old, new in (("domain", state.domain, domain), ("problem", state.problem, problem))
               if old.strip() != new.strip()]
    what = f"rewrote the {' and '.join(changed)}" if changed else "returned the PDDL unchanged"
    return AgentOutcome(domain, problem, plan="", proposed_solution=state.proposed_solution,
                        message=f"{name}: {what}", **usage)


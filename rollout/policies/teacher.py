"""The prompted teacher: an LLM orchestrator over any OpenAI-compatible chat endpoint.

It sees the agent table, the episode state and the history, and answers with one agent name.
An unparsable or unknown answer is sent back for correction up to `max_attempts` times; then
the policy falls back to a fixed default agent, logs it, and marks the decision
decided_by="fallback". With `allow_dynamic`, the teacher may answer `DynamicAgent: <profile>`
to create the dynamic agent (ID 21) with that task profile.

Policy spec (rollout.policies.make_policy): "teacher:model=<name>,base_url=<url>[,fallback=<id>]
[,attempts=<n>][,dynamic=true][,timeout=<s>][,concurrency=<n>][,prices=<yaml>]"; missing
model/base_url come from HALO_LLM_MODEL / HALO_LLM_BASE_URL. Another chat backend takes over a
model name through `TEACHER_MODELS`: "teacher:model=sim[,profile=...]" answers from the simulated
agent world (rollout/sim/teacher_chat.py, which sits above this layer and is named by string).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from rollout.agents.base import BackendMisconfigured, ChatBackend
from rollout.core.agent_table import AGENT_TABLE, NUM_AGENTS, AgentId, agent_name
from rollout.core.decision import Decision, Policy
from rollout.core.state import EpisodeState
from solvers.errors import HaloError
from solvers.params import read_pairs, read_params
from solvers.registry import Registry

log = logging.getLogger(__name__)

DEFAULT_FALLBACK_ID = AgentId.DEEP_THINK_PDDL  # the broadest repair when the teacher gives no usable answer

_CAPS = {"spec": 4000, "domain": 6000, "problem": 4000, "plan": 2000, "validator": 1500, "planner": 800,
         "solution": 1500}


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


_BY_NORM: dict[str, int] = {}
for _info in AGENT_TABLE:
    _BY_NORM[_norm(_info.name)] = _info.agent_id
    _BY_NORM[_norm(_info.name.removeprefix("Agent"))] = _info.agent_id
_BY_NORM["noop"] = AgentId.NOOP

_ANSWER_RE = re.compile(r"^\W*(?:selected\s+)?agent\W*(?:id)?\s*[:=\-]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_DYNAMIC_RE = re.compile(r"dynamic\s*agent\s*[:=\-]\s*(.+)", re.IGNORECASE | re.DOTALL)
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]+")


class UnusableAnswer(HaloError, ValueError):
    """The teacher's answer names no agent (message says what was wrong)."""


@dataclass(frozen=True)
class ParsedAnswer:
    agent_id: int
    dynamic_profile: str | None = None


def _token_to_id(token: str, *, scan_words: bool = True) -> int | None:
    token = token.strip().strip("`*\"'.[](){}<>")
    if re.fullmatch(r"\d{1,2}", token):
        value = int(token)
        return value if 0 <= value < NUM_AGENTS else None
    head = re.match(r"(\d{1,2})\b", token)  # "13 (AgentVariableSwapper)"
    if head and int(head.group(1)) < NUM_AGENTS:
        return int(head.group(1))
    key = _norm(token)
    if key in _BY_NORM:
        return _BY_NORM[key]
    if not scan_words:
        return None
    for word in _WORD_RE.findall(token):  # "AgentVariableSwapper because ..."
        if _norm(word) in _BY_NORM:
            return _BY_NORM[_norm(word)]
    return None


def parse_answer(reply: str, *, allow_dynamic: bool = False) -> ParsedAnswer:
    """The agent the reply selects: an `Agent: ...` line, a bare name or ID, or the only name mentioned."""
    text = (reply or "").strip()
    if not text:
        raise UnusableAnswer("the answer is empty")
    if allow_dynamic:
        m = _DYNAMIC_RE.search(text)
        if m and m.group(1).strip():
            profile = re.split(r"\n\s*reason\s*:", m.group(1), flags=re.IGNORECASE)[0].strip()
            if profile:
                return ParsedAnswer(AgentId.DYNAMIC, profile[:2000])
    answers = _ANSWER_RE.findall(text)
    if answers:
        agent_id = _token_to_id(answers[-1])
        if agent_id is None:
            raise UnusableAnswer(f"{answers[-1][:60]!r} is not an agent name or ID")
        return ParsedAnswer(agent_id)
    whole = _token_to_id(text, scan_words=False)
    if whole is not None:
        return ParsedAnswer(whole)
    mentioned = {_BY_NORM[_norm(w)] for w in _WORD_RE.findall(text) if _norm(w) in _BY_NORM and w[0].isupper()}
    if len(mentioned) == 1:
        return ParsedAnswer(mentioned.pop())
    if len(mentioned) > 1:
        names = ", ".join(sorted(agent_name(a) for a in mentioned))
        raise UnusableAnswer(f"the answer names several agents ({names}) and no 'Agent:' line")
    raise UnusableAnswer(f"no agent name in the answer {text[:60]!r}")


def system_prompt(allow_dynamic: bool) -> str:
    table = "\n".join(f"{a.agent_id:>2} {a.name}: {a.summary}" for a in AGENT_TABLE)
    dynamic = ("\nYou may instead create a one-off specialist by answering `DynamicAgent: <task profile>`, "
               "where the profile says precisely what the specialist must fix. Use it only when no "
               "agent above fits.") if allow_dynamic else ""
    return (
        "You orchestrate a team of repair agents that turn a natural-language planning task into PDDL "
        "that a planner solves and a validator accepts. At each step you choose the ONE agent whose "
        "specialty best matches what the tool output shows is wrong now. Look at the validator and "
        "planner messages first, then at what the recent agents already tried: do not repeat an agent "
        "that just failed to change anything unless the situation changed.\n\n"
        f"Agents (ID name: what it does):\n{table}\n{dynamic}\n\n"
        "Answer with one line `Agent: <name>` (the exact name from the list), optionally followed by "
        "one line `Reason: <one sentence>`."
    )


def _cut(text: str, cap: int, keep_tail: bool = False) -> str:
    if len(text) <= cap:
        return text
    return "...\n" + text[-cap:] if keep_tail else text[:cap] + "\n..."


def state_prompt(state: EpisodeState) -> str:
    verdict = "valid" if state.plan_valid else ("found, rejected by the validator" if state.plan_found
                                                else "no plan")
    history = ", ".join(agent_name(a) for a in state.history) or "(none yet)"
    parts = [
        ("Task", _cut(state.task_description, _CAPS["spec"])),
        ("Domain", _cut(state.domain, _CAPS["domain"]) or "(empty)"),
        ("Problem", _cut(state.problem, _CAPS["problem"]) or "(empty)"),
        ("Plan", _cut(state.plan, _CAPS["plan"]) or "(none)"),
        ("Status", f"step {state.step}; plan: {verdict}; error category: {state.error_category or 'none'}"),
        ("Validator output", _cut(state.validator_errors, _CAPS["validator"], True) or "(none)"),
        ("Planner log (end)", _cut(state.planner_log, _CAPS["planner"], True) or "(none)"),
        ("Recent agents (oldest first)", history),
    ]
    if state.proposed_solution:
        parts.append(("Solution outline", _cut(state.proposed_solution, _CAPS["solution"])))
    return "\n\n".join(f"## {k}\n{v}" for k, v in parts) + "\n\nWhich agent next?"


class TeacherPolicy(Policy):
    name = "teacher"

    def __init__(self, chat: ChatBackend, *, model_name: str = "", max_attempts: int = 3,
                 fallback_agent_id: int = DEFAULT_FALLBACK_ID, allow_dynamic: bool = False) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0 <= fallback_agent_id < NUM_AGENTS:
            raise ValueError(f"fallback agent must be an ID 0-{NUM_AGENTS - 1}, got {fallback_agent_id}")
        self.chat = chat
        self.max_attempts = max_attempts
        self.fallback_agent_id = fallback_agent_id
        self.allow_dynamic = allow_dynamic
        self.version = f"teacher/{model_name or 'unknown'}"
        self.fallbacks = 0

    def _decide(self, state: EpisodeState) -> Decision:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.adecide(state))
        raise RuntimeError("TeacherPolicy.decide called inside an event loop: use `await adecide(state)`")

    async def adecide(self, state: EpisodeState) -> Decision:
        t0 = time.perf_counter()
        messages = [{"role": "system", "content": system_prompt(self.allow_dynamic)},
                    {"role": "user", "content": state_prompt(state)}]
        calls = tokens_in = tokens_out = 0
        cost = 0.0
        problems: list[str] = []
        extra = {"state": state} if getattr(self.chat, "wants_state", False) else {}
        for attempt in range(1, self.max_attempts + 1):
            try:
                reply = await self.chat.chat(messages, purpose="teacher", **extra)
            except BackendMisconfigured:  # cannot answer in this setting at all: the episode ends with it
                raise
            except Exception as exc:  # noqa: BLE001  any backend failure ends in the logged fallback
                calls += 1
                problems.append(f"attempt {attempt}: LLM call failed: {exc}")
                break
            calls += 1
            tokens_in += int(getattr(reply, "tokens_in", 0) or 0)
            tokens_out += int(getattr(reply, "tokens_out", 0) or 0)
            cost += float(getattr(reply, "cost_usd", 0.0) or 0.0)
            text = str(getattr(reply, "text", reply) or "")
            try:
                parsed = parse_answer(text, allow_dynamic=self.allow_dynamic)
            except UnusableAnswer as exc:
                problems.append(f"attempt {attempt}: {exc}")
                messages += [{"role": "assistant", "content": text},
                             {"role": "user", "content": f"That answer is not usable: {exc}. Reply with one "
                              "line `Agent: <name>` using an exact name from the list."}]
                continue
            reason = _reason(text)
            return Decision(parsed.agent_id, "teacher", (time.perf_counter() - t0) * 1000.0, reason,
                            self.version, parsed.dynamic_profile, calls, tokens_in, tokens_out, cost)
        self.fallbacks += 1
        why = "; ".join(problems)
        log.warning("teacher fell back to %s: %s", agent_name(self.fallback_agent_id), why)
        return Decision(self.fallback_agent_id, "fallback", (time.perf_counter() - t0) * 1000.0,
                        f"fallback to {agent_name(self.fallback_agent_id)}: {why}"[:500], self.version,
                        None, calls, tokens_in, tokens_out, cost)

    def close(self) -> None:
        aclose = getattr(self.chat, "aclose", None)
        if aclose is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(aclose())


def _reason(text: str) -> str:
    m = re.search(r"reason\s*:\s*(.+)", text, re.IGNORECASE)
    return (m.group(1) if m else text).strip()[:300]


@dataclass(frozen=True)
class TeacherParams:
    """The keys of `teacher:...` for an OpenAI-compatible endpoint."""

    model: str | None = None  # None: HALO_LLM_MODEL
    base_url: str | None = None  # None: HALO_LLM_BASE_URL
    fallback: int = DEFAULT_FALLBACK_ID
    attempts: int = 3
    dynamic: bool = False
    timeout: float | None = None
    concurrency: int | None = None
    prices: str | None = None  # a YAML price table


# A teacher model name served by another chat backend -> its factory (params, seed) -> Policy.
TEACHER_MODELS: Registry[Callable[[str, int], Policy]] = Registry("teacher model")
TEACHER_MODELS.register("sim", "rollout.sim.teacher_chat:sim_teacher_factory")  # the simulated world's teacher


def teacher_model(params: str) -> str | None:
    """The `model=` of a teacher spec's parameters (None when not given)."""
    models = [p.value for p in read_pairs(params) if p.key == "model"]
    return models[-1] if models else None


def teacher_endpoint(params: str) -> tuple[str | None, str | None] | None:
    """(base URL, model) a teacher spec calls, None when another backend (the simulated world) answers."""
    model = teacher_model(params)
    if model in TEACHER_MODELS:
        return None
    values = read_params(TeacherParams, params)
    return values.base_url, values.model


def teacher_factory(params: str, seed: int) -> Policy:
    """Build from a policy spec's parameters (see the module doc); `seed` is unused (greedy teacher)."""
    from rollout.llm import OpenAIChatClient, PriceTable, config_from_env

    model = teacher_model(params)
    if model in TEACHER_MODELS:
        return TEACHER_MODELS.get(model)(params, seed)
    p = read_params(TeacherParams, params)
    overrides: dict = {}
    if p.timeout is not None:
        overrides["timeout_s"] = p.timeout
    if p.concurrency is not None:
        overrides["max_concurrency"] = p.concurrency
    if p.prices is not None:
        overrides["prices"] = PriceTable.from_yaml(p.prices)
    config = config_from_env(p.model, p.base_url, **overrides)
    return TeacherPolicy(OpenAIChatClient(config), model_name=config.model, max_attempts=p.attempts,
                         fallback_agent_id=p.fallback, allow_dynamic=p.dynamic)

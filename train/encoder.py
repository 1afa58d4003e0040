"""The state encoder: EpisodeState -> the prompt the trained policy reads.

Eight sections, each with a token cap (docs/architecture.md). A section over its cap keeps its most recent
content (the tail: the latest log lines and the end of long PDDL are what changed last) and
marks the cut with an ellipsis. The prompt is wrapped in the base model's chat template and
ends with `Selected Agent:`; the target is one label token (train/labels.py).

`encode_text` is the token-free variant (character caps) used by the fast policy and for
tokenizer-independent hashing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rollout.core.agent_table import AGENT_TABLE, AgentId
from rollout.core.state import EpisodeState
from solvers.errors import InputError

ENCODER_VERSION = "halo-enc-2"
# v1: sections in the design order (docs/architecture.md). v2: the static agent list first (it never changes, so a
# shared prefix for caching) and the fast-changing symptoms (errors, log, history) last, right
# before `Selected Agent:` - where left truncation to a short training length keeps them.
SUPPORTED_VERSIONS = ("halo-enc-1", "halo-enc-2")
PROMPT_SUFFIX = "Selected Agent:"
ELLIPSIS = "…"
# Rough characters per token, for the token-free caps.
CHARS_PER_TOKEN = 4

SYSTEM_PROMPT = (
    "You orchestrate a PDDL refinement loop. Read the state of the loop and reply with the label "
    "of the one repair agent that should act next."
)


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    cap_tokens: int


SECTIONS: tuple[Section, ...] = (
    Section("task", "Task", 800),
    Section("domain", "Domain", 400),
    Section("problem", "Problem", 300),
    Section("plan", "Plan", 200),
    Section("errors", "Validator errors", 200),
    Section("log", "Planner log", 80),
    Section("history", "Agent history", 30),
    Section("agents", "Available agents", 200),
)


class EncoderError(InputError, ValueError):
    pass


def _default_labels() -> dict[int, str]:
    return {a.agent_id: str(a.agent_id) for a in AGENT_TABLE}


def section_texts(state: EpisodeState, label_map: Mapping[int, str] | None = None) -> dict[str, str]:
    """The raw (untruncated) content of each section."""
    labels = dict(label_map) if label_map else _default_labels()
    task = state.task_description.strip()
    if state.spec_json:
        task += "\nJSON specification: " + state.spec_json.strip()
    if state.proposed_solution.strip():
        task += "\nProposed solution outline: " + state.proposed_solution.strip()
    status = (f"step {state.step}; target planner {state.target_planner}; "
              f"plan found {'yes' if state.plan_found else 'no'}; plan valid {'yes' if state.plan_valid else 'no'}; "
              f"error category {state.error_category or 'none'}")
    errors = status + ("\n" + state.validator_errors.strip() if state.validator_errors.strip() else "")
    history = ", ".join(_history_label(a, labels) for a in state.history) or "none"
    agents = "\n".join(f"{labels[a.agent_id].strip()}: {a.name}" for a in AGENT_TABLE)
    return {
        "task": task,
        "domain": state.domain.strip() or "(empty)",
        "problem": state.problem.strip() or "(empty)",
        "plan": state.plan.strip() or "(none)",
        "errors": errors,
        "log": state.planner_log.strip() or "(none)",
        "history": history,
        "agents": agents,
    }


def _history_label(agent_id: int, labels: Mapping[int, str]) -> str:
    if agent_id == AgentId.DYNAMIC:
        return "dynamic"
    return labels.get(agent_id, str(agent_id)).strip()


def truncate_left_tokens(text: str, cap: int, tokenizer: Any) -> str:
    """Keep the last `cap` tokens of `text` (one of them spent on the ellipsis)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if len(offsets) <= cap:
        return text
    start = offsets[len(offsets) - (cap - 1)][0]
    return ELLIPSIS + text[start:]


def truncate_left_chars(text: str, cap_chars: int) -> str:
    if len(text) <= cap_chars:
        return text
    return ELLIPSIS + text[len(text) - (cap_chars - 1):]


def section_order(version: str = ENCODER_VERSION) -> tuple[Section, ...]:
    if version == "halo-enc-1":
        return SECTIONS
    return (SECTIONS[-1], *SECTIONS[:-1])


def _body(parts: dict[str, str], version: str = ENCODER_VERSION) -> str:
    return "\n\n".join(f"### {s.title}\n{parts[s.key]}" for s in section_order(version))


def encode_text(state: EpisodeState, label_map: Mapping[int, str] | None = None) -> str:
    """Token-free encoding: the same sections with character caps (CHARS_PER_TOKEN per token)."""
    raw = section_texts(state, label_map)
    parts = {s.key: truncate_left_chars(raw[s.key], s.cap_tokens * CHARS_PER_TOKEN) for s in SECTIONS}
    return _body(parts) + "\n\n" + PROMPT_SUFFIX


def encode_state(state: EpisodeState, tokenizer: Any, version: str = ENCODER_VERSION,
                 label_map: Mapping[int, str] | None = None) -> str:
    """The full prompt string for an LLM policy; tokenise it with add_special_tokens=False."""
    if version not in SUPPORTED_VERSIONS:
        raise EncoderError(f"encoder version {version!r} is not supported by this code "
                           f"(have {', '.join(SUPPORTED_VERSIONS)})")
    raw = section_texts(state, label_map)
    parts = {s.key: truncate_left_tokens(raw[s.key], s.cap_tokens, tokenizer) for s in SECTIONS}
    user = _body(parts, version) + "\n\nReply with one agent label."
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
    if getattr(tokenizer, "chat_template", None):
        prefix = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        prefix = f"{SYSTEM_PROMPT}\n\n{user}\n\n"
    return prefix + PROMPT_SUFFIX


def max_prompt_tokens() -> int:
    """Upper bound of the section budget (the template and headings add a little)."""
    return sum(s.cap_tokens for s in SECTIONS)

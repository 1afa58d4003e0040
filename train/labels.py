"""Label tokens: each agent ID 0-20 must be exactly ONE token where it appears, right after
`Selected Agent:`, so the decision is a single forward pass with an argmax over 21 logits.

Tokenizers that split digits (SmolLM2, Llama-2, ...) make "10".."20" two tokens; the IDs then
cannot be the labels. `choose_label_set` tries, in order: the IDs with a leading space, the bare
IDs, the letters A-U with a leading space, the bare letters, and finally 21 added special tokens
(which need the model's embeddings resized). Every candidate is verified in context; the chosen
mapping is stored in the model's manifest and re-verified whenever a model is loaded.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rollout.core.agent_table import AGENT_IDS
from solvers.errors import InputError

CONTEXT = "Selected Agent:"
SPECIAL_LABELS = tuple(f"<|agent_{i}|>" for i in AGENT_IDS)


class LabelError(InputError, ValueError):
    pass


@dataclass(frozen=True)
class LabelSet:
    kind: str  # ids_space | ids | letters_space | letters | special
    label_map: dict[int, str]  # agent ID -> label text appended after the prompt
    token_ids: tuple[int, ...]  # token ID of each agent's label, indexed by agent ID
    added_tokens: bool = False  # True: special tokens were added; resize the model's embeddings

    def agent_for_token(self) -> dict[int, int]:
        return {tok: agent for agent, tok in enumerate(self.token_ids)}


def _candidates() -> list[tuple[str, dict[int, str]]]:
    letters = string.ascii_uppercase[: len(AGENT_IDS)]
    return [
        ("ids_space", {i: f" {i}" for i in AGENT_IDS}),
        ("ids", {i: str(i) for i in AGENT_IDS}),
        ("letters_space", {i: f" {letters[i]}" for i in AGENT_IDS}),
        ("letters", {i: letters[i] for i in AGENT_IDS}),
    ]


def label_token_id(tokenizer: Any, label: str, context: str = CONTEXT) -> int | None:
    """The single token `label` adds after `context`, or None if it is not exactly one token
    (or if appending it changes how the context itself tokenises)."""
    base = tokenizer.encode(context, add_special_tokens=False)
    full = tokenizer.encode(context + label, add_special_tokens=False)
    if len(full) != len(base) + 1 or full[: len(base)] != base:
        return None
    return int(full[-1])


def verify_label_map(tokenizer: Any, label_map: Mapping[int, str]) -> tuple[int, ...]:
    """Token IDs for a stored mapping; raises LabelError naming the first label that fails."""
    if sorted(label_map) != list(AGENT_IDS):
        raise LabelError("label map must cover agent IDs 0..20 exactly")
    ids: list[int] = []
    for agent in AGENT_IDS:
        tok = label_token_id(tokenizer, label_map[agent])
        if tok is None:
            pieces = tokenizer.encode(CONTEXT + label_map[agent], add_special_tokens=False)
            base = tokenizer.encode(CONTEXT, add_special_tokens=False)
            raise LabelError(f"label {label_map[agent]!r} for agent {agent} is not one token after {CONTEXT!r} "
                             f"for this tokenizer ({len(pieces) - len(base)} tokens)")
        ids.append(tok)
    if len(set(ids)) != len(ids):
        raise LabelError("two agents share a label token")
    return tuple(ids)


def choose_label_set(tokenizer: Any, *, allow_added_tokens: bool = True) -> LabelSet:
    """Pick the first valid label set for `tokenizer`. May add special tokens to it (last resort)."""
    for kind, mapping in _candidates():
        try:
            ids = verify_label_map(tokenizer, mapping)
        except LabelError:
            continue
        return LabelSet(kind, mapping, ids)
    if not allow_added_tokens:
        raise LabelError("no single-token label set exists for this tokenizer (IDs and letters A-U all fail) "
                         "and adding special tokens is not allowed")
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_LABELS)})
    mapping = dict(zip(AGENT_IDS, SPECIAL_LABELS, strict=True))
    try:
        ids = verify_label_map(tokenizer, mapping)
    except LabelError as exc:
        raise LabelError(f"no valid label set for this tokenizer, even with added special tokens: {exc}") from exc
    return LabelSet("special", mapping, ids, added_tokens=True)


def label_set_from_map(tokenizer: Any, label_map: Mapping[int, str]) -> LabelSet:
    """Rebuild a LabelSet from a manifest's mapping, adding special tokens if the mapping uses them."""
    mapping = {int(k): v for k, v in label_map.items()}
    added = set(mapping.values()) == set(SPECIAL_LABELS)
    if added and label_token_id(tokenizer, SPECIAL_LABELS[0]) is None:
        tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_LABELS)})
    ids = verify_label_map(tokenizer, mapping)
    kind = "special" if added else "stored"
    return LabelSet(kind, mapping, ids, added_tokens=added)

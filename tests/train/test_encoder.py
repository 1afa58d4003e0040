from __future__ import annotations

import pytest

from rollout.core.state import EpisodeState
from train.encoder import (
    ELLIPSIS,
    ENCODER_VERSION,
    PROMPT_SUFFIX,
    SECTIONS,
    EncoderError,
    encode_state,
    encode_text,
    truncate_left_tokens,
)
from train.labels import choose_label_set


def _state(**kw) -> EpisodeState:
    base = dict(task_description="Put block a on block b.", domain="(define (domain d))",
                problem="(define (problem p))",
                plan="(stack a b)\n", validator_errors="[validate.goal_not_reached] goal not reached",
                planner_log="search done", error_category="plan_invalid", plan_found=True, history=[2, 9, 13])
    base.update(kw)
    return EpisodeState(**base)


def test_prompt_has_sections_template_and_suffix(smollm2_tokenizer):
    labels = choose_label_set(smollm2_tokenizer)
    prompt = encode_state(_state(), smollm2_tokenizer, ENCODER_VERSION, labels.label_map)
    assert prompt.startswith("<|im_start|>system") and "<|im_start|>assistant\n" in prompt
    assert prompt.endswith(PROMPT_SUFFIX)
    for section in SECTIONS:
        assert f"### {section.title}\n" in prompt
    assert "C, J, N" in prompt  # history 2, 9, 13 rendered with the model's labels
    assert "N: AgentVariableSwapper" in prompt


def test_over_cap_keeps_tail_with_ellipsis(smollm2_tokenizer):
    log = "\n".join(f"line {i} of the planner output" for i in range(400))
    prompt = encode_state(_state(planner_log=log), smollm2_tokenizer)
    body = prompt.split("### Planner log\n", 1)[1].split("\n\n###", 1)[0]
    assert body.startswith(ELLIPSIS)
    assert body.endswith("line 399 of the planner output")
    assert "line 0 " not in body
    n = len(smollm2_tokenizer.encode(body, add_special_tokens=False))
    assert n <= 80 + 2  # cap, give or take the ellipsis merging with its neighbour


def test_truncate_under_cap_is_identity(smollm2_tokenizer):
    assert truncate_left_tokens("short text", 10, smollm2_tokenizer) == "short text"


def test_every_section_capped(smollm2_tokenizer):
    big = "word " * 5000
    prompt = encode_state(_state(task_description=big, domain=big, problem=big, plan=big, validator_errors=big,
                                 planner_log=big), smollm2_tokenizer)
    total = len(smollm2_tokenizer.encode(prompt, add_special_tokens=False))
    assert total < sum(s.cap_tokens for s in SECTIONS) + 200


def test_unknown_version_refused(smollm2_tokenizer):
    with pytest.raises(EncoderError, match="not supported"):
        encode_state(_state(), smollm2_tokenizer, "halo-enc-0")


def test_token_free_variant():
    text = encode_text(_state(planner_log="x" * 10000))
    assert text.endswith(PROMPT_SUFFIX)
    log = text.split("### Planner log\n", 1)[1].split("\n\n###", 1)[0]
    assert log.startswith(ELLIPSIS) and len(log) == 80 * 4


def test_v2_puts_static_agents_first_and_v1_still_encodes(smollm2_tokenizer):
    v2 = encode_state(_state(), smollm2_tokenizer)
    v1 = encode_state(_state(), smollm2_tokenizer, "halo-enc-1")
    assert v2.index("### Available agents") < v2.index("### Task") < v2.index("### Agent history")
    assert v1.index("### Task") < v1.index("### Agent history") < v1.index("### Available agents")
    assert sorted(v1.split("\n")) == sorted(v2.split("\n"))  # same content, other order

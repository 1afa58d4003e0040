"""Paraphrase and LLM-as-judge through the OpenAI-compatible client, against the local test
server (tests/fake_openai.py), including its errors."""

from __future__ import annotations

from synthetic import synthetic_episodes

from tests.fake_openai import FakeOpenAI, Reply
from train.dataset import BuildConfig, build_dataset, load_examples
from train.examples import select_examples
from train.llm_assist import JUDGE_SYSTEM, make_assist


def _responder(body: dict) -> Reply:
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"]
    if system == JUDGE_SYSTEM:
        # The judge rejects every choice of agent 17, accepts the rest.
        return Reply.text("REJECT" if "Chosen agent: 17 " in user else "ACCEPT")
    return Reply.text("Rephrased: " + user)


def test_judge_and_paraphrase_in_a_build(tmp_path):
    episodes = synthetic_episodes(n_tasks=6, seed=8)
    with FakeOpenAI(default=_responder) as server:
        assist = make_assist(server.base_url, "judge-model", max_attempts=1)
        card = build_dataset(episodes, tmp_path / "ds", BuildConfig(augment_copies=0, judge=True, paraphrase=True),
                             judge=assist.judge, paraphrase=assist.paraphrase)
        assert server.requests and all(r["model"] == "judge-model" for r in server.requests)
    examples = load_examples(tmp_path / "ds")
    before = select_examples(episodes)
    rejected = sum(e.agent_id == 17 for e in before)
    assert rejected > 0 and card.stages["judge rejected"] == rejected
    assert all(e.agent_id != 17 for e in examples)
    paraphrased = [e for e in examples if e.augmentation == "paraphrase"]
    assert len(paraphrased) == card.stages["paraphrases added"] > 0
    assert all(e.split == "train" and e.state.task_description.startswith("Rephrased: ") for e in paraphrased)
    assert assist.counts["judge_reject"] == rejected


def test_endpoint_errors_lose_nothing():
    example = select_examples(synthetic_episodes(n_tasks=2, seed=9))[0]
    with FakeOpenAI() as server:
        assist = make_assist(server.base_url, "m", max_attempts=1)
        server.script(Reply.status(500), Reply.status(503), Reply.text("no verdict here"), Reply.malformed())
        assert assist.judge(example) is True  # an unreachable judge keeps the verifier-accepted example
        assert assist.paraphrase(example) is None  # a failed paraphrase is skipped
        assert assist.judge(example) is True  # an answer without ACCEPT/REJECT keeps it too
        assert assist.paraphrase(example) is None
    assert assist.counts == {"paraphrase_ok": 0, "paraphrase_failed": 2, "judge_accept": 0, "judge_reject": 0,
                             "judge_failed": 2}

"""The agent backends a RefinementEnv is given, and the one the rollout worker builds from --llm."""

from __future__ import annotations

import pytest

from rollout.llm import OpenAIChatClient
from rollout.loop.backends import LLMAgents, agent_backend_for
from rollout.sim import SimConfig, SimWorld
from rollout.sim.backend import SimAgents
from rollout.sim.world import current_world
from rollout.tasks import load_tasks


def test_sim_specs_give_the_simulated_world() -> None:
    plain = agent_backend_for("sim")
    assert isinstance(plain, SimAgents) and plain.name == "sim" and plain.llm is None
    assert plain.config == SimConfig()
    realtime = agent_backend_for("sim:realtime=1,latency_ms=800")
    assert isinstance(realtime, SimAgents)
    assert realtime.config.latency_scale == 1.0 and realtime.config.latency_median_ms == 800.0


def test_a_sim_spec_with_a_base_url_sends_the_simulated_calls_over_http() -> None:
    backend = agent_backend_for("sim:realtime=1,base_url=http://127.0.0.1:9/v1", pool=7)
    assert isinstance(backend, SimAgents) and isinstance(backend.llm, OpenAIChatClient)
    assert backend.llm.config.base_url == "http://127.0.0.1:9/v1" and backend.llm.config.max_concurrency == 7


def test_an_openai_spec_gives_real_llm_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HALO_LLM_MAX_CONCURRENCY", raising=False)
    backend = agent_backend_for("openai:some-model@http://127.0.0.1:9/v1", pool=3)
    assert isinstance(backend, LLMAgents) and backend.name == "openai:some-model"
    assert isinstance(backend.llm, OpenAIChatClient) and backend.llm.config.max_concurrency == 3
    assert backend.world(load_tasks("planbench:blocksworld:1")[0], 0) is None


@pytest.mark.parametrize("spec", ["gpt", "sim:realtime=2", "openai:"])
def test_a_bad_spec_is_a_clear_error(spec: str) -> None:
    with pytest.raises(ValueError, match="--llm"):
        agent_backend_for(spec)


def test_each_episode_gets_a_fresh_world_of_its_task_and_seed() -> None:
    task = load_tasks("planbench:blocksworld:1")[0]
    backend = SimAgents(SimConfig(latency_scale=0.0))
    first, second = backend.world(task, 4), backend.world(task, 5)
    assert isinstance(first, SimWorld) and first is not second
    assert (first.task, first.seed, second.seed) == (task, 4, 5)
    assert current_world() is second  # the simulated teacher answers from the latest world of this context


def test_the_worker_gives_every_episode_its_one_backend() -> None:
    import asyncio

    from rollout.driver.episode_set import plan_episodes
    from rollout.driver.worker import RolloutWorker, WorkerSetup
    from rollout.loop.episode import run_episode

    tasks = load_tasks("planbench:blocksworld:2")
    specs = plan_episodes(tasks, 2, "one-backend", base_seed=3)
    seen = []

    async def episode_fn(task, policy, config, *, episode_id):  # noqa: ANN001, ANN202
        seen.append(config.backend)
        return await run_episode(task, policy, config, episode_id=episode_id)

    worker = RolloutWorker(WorkerSetup(run_id="one-backend", tasks=tasks, policy_spec="rules+scripted",
                                       llm_spec="sim:scale=0", episode_fn=episode_fn))
    batch = asyncio.run(worker.run_batch(specs))
    assert len(seen) == len(specs) and all(b is worker.agents for b in seen)
    assert isinstance(worker.agents, SimAgents) and worker.agents.config.latency_scale == 0.0
    assert all(o.summary is not None and o.summary.num_steps > 0 and not o.error for o in batch.outcomes)

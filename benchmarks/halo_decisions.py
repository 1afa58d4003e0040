"""Where an orchestrator's decisions, calls and failures come from, in the simulated world.

For each policy spec, runs the held-out tasks of the pipeline's split and prints, per situation
class (what the world knows is wrong: `rollout.sim.teacher_chat.situation`), how many decisions
the rules layer and the policy made there and how often the policy picked the repairing agent;
then the LLM calls per episode by source and why the failed episodes failed. The hidden faults
are read for this report only: no policy sees them. SIMULATED (llm_backend=sim).

    python benchmarks/halo_decisions.py --policy teacher:model=sim --policy rules+model:OUT/models/fast
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rollout.core.decision import Decision, Policy  # noqa: E402
from rollout.core.state import EpisodeState  # noqa: E402


class Probe(Policy):
    """Passes every decision through and notes (situation class, repairing agent, decision)."""

    def __init__(self, inner: Policy) -> None:
        self.inner, self.name, self.version = inner, inner.name, inner.version
        self.log: list[tuple[str, int, Decision]] = []

    def _decide(self, state: EpisodeState) -> Decision:
        raise RuntimeError("the probe decides only in an event loop")

    async def adecide(self, state: EpisodeState) -> Decision:
        from rollout.sim.teacher_chat import repairing_agent, situation
        from rollout.sim.world import current_world

        world = current_world()
        decision = await self.inner.adecide(state)
        if world is not None:
            self.log.append((situation(world, state), repairing_agent(world, state), decision))
        return decision

    def close(self) -> None:
        self.inner.close()


def report(spec: str, tasks: list, seeds: list[int], concurrency: int, llm: str = "sim") -> dict:
    """Print the policy's decisions per situation class; return the figures."""
    from rollout.loop.episode import EpisodeConfig, run_episode
    from rollout.policies import make_policy
    from rollout.sim.spec import sim_config_for
    from train.pipeline import calls_by_source

    sim = sim_config_for(llm)  # the world ("sim:world=FILE": a world file)
    probe = Probe(make_policy(spec, seed=seeds[0]))

    async def go() -> list:
        sem = asyncio.Semaphore(concurrency)

        async def one(task, seed):
            async with sem:
                return await run_episode(task, probe, EpisodeConfig(seed=seed, run_id="decisions", sim=sim))

        return list(await asyncio.gather(*[one(t, s) for t in tasks for s in seeds]))

    try:
        records = asyncio.run(go())
    finally:
        probe.close()
    n = len(records)
    oracle = sum(r.success_oracle is True for r in records)
    print(f"\n## {spec}: {n} episodes, oracle {100 * oracle / n:.1f}%, "
          f"LLM calls/episode {sum(r.total_llm_calls for r in records) / n:.2f} (SIMULATED, world "
          f"{sim.world_name} {sim.world_hash})\n")
    print("| situation | decided by | decisions | repairing agent chosen | agents chosen (most first) |")
    print("|---|---|---:|---:|---|")
    cells: dict[tuple[str, str], list] = defaultdict(list)
    for cls, right, d in probe.log:
        cells[(cls, "rules" if d.is_hardcoded else "policy")].append((right, d.agent_id))
    for (cls, who), picks in sorted(cells.items(), key=lambda kv: -len(kv[1])):
        hit = sum(a == r for r, a in picks) / len(picks)
        top = ", ".join(f"{a}: {c}" for a, c in Counter(a for _, a in picks).most_common(4))
        print(f"| {cls} | {who} | {len(picks)} | {100 * hit:.0f}% | {top} |")
    print(f"\nLLM calls per episode by source: {calls_by_source(records)}")
    failed = Counter("validator accepted, oracle rejected" if r.success_validator else
                     f"no accepted plan after {len(r.steps)} steps" for r in records if r.success_oracle is not True)
    print(f"failures: {dict(failed)}")
    return {"policy": spec, "episodes": n, "oracle": oracle / n, "world": sim.world_hash,
            "calls_by_source": calls_by_source(records), "failures": dict(failed),
            "situations": {f"{cls}/{who}": {"decisions": len(picks), "right": sum(a == r for r, a in picks)}
                           for (cls, who), picks in cells.items()}}


def main(argv: list[str] | None = None) -> int:
    from rollout.tasks.loaders import load_tasks
    from train.pipeline import split_tasks

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", action="append", required=True, help="policy spec (repeatable)")
    ap.add_argument("--tasks", default="planbench:all:25,ipc:bundled")
    ap.add_argument("--seeds", default="20000,20001", help="the pipeline's evaluation seeds")
    ap.add_argument("--held-out-fraction", type=float, default=0.3)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--llm", default="sim", help="the simulated world: sim or sim:world=FILE")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
        tasks = [t for t in load_tasks(args.tasks) if t.gold_domain and t.gold_problem]
        _, held = split_tasks(tasks, args.held_out_fraction)
        figures = [report(spec, held, seeds, args.concurrency, args.llm) for spec in args.policy]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

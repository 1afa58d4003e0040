"""The HALO pipeline end to end at a small size: simulated teacher rollouts (real solvers), the
verifier filter, augmentation, the fast policy, and the held-out comparison table."""

from __future__ import annotations

from collections import Counter

import pytest

from rollout.store import TrajectoryStore
from rollout.tasks.loaders import load_tasks
from train.pipeline import (
    COLUMNS,
    EXIT_STAGE_KEY,
    MIN_EPISODES,
    NO_EXIT_LABEL,
    PAIRED_KEY,
    XD_PAIRED,
    PipelineConfig,
    PipelineError,
    domain_key,
    format_report,
    format_table,
    run_pipeline,
    split_tasks,
    verdict_seeds,
)
from train.table2 import TABLE2_PAIRED_KEY, table2_family

SIM = "simulated (llm_backend=sim)"


def test_pipeline_small_end_to_end(tmp_path):
    cfg = PipelineConfig(out=str(tmp_path), tasks="planbench:all:2,ipc:bundled", train_seeds=1, eval_seeds=1,
                         ablations=False, cross_domain=False, concurrency=8, table2_min_pairs=6)
    result = run_pipeline(cfg, log=lambda _: None)
    table = format_table(result.comparison)
    assert table.splitlines()[0] == "| " + " | ".join(COLUMNS) + " |"
    rows = {(r.family, r.policy): r for r in result.comparison}
    for family in ("planbench", "classical", "all"):
        for policy in ("fast policy", "prompted teacher", "rules+teacher", "rules+random", "majority class"):
            row = rows[(family, policy)]
            assert row.source == SIM and row.episodes and row.oracle_success is not None
            p = row.oracle_success
            assert row.oracle_se == pytest.approx((p * (1 - p) / row.episodes) ** 0.5)
    # the Table-2 verdicts' three rows go on to 6 episodes per family; the others keep one per task
    n_tasks = rows[("planbench", "rules+random")].episodes
    for policy in ("fast policy", "prompted teacher", "stronger teacher"):
        assert rows[("planbench", policy)].episodes == n_tasks * -(-6 // n_tasks)
    assert result.stages[TABLE2_PAIRED_KEY]["planbench"]["fast policy - prompted teacher"]["episodes"] >= 6
    published = [r for r in result.comparison if r.source == "published real-LLM"]
    assert {r.family for r in published} == {"planbench", "classical"} and all(r.episodes is None for r in published)

    teacher, fast = rows[("all", "prompted teacher")], rows[("all", "fast policy")]
    # the prompted teacher's own calls are counted in the episode's LLM calls and priced
    assert teacher.orchestrator_calls > 0 and teacher.llm_calls > teacher.orchestrator_calls
    # with no rules layer in front of it, the prompted teacher pays for every decision
    assert teacher.rule_share == 0 and teacher.orchestrator_calls >= teacher.avg_steps
    sources = result.stages["LLM calls per episode by source"]
    assert sources["prompted teacher"]["orchestrator"] == round(teacher.orchestrator_calls, 2)
    assert sources["fast policy"]["orchestrator"] == 0
    assert teacher.orchestration_cost > 0 and teacher.decision_ms > 100  # simulated API latency
    assert fast.orchestrator_calls == 0 and 0 < fast.orchestration_cost < teacher.orchestration_cost / 45

    episodes = TrajectoryStore(str(tmp_path / "store")).read_episodes(["pipeline-teacher"])
    assert len(episodes) == result.stages["teacher episodes"]["episodes"] and all(e.llm_backend == "sim"
                                                                                  for e in episodes)
    taught = [s for e in episodes for s in e.steps if s.decided_by in ("teacher", "fallback")]
    assert taught and all(s.llm_calls >= 1 and s.tokens_in > 500 for s in taught)
    assert result.stages["judge"].startswith("skipped")
    # the fast policy against the teacher, episode by episode (same tasks, same seeds)
    paired = result.stages[PAIRED_KEY]["fast policy"]
    assert paired["episodes"] == fast.episodes
    assert paired["difference"] == pytest.approx(100 * (fast.oracle_success - teacher.oracle_success), abs=0.01)
    assert paired["better"] - paired["worse"] == round(paired["difference"] * fast.episodes / 100)
    assert "SIMULATED" in format_report(result) and result.targets
    # the main fast policy moves to the next-ranked agent, its discount measured on the teacher's data
    from train.fast_policy import retry_discount_from
    from train.manifest import Manifest

    extra = Manifest.load(tmp_path / "models" / "fast").extra
    assert extra["retry_discount"] == pytest.approx(retry_discount_from(episodes))
    assert 0.05 <= extra["retry_discount"] < 1
    assert extra["feature_version"] == "halo-feat-4"
    # expert iteration from the DAgger policy is the main policy; its decision settings go on with it
    exit_manifest = Manifest.load(tmp_path / "models" / "fast-exit")
    assert exit_manifest.extra["rl"]["advantage"] == "exit" and 0.05 <= exit_manifest.extra["retry_discount"] < 1
    searched = result.stages[EXIT_STAGE_KEY]
    assert searched["episodes"] == 2 * result.stages["tasks"]["train"] and searched["exit_examples"] > 0
    assert rows[("all", NO_EXIT_LABEL)].episodes == rows[("all", "rules+random")].episodes  # one seed per task
    assert NO_EXIT_LABEL in result.stages[PAIRED_KEY]
    # Table 2: families x policies with the paper's accounting, in pipeline.json
    import json

    families = json.loads((tmp_path / "pipeline.json").read_text())["families"]
    assert set(families) == {"planbench", "classical"}
    for rows in families.values():
        assert {"fast policy", "prompted teacher", "stronger teacher", "vanilla LLM (no PDDL)"} <= set(rows)
        assert rows["fast policy"]["llm_calls"] >= 1 + rows["fast policy"]["decision_calls"]  # the draft counted
        assert rows["prompted teacher"]["usd_paper"] == rows["prompted teacher"]["usd_ours"] > 0
    assert "Table 2" in format_report(result) and "published real-LLM (paper)" in format_report(result)


def test_cross_domain_pairs_the_held_out_domains_with_a_policy_that_saw_them(tmp_path):
    """The cross-domain verdict's figure: on the held-out domains' held-out tasks, the stage-2 policy
    (trained with those domains) minus the one trained without them, same tasks and seeds."""
    cfg = PipelineConfig(out=str(tmp_path), tasks="planbench:all:2,ipc:bundled", train_seeds=1, eval_seeds=1,
                         ablations=False, cross_domain=True, cross_domain_seeds=1, cross_domain_min_pairs=3,
                         table2_min_pairs=0, concurrency=8, stronger="", vanilla=False, dynamic_ablation=False,
                         dagger_rounds=0, exit_iterations=0)
    result = run_pipeline(cfg, log=lambda _: None)
    tasks = [t for t in load_tasks(cfg.tasks) if t.gold_domain and t.gold_problem]
    unseen = Counter(table2_family(t.family) for t in split_tasks(tasks, cfg.held_out_fraction, cfg.seed)[1]
                     if domain_key(t) in cfg.holdout_domains)
    rows = {r["family"]: r for r in result.cross_domain}
    assert set(rows) == {"planbench", "classical"}
    for fam, row in rows.items():
        paired = row[XD_PAIRED]
        # one pair per such task and seed; the seeds go on past the one asked for until 3 pairs
        assert row["verdict seeds"] == max(1, -(-3 // unseen[fam]))
        assert paired["episodes"] == unseen[fam] * row["verdict seeds"] >= 3
        _, ok, figures = next(v for v in result.targets if v[0].startswith(f"cross-domain {fam}:"))
        # the verdict reads that figure: here too few pairs to judge, said with their count
        assert paired["episodes"] < MIN_EPISODES and not ok
        assert f"cross-domain/{fam} has {int(paired['episodes'])} episodes" in figures


def test_verdict_seeds_continue_the_sequence_until_enough_pairs():
    assert verdict_seeds([20_000, 20_001], tasks=12, min_pairs=400) == list(range(20_000, 20_034))
    assert verdict_seeds([20_000, 20_001], tasks=42, min_pairs=0) == [20_000, 20_001]
    assert verdict_seeds([5], tasks=0, min_pairs=400) == [5]  # no task: nothing to pair


@pytest.mark.parametrize("kwargs,message", [
    ({"train_seeds": 0}, "at least 1"),
    ({"cross_domain_seeds": 0}, "at least 1"),
    ({"cross_domain_min_pairs": -1}, "cross_domain_min_pairs and table2_min_pairs must be >= 0"),
    ({"table2_min_pairs": -1}, "cross_domain_min_pairs and table2_min_pairs must be >= 0"),
    ({"held_out_fraction": 1.0}, "held_out_fraction"),
    ({"tasks": "planbench:blocksworld:4", "holdout_domains": ("classical/nowhere",)}, "not in the tasks"),
    ({"tasks": "planbench:nowhere"}, "unknown PlanBench domain"),
])
def test_pipeline_bad_input_is_a_clear_error(tmp_path, kwargs, message):
    with pytest.raises((PipelineError, ValueError), match=message):
        run_pipeline(PipelineConfig(out=str(tmp_path), **kwargs), log=lambda _: None)

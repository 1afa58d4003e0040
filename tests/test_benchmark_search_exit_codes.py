"""benchmarks/search.py and benchmarks/env_fork.py: a printed target that fails, or a figure that
cannot be computed, fails the run (hand-built figures, no long runs)."""

from __future__ import annotations

from test_benchmark_exit_codes import _load

GOOD = {"call_ratio": 1.5, "call_ratio_upper": 1.8, "greedy_success": 0.3, "search_success": 0.5,
        "success_diff": 0.2, "success_diff_se": 0.02, "success_diff_lower": 0.17, "greedy_wrong": 0.14,
        "search_wrong": 0.04, "wrong_vs_half_greedy": -0.03, "wrong_vs_half_greedy_upper": -0.01}


def test_search_benchmark_targets() -> None:
    search = _load("search")
    lines, ok = search.judge({"extreme": GOOD, "hard": GOOD})
    assert ok and len(lines) == 6 and all(line.endswith(": met") for line in lines)
    lines, _ = search.judge({"extreme": {**GOOD, "call_ratio_recorded": 1.6}, "hard": GOOD})
    assert "[without the draft: 1.60]" in lines[0]
    _, ok = search.judge({"extreme": {**GOOD, "success_diff_lower": 0.12}, "hard": GOOD})  # +10 is hard's only
    assert not ok
    _, ok = search.judge({"extreme": GOOD, "hard": {**GOOD, "success_diff_lower": 0.12}})
    assert ok
    _, ok = search.judge({"extreme": GOOD, "hard": {**GOOD, "call_ratio_upper": 2.01}})
    assert not ok
    _, ok = search.judge({"extreme": GOOD, "hard": {**GOOD, "wrong_vs_half_greedy_upper": 0.001}})
    assert not ok
    lines, ok = search.judge({"extreme": {**GOOD, "call_ratio_upper": float("nan")}, "hard": GOOD})
    assert not ok and "NOT met" in lines[0]
    lines, ok = search.judge({"extreme": GOOD})  # a level without pairs
    assert not ok and lines[-1].startswith("hard: no pairs")


def test_search_benchmark_figures_are_paired() -> None:
    from rollout.core.trajectory import EpisodeRecord

    search = _load("search")

    def record(calls: int, valid: bool, oracle: bool) -> EpisodeRecord:
        return EpisodeRecord("e", "r", "t", "f", "d", "p", "1", "sim", valid, oracle, total_llm_calls=calls)

    pairs = [search.Pair("t", "hard", record(4, True, False), record(8, True, True)),
             search.Pair("t", "hard", record(6, False, False), record(10, True, True)),
             search.Pair("t", "hard", record(5, True, True), record(5, True, True))]
    f = search.level_figures(pairs)
    # a real run pays one more call per episode than the simulated world records: the draft's
    assert f["call_ratio"] == 26 / 18 and f["greedy_calls"] == 6 and f["search_calls"] == 26 / 3
    assert f["call_ratio_recorded"] == 23 / 15 and f["call_ratio_upper"] > f["call_ratio"]
    assert f["success_diff"] == 2 / 3 and f["greedy_wrong"] == 1 / 3
    assert f["search_wrong"] == 0 and f["success_diff_lower"] < f["success_diff"]


def test_fork_benchmark_targets() -> None:
    fork = _load("env_fork")
    assert fork.judge({"median_fork_ms": 0.1, "median_fork_kb": 8.0})[1]
    assert not fork.judge({"median_fork_ms": 1.2, "median_fork_kb": 8.0})[1]
    assert not fork.judge({"median_fork_ms": 0.1, "median_fork_kb": 51.0})[1]
    assert not fork.judge({"median_fork_ms": 0.1})[1]  # a figure that is missing fails


def test_throughput_benchmark_target() -> None:
    throughput = _load("search_throughput")
    assert throughput.judge({"per_cpu_ratio": 0.85})[1]
    assert not throughput.judge({"per_cpu_ratio": 0.63})[1]
    assert not throughput.judge({})[1]


def test_search_job_benchmark_target_and_figures() -> None:
    job = _load("search_job")
    assert job.judge(0.81)[1]
    assert not job.judge(0.79)[1]
    assert not job.judge(float("nan"))[1]  # a figure that cannot be computed fails
    # the steady part: the first and last fifth of the completions are left out
    assert job.steady_gaps([float(t) for t in range(10, 0, -1)], 0.2) == [1.0] * 5

    def figures(gaps: list[float]) -> object:
        return job.JobFigures("x", "p", 40, 60.0, gaps, 8.0, 7.5, 30.0, 0.4, 20, 2)

    even = figures([1.0] * 30)
    point, lower, upper = job.ratio_bounds(figures([2.0] * 30), even)
    assert point == lower == upper == 0.5  # half the rate, and no spread to bound
    point, lower, upper = job.ratio_bounds(figures([0.5, 1.5] * 15), even)
    assert point == 1.0 and lower < 1.0 < upper
    assert figures([1.0] * 30).row()["episodes_per_s_per_cpu"] == 0.5


def test_search_benchmark_refuses_a_bad_world_file_in_one_line(tmp_path, capsys) -> None:
    search = _load("search")
    bad = tmp_path / "world.yaml"
    bad.write_text("version: 1\nname: broken\nworld: {repair_prob: 2.5}\n")
    for path in (tmp_path / "missing.yaml", bad):
        assert search.main(["--tasks", "gen:/nowhere", "--world", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err


def test_paid_calls_add_the_draft_only_where_the_world_wrote_it_for_free() -> None:
    from rollout.core.trajectory import EpisodeRecord
    from train.accounting import paid_llm_calls

    def record(backend: str) -> EpisodeRecord:
        return EpisodeRecord("e", "r", "t", "f", "d", "p", "1", backend, True, True, total_llm_calls=5)

    assert paid_llm_calls(record("sim")) == 6  # the simulated world drafts for free
    assert paid_llm_calls(record("openai")) == 5  # a real run's draft call is one of its recorded steps


def test_search_benchmark_replaces_pairs_lost_to_infrastructure(monkeypatch) -> None:
    """A pair an infrastructure failure interrupts is replaced by the level's next task on a seed
    of its own; a level that runs out of tasks is reported short (the solvers' failure itself
    cannot be caused on demand here, so run_pairs is replaced by one that loses task x2)."""
    import asyncio

    search = _load("search")
    batches = []

    async def losing_x2(batch, greedy, policy, seed, concurrency, sim=None, first_index=0):
        batches.append((first_index, [t for _, t in batch]))
        kept = [search.Pair(t, level, None, None) for level, t in batch if t != "x2"]
        return kept, search.RunCounts(dropped=len(batch) - len(kept))

    monkeypatch.setattr(search, "run_pairs", losing_x2)
    levels = {"extreme": ["x1", "x2", "x3", "x4"], "hard": ["h1", "h2", "h3"]}
    pairs, counts = asyncio.run(search.run_levels(levels, 2, "g", "s", 0, 1))
    assert [p.task_id for p in pairs] == ["x1", "h1", "h2", "x3"] and counts.dropped == 1
    assert batches == [(0, ["x1", "x2", "h1", "h2"]), (4, ["x3"])]  # the replacement's seed follows the first batch
    pairs, counts = asyncio.run(search.run_levels({"extreme": ["x1", "x2"], "hard": []}, 2, "g", "s", 0, 1))
    assert [p.task_id for p in pairs] == ["x1"] and counts.dropped == 1  # no task left to replace x2

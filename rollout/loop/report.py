"""Per-policy summaries of episodes: the columns of the published comparison (docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass

from rollout.core.agent_table import AgentId
from rollout.core.trajectory import EpisodeRecord, is_infra_failure


@dataclass(frozen=True)
class PolicySummary:
    policy: str
    llm_backend: str
    episodes: int
    oracle_success: float | None  # None when no episode had a gold answer
    validator_success: float
    avg_steps: float  # refinement steps, without the final natural-language rendering
    llm_calls_per_episode: float
    cost_per_task_usd: float
    rule_decision_share: float
    errors: int
    infra_failures: int = 0  # episodes a dependency failed (rollout/core/infra.py): in no other column


def refinement_steps(record: EpisodeRecord) -> int:
    steps = record.steps
    if steps and steps[-1].agent_id == AgentId.NATURAL_LANGUAGE and steps[-1].is_hardcoded:
        return len(steps) - 1
    return len(steps)


def summarize(policy: str, records: list[EpisodeRecord]) -> PolicySummary:
    """Infrastructure failures are counted apart and left out of every other column."""
    if not records:
        raise ValueError(f"no episodes for policy {policy!r}")
    infra = sum(is_infra_failure(r) for r in records)
    records = [r for r in records if not is_infra_failure(r)]
    n = max(1, len(records))
    graded = [r.success_oracle for r in records if r.success_oracle is not None]
    decisions = [s for r in records for s in r.steps[:refinement_steps(r)]]
    backends = sorted({r.llm_backend for r in records})
    return PolicySummary(
        policy=policy,
        llm_backend=",".join(backends),
        episodes=len(records),
        oracle_success=sum(graded) / len(graded) if graded else None,
        validator_success=sum(r.success_validator for r in records) / n,
        avg_steps=sum(refinement_steps(r) for r in records) / n,
        llm_calls_per_episode=sum(r.total_llm_calls for r in records) / n,
        cost_per_task_usd=sum(r.total_cost_usd for r in records) / n,
        rule_decision_share=sum(s.is_hardcoded for s in decisions) / len(decisions) if decisions else 0.0,
        errors=sum(bool(r.error) for r in records),
        infra_failures=infra,
    )


HEADERS = ("policy", "backend", "episodes", "oracle success", "validator success", "avg steps",
           "LLM calls/episode", "cost/task", "rule decisions", "errors", "infra failures")


def summary_row(s: PolicySummary) -> tuple[str, ...]:
    oracle = "n/a" if s.oracle_success is None else f"{100 * s.oracle_success:.1f}%"
    return (s.policy, s.llm_backend, str(s.episodes), oracle, f"{100 * s.validator_success:.1f}%",
            f"{s.avg_steps:.2f}", f"{s.llm_calls_per_episode:.2f}", f"${s.cost_per_task_usd:.4f}",
            f"{100 * s.rule_decision_share:.0f}%", str(s.errors), str(s.infra_failures))


def format_markdown(summaries: list[PolicySummary]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(summary_row(s)) + " |" for s in summaries]
    return "\n".join(lines)


GROUP_KEYS = ("policy", "domain", "level", "family")
LEVEL_ORDER = ("easy", "medium", "hard", "extreme", "custom", "-")


def record_level(record: EpisodeRecord) -> str:
    """The difficulty level of a generated task (its ID is gen/DOMAIN/LEVEL/HASH), else '-'."""
    parts = record.task_id.split("/")
    return parts[2] if len(parts) == 4 and parts[0] == "gen" else "-"


def parse_group_by(text: str | None) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in (text or "").split(",") if k.strip())
    bad = [k for k in keys if k not in GROUP_KEYS]
    if bad:
        raise ValueError(f"cannot group by {', '.join(bad)}; choose from {', '.join(GROUP_KEYS)}")
    return keys


def summarize_by(records: list[EpisodeRecord], by: tuple[str, ...]) -> list[tuple[tuple[str, ...], PolicySummary]]:
    """One summary per (policy, *by) group, levels in difficulty order."""
    def key(r: EpisodeRecord) -> tuple[str, ...]:
        values = {"policy": r.policy_name, "domain": r.domain_name, "level": record_level(r), "family": r.family}
        return tuple(values[k] for k in by if k != "policy")

    groups: dict[tuple[str, tuple[str, ...]], list[EpisodeRecord]] = {}
    for r in records:
        groups.setdefault((r.policy_name, key(r)), []).append(r)
    rank = {lv: i for i, lv in enumerate(LEVEL_ORDER)}
    cols = [k for k in by if k != "policy"]

    def order(item: tuple[tuple[str, tuple[str, ...]], list[EpisodeRecord]]) -> tuple:
        policy, values = item[0]
        return (policy, *((rank.get(v, 99), v) if c == "level" else (0, v) for c, v in zip(cols, values, strict=True)))

    return [(values, summarize(policy, rs)) for (policy, values), rs in sorted(groups.items(), key=order)]


def format_grouped(groups: list[tuple[tuple[str, ...], PolicySummary]], by: tuple[str, ...], *,
                   markdown: bool = False) -> str:
    """The report table with the group columns first (plain text aligned, or Markdown)."""
    cols = [k for k in by if k != "policy"]
    headers = (*cols, *HEADERS)
    rows = [(*values, *summary_row(s)) for values, s in groups]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*headers), fmt.format(*("-" * w for w in widths)), *(fmt.format(*r) for r in rows)])

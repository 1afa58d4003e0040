"""The plan jobs' LLM budget: every LLM call of every plan job goes through the same job-wide
rate coordinator that a rollout job's workers share (rollout/llm/budget.py).

With any of `plan_llm_rpm`, `plan_llm_tpm`, `plan_llm_concurrency` set, the service has one
`BudgetCoordinator` actor (named per application, detached: it outlives a runner restart, so a
resumed runner draws from the same buckets) and the plan runner installs a process-wide `LLMGate`
leasing from it: requests per minute, tokens per minute and calls in flight for all plan jobs
together, a 429 from the LLM slowing every job down, Retry-After honoured service-wide. Without
limits the gate only counts (the runner's `stats()` reports it either way).
"""

from __future__ import annotations

from typing import Any

from rollout.llm.budget import BudgetCoordinator, BudgetLimits, LLMGate, install_gate, llm_gate

BUDGET_PREFIX = "halo-llm-budget"


def budget_name(app_name: str) -> str:
    return f"{BUDGET_PREFIX}-{app_name}"


def coordinator_for(limits: BudgetLimits, app_name: str, namespace: str) -> Any:
    """The service's coordinator actor (created on first use, found after a restart)."""
    import ray

    cls = ray.remote(num_cpus=0, max_restarts=-1)(BudgetCoordinator)
    return cls.options(name=budget_name(app_name), namespace=namespace, lifetime="detached",  # type: ignore[attr-defined]
                       get_if_exists=True).remote(limits)


def install_plan_budget(limits: BudgetLimits, app_name: str, namespace: str) -> LLMGate:
    """This process's LLM gate: leasing from the service's coordinator when limits are set. The
    application has one runner at a time, so it leases under one name: a new runner first hands back
    what the last one held (a runner that died holding concurrency slots would leave the new one
    none), as a rollout job does for a worker that died."""
    if not limits.enabled:
        return llm_gate()
    coordinator = coordinator_for(limits, app_name, namespace)
    worker = f"plan-runner-{app_name}"
    coordinator.forget_worker.remote(worker)  # before this gate's first lease: one caller's calls keep their order
    return install_gate(LLMGate(coordinator, limits, worker=worker))


def stop_plan_budget(app_name: str, namespace: str) -> None:
    """Remove the service's coordinator (stop_service): a new service starts with fresh limits."""
    import contextlib

    import ray

    with contextlib.suppress(ValueError):  # none: no limits were set
        ray.kill(ray.get_actor(budget_name(app_name), namespace=namespace))

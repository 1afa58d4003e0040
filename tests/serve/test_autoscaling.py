"""Serve's autoscaler sees the fast ingress's requests (serve/autoscaling.py): the policy on
Serve's own AutoscalingContext, and the application built with it."""

from __future__ import annotations

from types import SimpleNamespace

from ray.serve.config import AutoscalingContext

from serve.autoscaling import FAST_IN_FLIGHT, POLICY_FUNCTION, fast_tier_policy
from serve.config import ServeConfig


def _ctx(*, serve_requests: float, fast: list[float], current: int, now: float, state=None, lo=1, hi=8):
    replicas = [f"r{i}" for i in range(len(fast))]
    return AutoscalingContext(
        deployment_id=None, deployment_name="DecisionService", app_name="halo-decide",
        current_num_replicas=current, target_num_replicas=current, running_replicas=replicas,
        total_num_requests=serve_requests, total_queued_requests=0.0,
        aggregated_metrics={FAST_IN_FLIGHT: dict(zip(replicas, fast, strict=True))}, raw_metrics=None,
        capacity_adjusted_min_replicas=lo, capacity_adjusted_max_replicas=hi, policy_state=state or {},
        last_scale_up_time=None, last_scale_down_time=None, current_time=now,
        config=SimpleNamespace(target_ongoing_requests=8))


def test_fast_ingress_load_scales_up_although_serve_routes_nothing():
    want, _ = fast_tier_policy(_ctx(serve_requests=0, fast=[20, 20], current=2, now=0))
    assert want == 5  # ceil(40 / 8)
    want, _ = fast_tier_policy(_ctx(serve_requests=4, fast=[200, 200], current=2, now=0))
    assert want == 8  # capped at the maximum


def test_scale_down_waits_for_the_delay_and_a_burst_resets_it():
    want, state = fast_tier_policy(_ctx(serve_requests=0, fast=[1, 1, 1, 1], current=4, now=100.0))
    assert want == 4 and state["low_since"] == 100.0
    want, state = fast_tier_policy(_ctx(serve_requests=0, fast=[1, 1, 1, 1], current=4, now=120.0, state=state))
    assert want == 4
    want, state = fast_tier_policy(_ctx(serve_requests=0, fast=[1, 1, 1, 1], current=4, now=131.0, state=state))
    assert want == 1 and "low_since" not in state
    _, state = fast_tier_policy(_ctx(serve_requests=0, fast=[0, 0], current=2, now=200.0))
    want, state = fast_tier_policy(_ctx(serve_requests=0, fast=[30, 0], current=2, now=210.0, state=state))
    assert want == 4 and "low_since" not in state


def test_the_application_uses_the_policy_only_with_the_fast_ingress():
    from serve.app import build_app

    def policy_of(config: ServeConfig) -> str:
        deployment = build_app(config)._bound_deployment
        return str(deployment._deployment_config.autoscaling_config.policy.policy_function)

    auto = {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8}
    assert policy_of(ServeConfig(model="/m", autoscaling_config=auto)) == POLICY_FUNCTION
    assert policy_of(ServeConfig(model="/m", autoscaling_config=auto, fast_ingress=False)) != POLICY_FUNCTION

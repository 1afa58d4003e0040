"""Serve's autoscaler for decision replicas that also answer on their fast ingress.

Serve's default policy counts the requests Serve itself routes (proxy, handles, its direct
ingress). Requests on a replica's fast ingress (serve/fast_ingress.py) never pass Serve's request
path, so each replica reports them through `record_autoscaling_stats()` as
`fast_ingress_in_flight`, and this policy scales on the sum of both:

    desired = ceil((Serve's ongoing requests + fast-ingress requests in flight) / target_ongoing_requests)

clamped to the capacity-adjusted min/max. Up at once; down only after the load has stayed below
the current count for `downscale_delay_s` (policy_kwargs, default 30 s), so a short lull does
not drop a replica that the next burst needs.
"""

from __future__ import annotations

import math
from typing import Any

FAST_IN_FLIGHT = "fast_ingress_in_flight"
POLICY_FUNCTION = "serve.autoscaling:fast_tier_policy"


def fast_tier_policy(ctx: Any, downscale_delay_s: float = 30.0) -> tuple[int, dict[str, Any]]:
    """(replicas wanted, policy state) for a ray.serve.config.AutoscalingContext."""
    target = float(getattr(ctx.config, "target_ongoing_requests", None) or 2.0)
    fast = sum((ctx.aggregated_metrics or {}).get(FAST_IN_FLIGHT, {}).values())
    load = float(ctx.total_num_requests or 0.0) + float(fast)
    lo, hi = ctx.capacity_adjusted_min_replicas, ctx.capacity_adjusted_max_replicas
    want = min(hi, max(lo, math.ceil(load / target) if load > 0 else lo))
    state = dict(ctx.policy_state or {})
    current = ctx.target_num_replicas
    now = ctx.current_time or 0.0
    if want >= current:
        state.pop("low_since", None)
        return want, state
    low_since = state.setdefault("low_since", now)
    if now - low_since >= downscale_delay_s:
        state.pop("low_since", None)
        return want, state
    return current, state

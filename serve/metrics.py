"""Service metrics: each replica counts locally, snapshots go to the registry actor, and /metrics
renders the sum over all replicas in the Prometheus text format.

A scrape lands on one replica at random, so per-replica prometheus_client registries would show a
random slice; cumulative snapshots summed in one place show the whole service (other replicas'
numbers are at most one sync interval old).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "halo_serve_requests": ("HTTP requests by route and status code", ("route", "code")),
    "halo_serve_decisions": ("Decisions by agent and source (rule or model)", ("agent_id", "agent_name", "decided_by")),
    "halo_serve_errors": ("Errors by kind", ("kind",)),
    "halo_serve_feedback_episodes": ("Feedback episodes by outcome", ("outcome",)),
    "halo_serve_key_file_problems": ("Key file re-reads that kept old keys or refused lines, by problem",
                                     ("problem",)),
}
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "halo_serve_request_latency_seconds": ("Request latency inside the replica", ("route",), LATENCY_BUCKETS_S),
    "halo_serve_decision_latency_seconds": ("Decision latency by source", ("decided_by",), LATENCY_BUCKETS_S),
    "halo_serve_model_batch_size": ("States per model batch", (), tuple(float(b) for b in BATCH_BUCKETS)),
}

LabelKey = tuple[str, ...]
Snapshot = dict[str, Any]


class ReplicaMetrics:
    """Thread-safe local counters and histograms; `snapshot()` is cumulative."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[LabelKey, float]] = {name: {} for name in COUNTERS}
        self._hists: dict[str, dict[LabelKey, list[float]]] = {name: {} for name in HISTOGRAMS}

    def inc(self, name: str, labels: LabelKey = (), amount: float = 1.0) -> None:
        with self._lock:
            series = self._counters[name]
            series[labels] = series.get(labels, 0.0) + amount

    def observe(self, name: str, value: float, labels: LabelKey = ()) -> None:
        buckets = HISTOGRAMS[name][2]
        with self._lock:
            series = self._hists[name]
            row = series.get(labels)
            if row is None:
                # per-bucket counts (+Inf last), then sum, then count
                row = series[labels] = [0.0] * (len(buckets) + 3)
            row[bisect.bisect_left(buckets, value)] += 1
            row[-2] += value
            row[-1] += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            return {"counters": {n: dict(s) for n, s in self._counters.items()},
                    "hists": {n: {k: list(v) for k, v in s.items()} for n, s in self._hists.items()}}


def merge(snapshots: Iterable[Snapshot]) -> Snapshot:
    total: Snapshot = {"counters": {n: {} for n in COUNTERS}, "hists": {n: {} for n in HISTOGRAMS}}
    for snap in snapshots:
        for name, series in snap.get("counters", {}).items():
            dest = total["counters"].setdefault(name, {})
            for key, value in series.items():
                dest[tuple(key)] = dest.get(tuple(key), 0.0) + value
        for name, series in snap.get("hists", {}).items():
            dest = total["hists"].setdefault(name, {})
            for key, row in series.items():
                cur = dest.get(tuple(key))
                dest[tuple(key)] = list(row) if cur is None else [a + b for a, b in zip(cur, row, strict=True)]
    return total


class _SnapshotCollector:
    def __init__(self, snap: Snapshot, info: Mapping[str, Mapping[str, str]]) -> None:
        self.snap = snap
        self.info = info

    def collect(self) -> Iterable[Any]:
        for name, (doc, label_names) in COUNTERS.items():
            fam = CounterMetricFamily(name, doc, labels=list(label_names))
            for key, value in sorted(self.snap["counters"].get(name, {}).items()):
                fam.add_metric(list(key), value)
            yield fam
        for name, (doc, label_names, buckets) in HISTOGRAMS.items():
            fam = HistogramMetricFamily(name, doc, labels=list(label_names))
            for key, row in sorted(self.snap["hists"].get(name, {}).items()):
                cumulative, acc = [], 0.0
                for bound, count in zip([*(_fmt(b) for b in buckets), "+Inf"], row[:-2], strict=True):
                    acc += count
                    cumulative.append((bound, acc))
                fam.add_metric(list(key), cumulative, row[-2])
            yield fam
        decisions = self.snap["counters"].get("halo_serve_decisions", {})
        rule = sum(v for k, v in decisions.items() if k[2] == "rule")
        total = sum(decisions.values())
        share = GaugeMetricFamily("halo_serve_rule_decision_share",
                                  "Share of decisions made by the rules layer (the model makes the rest)")
        share.add_metric([], rule / total if total else 0.0)
        yield share
        replicas = GaugeMetricFamily("halo_serve_replica_model", "Model version loaded by each replica",
                                     labels=["replica", "name", "version"])
        for replica, desc in sorted(self.info.items()):
            replicas.add_metric([replica, desc.get("name", ""), desc.get("version", "")], 1.0)
        yield replicas


def _fmt(bound: float) -> str:
    return repr(float(bound))


def render(snap: Snapshot, replica_info: Mapping[str, Mapping[str, str]] | None = None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SnapshotCollector(snap, replica_info or {}))  # type: ignore[arg-type]
    return generate_latest(registry)

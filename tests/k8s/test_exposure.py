"""What each pod may reach and hold: no Ray worker holds the admin key (only the head, where the
loop's driver promotes models), and Ray's control ports (the dashboard among them) answer only
this namespace's pods and the KubeRay operator, while the decision ports stay open to clients.
Checked on the overlays as `kubectl kustomize` renders them."""

from __future__ import annotations

import pytest
from k8s_checks import KUBERAY_KINDS, OVERLAYS, render

RAY_COMPONENTS = {"ray-head", "ray-worker-cpu", "ray-worker-gpu", "serve-head", "serve-worker", "serve-worker-gpu"}
SERVE_COMPONENTS = {"serve-head", "serve-worker", "serve-worker-gpu"}
ADMIN_ENV = {"HALO_SERVE_ADMIN_KEY"}  # the client-side admin key (the service's own list is HALO_SERVE_ADMIN_KEYS)


def _pod_templates(obj: dict) -> list[dict]:
    spec = obj["spec"]
    cluster = spec.get("rayClusterConfig") or spec.get("rayClusterSpec") or spec
    groups = [cluster.get("headGroupSpec", {})] + list(cluster.get("workerGroupSpecs", []))
    return [g["template"] for g in groups if "template" in g]


def _env_names(template: dict) -> set[str]:
    return {e["name"] for c in template["spec"]["containers"] for e in c.get("env", [])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_ray_worker_holds_the_admin_key(overlay: str) -> None:
    objects = render(overlay)
    workers = [t for o in objects if o["kind"] in KUBERAY_KINDS for t in _pod_templates(o)
               if "worker" in t["metadata"]["labels"]["app.kubernetes.io/component"]]
    assert workers
    for template in workers:
        assert not ADMIN_ENV & _env_names(template), template["metadata"]["labels"]


def _policies(objects: list[dict]) -> list[dict]:
    return [o for o in objects if o["kind"] == "NetworkPolicy"]


def _selected(policy: dict) -> set[str]:
    (expr,) = policy["spec"]["podSelector"]["matchExpressions"]
    assert expr["key"] == "app.kubernetes.io/component" and expr["operator"] == "In"
    return set(expr["values"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ray_control_ports_answer_only_inside_the_namespace(overlay: str) -> None:
    objects = render(overlay)
    policies = _policies(objects)
    components = {t["metadata"]["labels"]["app.kubernetes.io/component"] for o in objects
                  if o["kind"] in KUBERAY_KINDS for t in _pod_templates(o)}
    assert components <= RAY_COMPONENTS  # every Ray pod is under a policy
    for policy in policies:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
    inside = [p for p in policies if _selected(p) == RAY_COMPONENTS]
    assert len(inside) == 1
    (rule,) = inside[0]["spec"]["ingress"]
    assert "ports" not in rule  # every port, but only from ...
    assert rule["from"][0] == {"podSelector": {}}  # ... this namespace's pods
    assert set(rule["from"][1]) == {"namespaceSelector"}  # ... and the operator's namespace
    open_rules = [r for p in policies for r in p["spec"]["ingress"] if "from" not in r]
    open_ports = {port["port"] for r in open_rules for port in r["ports"]}
    assert open_ports == {8000, 8100}  # only the decision ports are open to anyone
    assert all(_selected(p) <= SERVE_COMPONENTS for p in policies
               if any("from" not in r for r in p["spec"]["ingress"]))

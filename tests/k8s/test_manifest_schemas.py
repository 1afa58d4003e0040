"""Every rendered object validates: core objects against the Kubernetes 1.37 strict schemas,
KubeRay objects against the KubeRay CRD schemas (tests/k8s/crds), Serve configs against Ray
Serve's own config schema. Broken objects are rejected with the field named."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from k8s_checks import KUBERAY_KINDS, OVERLAYS, find, kuberay_errors, render, serve_config, validate_core
from ray.serve.schema import ServeDeploySchema


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_core_objects_validate_strictly(overlay: str) -> None:
    objects = [o for o in render(overlay) if o["kind"] not in KUBERAY_KINDS]
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "ServiceAccount", "ConfigMap"} <= kinds
    for obj in objects:
        validate_core(obj)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kuberay_objects_validate_against_the_crd_schemas(overlay: str) -> None:
    objects = [o for o in render(overlay) if o["kind"] in KUBERAY_KINDS]
    assert sorted(o["kind"] for o in objects) == ["RayCluster", "RayJob", "RayJob", "RayJob", "RayService"]
    for obj in objects:
        assert kuberay_errors(obj) == [], f"{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_embedded_serve_service_is_a_valid_core_service(overlay: str) -> None:
    svc = copy.deepcopy(find(render(overlay), "RayService", "halo-decide")["spec"]["serveService"])
    validate_core({"apiVersion": "v1", "kind": "Service", **svc})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_serve_config_validates_against_ray_serve_schema(overlay: str) -> None:
    config = serve_config(find(render(overlay), "RayService", "halo-decide"))
    parsed = ServeDeploySchema.model_validate(config)
    assert [a.name for a in parsed.applications] == ["halo-decide"]


def test_secrets_of_the_dev_overlay_validate() -> None:
    secrets = [o for o in render("dev-cpu") if o["kind"] == "Secret"]
    assert {s["metadata"]["name"] for s in secrets} == {"halo-s3", "halo-serve"}
    for secret in secrets:
        validate_core(secret)


def _raycluster() -> dict:
    return find(render("prod-a100"), "RayCluster", "halo")


@pytest.mark.parametrize("mutate, field", [
    (lambda o: o["spec"].__setitem__("workerGroupSpec", []), "workerGroupSpec"),  # misspelled field
    (lambda o: o["spec"]["workerGroupSpecs"][0].pop("maxReplicas"), "maxReplicas"),
    (lambda o: o["spec"]["workerGroupSpecs"][0].__setitem__("minReplicas", "zero"), "minReplicas"),
    (lambda o: o["spec"]["autoscalerOptions"].__setitem__("upscalingMode", "Eager"), "upscalingMode"),
    (lambda o: o["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].__setitem__("imag", "x"), "imag"),
    (lambda o: o["spec"]["headGroupSpec"]["template"]["spec"].__setitem__("tolerations", [{"effect": 3}]),
     "effect"),
    (lambda o: o["spec"]["headGroupSpec"]["rayStartParams"].__setitem__("num-cpus", 0), "num-cpus"),
])
def test_broken_raycluster_is_rejected_naming_the_field(mutate, field: str) -> None:
    obj = _raycluster()
    mutate(obj)
    errors = kuberay_errors(obj)
    assert errors and any(field in e for e in errors), errors


def test_broken_rayservice_and_rayjob_are_rejected() -> None:
    service = find(render("prod-a100"), "RayService", "halo-decide")
    service["spec"]["upgradeStrategy"]["type"] = "BlueGreen"
    assert any("upgradeStrategy.type" in e for e in kuberay_errors(service))
    job = find(render("prod-a100"), "RayJob", "halo-train")
    job["spec"]["entrypoint"] = ["halo", "train"]
    job["spec"]["ttlSecondsAfterFinished"] = 2**40
    errors = kuberay_errors(job)
    assert any(e.startswith("spec.entrypoint") for e in errors)
    assert any(e.startswith("spec.ttlSecondsAfterFinished") for e in errors)
    assert kuberay_errors({"kind": "RayCron"}) == ["kind: 'RayCron' is not a KubeRay kind"]


def test_broken_core_objects_are_rejected() -> None:
    cm = find(render("dev-cpu"), "ConfigMap", "halo-config")
    cm["data"]["N"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_core(cm)
    sa = find(render("dev-cpu"), "ServiceAccount", "halo")
    sa["automountToken"] = False
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_core(sa)


def test_broken_serve_config_is_rejected() -> None:
    config = serve_config(find(render("dev-cpu"), "RayService", "halo-decide"))
    config["http_options"]["port"] = "eighty"
    with pytest.raises(ValueError, match="http_options.port"):
        ServeDeploySchema.model_validate(config)
    config = serve_config(find(render("dev-cpu"), "RayService", "halo-decide"))
    config["applications"][0]["import_path"] = "serve_entry_without_attribute"
    with pytest.raises(ValueError, match="import_path"):
        ServeDeploySchema.model_validate(config)

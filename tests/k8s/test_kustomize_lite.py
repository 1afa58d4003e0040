"""The overlay renderer implements the kustomize subset k8s/ uses, and refuses the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from k8s_checks import K8S, find, kustomize_lite, render

kl = kustomize_lite()


def _write(root: Path, files: dict[str, object]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return root


BASE = {
    "base/kustomization.yaml": {"resources": ["cm.yaml", "job.yaml"], "namespace": "a",
                                "labels": [{"pairs": {"team": "x"}}]},
    "base/cm.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"K": "1"}},
    "base/job.yaml": {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "j"},
                      "spec": {"submitterPodTemplate": {"spec": {"containers": [
                          {"name": "c", "image": "reg.example:5000/halo:1.0-cpu"}]}},
                               "list": [1, 2, 3]}},
}


def test_overlay_applies_namespace_labels_images_patches_and_secrets(tmp_path: Path) -> None:
    root = _write(tmp_path, {**BASE, "over/kustomization.yaml": {
        "resources": ["../base"], "namespace": "b",
        "images": [{"name": "reg.example:5000/halo", "newName": "local/halo", "newTag": "2.0-cpu"}],
        "generatorOptions": {"disableNameSuffixHash": True},
        "secretGenerator": [{"name": "s", "literals": ["A=1", "B=x=y"]}],
        "patches": [{"path": "p.yaml", "target": {"kind": "RayJob", "name": "j"}}]},
        "over/p.yaml": [{"op": "test", "path": "/spec/list/0", "value": 1},
                        {"op": "remove", "path": "/spec/list/0"},
                        {"op": "add", "path": "/spec/list/-", "value": 4},
                        {"op": "add", "path": "/spec/list/0", "value": 0},
                        {"op": "replace", "path": "/metadata/name", "value": "j"},
                        {"op": "add", "path": "/spec/entrypoint", "value": "halo x"}]})
    objects = kl.build(root / "over")
    job = find(objects, "RayJob", "j")
    assert job["spec"]["list"] == [0, 2, 3, 4]
    assert job["spec"]["entrypoint"] == "halo x"
    assert job["metadata"]["namespace"] == "b" and job["metadata"]["labels"] == {"team": "x"}
    assert job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"] == "local/halo:2.0-cpu"
    assert find(objects, "Secret", "s")["stringData"] == {"A": "1", "B": "x=y"}
    assert find(objects, "ConfigMap", "cfg")["metadata"]["namespace"] == "b"


@pytest.mark.parametrize("overlay, message", [
    ({"resources": ["../base"], "commonLabels": {"a": "b"}}, "unsupported field(s) commonLabels"),
    ({"resources": ["../nowhere"]}, "not found"),
    ({"resources": ["../base"], "secretGenerator": [{"name": "s", "literals": ["A=1"]}]}, "disableNameSuffixHash"),
    ({"resources": ["../base"], "patches": [{"path": "bad-test.yaml", "target": {"kind": "RayJob", "name": "nope"}}]},
     "matches no object"),
    ({"resources": ["../base"], "patches": [{"path": "missing.yaml", "target": {"kind": "RayJob"}}]},
     "patch file 'missing.yaml' not found"),
    ({"resources": ["../base"], "patches": [{"path": "smp.yaml", "target": {"kind": "RayJob"}}]},
     "only JSON 6902"),
    ({"resources": ["../base"], "patches": [{"path": "bad-index.yaml", "target": {"kind": "RayJob"}}]},
     "out of range"),
    ({"resources": ["../base"], "patches": [{"path": "bad-test.yaml", "target": {"kind": "RayJob"}}]},
     "test /spec/list/0"),
    ({"resources": ["../base"], "patches": [{"path": "bad-op.yaml", "target": {"kind": "RayJob"}}]},
     "not supported"),
    ({"resources": ["../base", "../base/cm.yaml"]}, "two objects are ConfigMap/cfg"),
])
def test_unsupported_or_broken_kustomizations_are_refused(tmp_path: Path, overlay: dict, message: str) -> None:
    root = _write(tmp_path, {**BASE, "over/kustomization.yaml": overlay,
                             "over/smp.yaml": {"spec": {"entrypoint": "x"}},
                             "over/bad-index.yaml": [{"op": "replace", "path": "/spec/list/7", "value": 1}],
                             "over/bad-test.yaml": [{"op": "test", "path": "/spec/list/0", "value": 9}],
                             "over/bad-op.yaml": [{"op": "move", "from": "/a", "path": "/spec/list/0"}]})
    with pytest.raises(kl.KustomizeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kl.build(root / "over")


def test_image_with_registry_port_and_no_tag_is_renamed(tmp_path: Path) -> None:
    obj = {"spec": {"containers": [{"name": "c", "image": "reg.example:5000/halo"}]}}
    kl._set_images(obj, {"name": "reg.example:5000/halo", "newTag": "3"})
    assert obj["spec"]["containers"][0]["image"] == "reg.example:5000/halo:3"


def test_overlays_render_what_they_promise() -> None:
    dev, prod = render("dev-cpu"), render("prod-a100")
    dev_cluster = find(dev, "RayCluster", "halo")
    assert [g["groupName"] for g in dev_cluster["spec"]["workerGroupSpecs"]] == ["cpu-rollout"]
    assert {o["metadata"].get("namespace") for o in dev if o["kind"] != "Namespace"} == {"halo-dev"}
    prod_cluster = find(prod, "RayCluster", "halo")
    gpu = prod_cluster["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["resources"]
    assert gpu["limits"]["nvidia.com/gpu"] == "8"
    groups = find(prod, "RayService", "halo-decide")["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert [g["groupName"] for g in groups] == ["serve-cpu", "serve-a100"]


def test_cli_renders_yaml_and_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kl.main([str(K8S / "overlays" / "dev-cpu")]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert {d["kind"] for d in docs} >= {"RayCluster", "RayJob", "RayService", "ConfigMap", "Secret"}
    assert kl.main([str(tmp_path)]) == 1
    assert "no kustomization.yaml" in capsys.readouterr().err

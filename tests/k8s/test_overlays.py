"""Each overlay, rendered by the real `kubectl kustomize`, holds what its kustomization names: every
resource, the overlay's namespace, its image names, its generated secrets and every value its JSON
patches set; the patches' `test` operations stop a render when the base changes under them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_checks import K8S, KUBERAY_KINDS, OVERLAYS, Obj, containers, find, kustomize, render, secret_values

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"}


def _kustomization(directory: Path) -> Obj:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def _named_resources(directory: Path) -> set[tuple[str, str]]:
    """(kind, name) of every object the kustomization's resource files hold, bases included."""
    named: set[tuple[str, str]] = set()
    for entry in _kustomization(directory).get("resources", []):
        path = directory / entry
        if path.is_dir():
            named |= _named_resources(path)
        else:
            named |= {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(path.read_text()) if d}
    return named


def _at(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer."""
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _set_values(overlay: str) -> list[tuple[str, str, str, Any]]:
    """(kind, name, path, value) of every add/replace operation of the overlay's patches that no later
    operation of the same patch moves (a later remove or add in the same list shifts indices)."""
    directory = K8S / "overlays" / overlay
    out = []
    for patch in _kustomization(directory).get("patches", []):
        ops = yaml.safe_load((directory / patch["path"]).read_text())
        for i, op in enumerate(ops):
            parent = op["path"].rsplit("/", 1)[0]
            shifted = any(later["op"] in ("add", "remove") and later["path"].startswith(parent + "/")
                          and later["path"] != op["path"] for later in ops[i + 1:])
            if op["op"] in ("add", "replace") and not shifted:
                out.append((patch["target"]["kind"], patch["target"]["name"], op["path"], op["value"]))
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_named_resource_is_rendered_once_in_the_overlay_namespace(overlay: str) -> None:
    objects = render(overlay)
    rendered = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(rendered) == len(set(rendered))
    spec = _kustomization(K8S / "overlays" / overlay)
    generated = {("Secret", g["name"]) for g in spec.get("secretGenerator", [])}
    assert set(rendered) == _named_resources(K8S / "overlays" / overlay) | generated
    for obj in objects:
        expected = None if obj["kind"] in CLUSTER_SCOPED else spec["namespace"]
        assert obj["metadata"].get("namespace") == expected, f"{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_patched_value_is_in_the_rendering(overlay: str) -> None:
    values = _set_values(overlay)
    assert len(values) >= 4  # each overlay patches several objects
    objects = render(overlay)
    for kind, name, path, value in values:
        target = find(objects, kind, name)
        if path.endswith("/-"):  # appended: somewhere in the list (later appends follow it)
            assert value in _at(target, path.removesuffix("/-")), f"{kind}/{name} {path}"
        else:
            assert _at(target, path) == value, f"{kind}/{name} {path}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_renamed_as_the_overlay_says(overlay: str) -> None:
    renames = {i["name"]: i.get("newName", i["name"]) for i in _kustomization(K8S / "overlays" / overlay)
               .get("images", [])}
    images = {c["image"].rpartition(":")[0] for o in render(overlay) if o["kind"] in KUBERAY_KINDS
              for _, c in containers(o)}
    assert images
    for old, new in renames.items():
        assert old not in images and new in images, (old, new, images)


def test_dev_secrets_are_generated_from_the_literals() -> None:
    spec = _kustomization(K8S / "overlays" / "dev-cpu")
    objects = render("dev-cpu")
    for gen in spec["secretGenerator"]:
        literals = dict(item.split("=", 1) for item in gen["literals"])
        assert secret_values(find(objects, "Secret", gen["name"])) == literals


def test_overlays_render_what_they_promise() -> None:
    dev, prod = render("dev-cpu"), render("prod-a100")
    dev_cluster = find(dev, "RayCluster", "halo")
    assert [g["groupName"] for g in dev_cluster["spec"]["workerGroupSpecs"]] == ["cpu-rollout"]
    prod_cluster = find(prod, "RayCluster", "halo")
    gpu = prod_cluster["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["resources"]
    assert gpu["limits"]["nvidia.com/gpu"] == "8"
    groups = find(prod, "RayService", "halo-decide")["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert [g["groupName"] for g in groups] == ["serve-cpu", "serve-a100"]


def test_a_patch_guard_stops_the_render_when_the_base_changes_under_it(tmp_path: Path) -> None:
    copy = tmp_path / "k8s"
    shutil.copytree(K8S, copy)
    cluster_file = copy / "base" / "raycluster.yaml"
    docs = [d for d in yaml.safe_load_all(cluster_file.read_text()) if d]
    for doc in docs:
        if doc["kind"] == "RayCluster":
            doc["spec"]["workerGroupSpecs"].reverse()  # the dev overlay removes group 1 only if it is the GPU one
    cluster_file.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(AssertionError, match=r"kubectl kustomize .* failed: .*/spec/workerGroupSpecs/1/groupName"):
        kustomize(copy / "overlays" / "dev-cpu")


def test_a_missing_directory_is_a_clear_failure(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="kubectl kustomize .* failed: .*"):
        kustomize(tmp_path / "nowhere")

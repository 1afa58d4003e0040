"""A small, strict renderer for the subset of kustomize that k8s/ uses.

`kubectl apply -k k8s/overlays/<name>` is how the manifests are meant to be applied; this module
(kept with the manifest tests, its only users) renders the same output without the kustomize
binary so tests (and people without kubectl) can see and validate it:

    python tests/k8s/kustomize_lite.py k8s/overlays/dev-cpu > rendered.yaml

Supported kustomization fields, with kustomize's semantics for them:
  resources           files and directories (a directory is built as its own kustomization)
  namespace           set on every namespaced object
  labels              pairs added to metadata.labels (includeSelectors/includeTemplates: false)
  images              name -> newName/newTag in every containers/initContainers image
  patches             RFC 6902 JSON patches (path + target kind/name)
  secretGenerator     literals, with generatorOptions.disableNameSuffixHash: true
Anything else is refused with an error naming the field: a silently ignored field would render
something different from what kubectl applies.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FILE = "kustomization.yaml"
SUPPORTED = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "patches",
             "secretGenerator", "generatorOptions"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass"}

Obj = dict[str, Any]


class KustomizeError(ValueError):
    pass


def build(directory: str | Path) -> list[Obj]:
    """Render the kustomization in `directory` into a list of objects."""
    root = Path(directory)
    kfile = root / KUSTOMIZATION_FILE
    if not kfile.is_file():
        raise KustomizeError(f"{root}: no {KUSTOMIZATION_FILE}")
    spec = yaml.safe_load(kfile.read_text()) or {}
    unknown = sorted(set(spec) - SUPPORTED)
    if unknown:
        raise KustomizeError(f"{kfile}: unsupported field(s) {', '.join(unknown)}")

    objects: list[Obj] = []
    for entry in spec.get("resources", []):
        path = root / entry
        if path.is_dir():
            objects.extend(build(path))
        elif path.is_file():
            objects.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
        else:
            raise KustomizeError(f"{kfile}: resource {entry!r} not found")
    objects.extend(_generate_secrets(spec, kfile))
    _check_unique(objects, kfile)

    for patch in spec.get("patches", []):
        _apply_patch(objects, patch, root, kfile)
    if "namespace" in spec:
        for obj in objects:
            if obj.get("kind") not in CLUSTER_SCOPED:
                obj.setdefault("metadata", {})["namespace"] = spec["namespace"]
    for label in spec.get("labels", []):
        if label.get("includeSelectors") or label.get("includeTemplates"):
            raise KustomizeError(f"{kfile}: labels with includeSelectors/includeTemplates are not supported")
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(label.get("pairs", {}))
    for image in spec.get("images", []):
        for obj in objects:
            _set_images(obj, image)
    return objects


def _check_unique(objects: list[Obj], kfile: Path) -> None:
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        key = (obj.get("kind", ""), obj.get("metadata", {}).get("name", ""))
        if key in seen:
            raise KustomizeError(f"{kfile}: two objects are {key[0]}/{key[1]}")
        seen.add(key)


def _generate_secrets(spec: Obj, kfile: Path) -> list[Obj]:
    generators = spec.get("secretGenerator", [])
    if generators and not (spec.get("generatorOptions") or {}).get("disableNameSuffixHash"):
        # With a hash suffix kustomize renames the Secret and rewrites references to it; that
        # rewriting is not implemented here, so refuse rather than render different names.
        raise KustomizeError(f"{kfile}: secretGenerator needs generatorOptions.disableNameSuffixHash: true")
    out = []
    for gen in generators:
        unknown = sorted(set(gen) - {"name", "literals", "type"})
        if unknown:
            raise KustomizeError(f"{kfile}: secretGenerator {gen.get('name')}: unsupported {', '.join(unknown)}")
        data: dict[str, str] = {}
        for literal in gen.get("literals", []):
            key, sep, value = literal.partition("=")
            if not sep or not key:
                raise KustomizeError(f"{kfile}: secretGenerator literal {literal!r} is not KEY=VALUE")
            data[key] = value
        out.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": gen["name"]},
                    "type": gen.get("type", "Opaque"), "stringData": data})
    return out


def _apply_patch(objects: list[Obj], patch: Obj, root: Path, kfile: Path) -> None:
    target = patch.get("target") or {}
    if set(target) - {"kind", "name"} or not target:
        raise KustomizeError(f"{kfile}: a patch target needs kind and/or name only, got {target}")
    if "path" in patch:
        if not (root / patch["path"]).is_file():
            raise KustomizeError(f"{kfile}: patch file {patch['path']!r} not found")
        ops = yaml.safe_load((root / patch["path"]).read_text())
    elif "patch" in patch:
        ops = yaml.safe_load(patch["patch"])
    else:
        raise KustomizeError(f"{kfile}: a patch needs path or patch")
    if not isinstance(ops, list):
        raise KustomizeError(f"{kfile}: only JSON 6902 patches (a list of operations) are supported")
    matched = [o for o in objects
               if ("kind" not in target or o.get("kind") == target["kind"])
               and ("name" not in target or o.get("metadata", {}).get("name") == target["name"])]
    if not matched:
        raise KustomizeError(f"{kfile}: patch target {target} matches no object")
    for obj in matched:
        for op in ops:
            json_patch(obj, op)


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise KustomizeError(f"JSON pointer {path!r} must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container_and_key(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, list):
            node = node[_index(part, node, path, existing=True)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KustomizeError(f"JSON patch path {path}: {part!r} does not exist")
    return node, parts[-1]


def _index(part: str, seq: list[Any], path: str, *, existing: bool) -> int:
    if part == "-" and not existing:
        return len(seq)
    if not part.isdigit():
        raise KustomizeError(f"JSON patch path {path}: {part!r} is not a list index")
    idx = int(part)
    if idx > len(seq) or (existing and idx >= len(seq)):
        raise KustomizeError(f"JSON patch path {path}: index {idx} out of range")
    return idx


def json_patch(doc: Obj, op: Obj) -> None:
    """Apply one RFC 6902 operation (add, remove, replace, test) in place."""
    kind, path = op.get("op"), op.get("path", "")
    parts = _pointer(path)
    parent, key = _container_and_key(doc, parts, path)
    if kind == "add":
        value = copy.deepcopy(op["value"])
        if isinstance(parent, list):
            parent.insert(_index(key, parent, path, existing=False), value)
        else:
            parent[key] = value
    elif kind in ("remove", "replace", "test"):
        if isinstance(parent, list):
            idx = _index(key, parent, path, existing=True)
        elif key in parent:
            idx = key  # type: ignore[assignment]
        else:
            raise KustomizeError(f"JSON patch {kind} {path}: nothing there")
        if kind == "remove":
            del parent[idx]
        elif kind == "replace":
            parent[idx] = copy.deepcopy(op["value"])
        elif parent[idx] != op["value"]:
            raise KustomizeError(f"JSON patch test {path}: {parent[idx]!r} != {op['value']!r}")
    else:
        raise KustomizeError(f"JSON patch op {kind!r} is not supported (add, remove, replace, test)")


def _split_image(image: str) -> tuple[str, str]:
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag, or the colon belonged to a registry port
        return image, ""
    return name, tag


def _set_images(node: Any, image: Obj) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    name, tag = _split_image(container.get("image", ""))
                    if name == image["name"]:
                        new_name = image.get("newName", name)
                        new_tag = image.get("newTag", tag)
                        container["image"] = f"{new_name}:{new_tag}" if new_tag else new_name
            else:
                _set_images(value, image)
    elif isinstance(node, list):
        for item in node:
            _set_images(item, image)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/k8s/kustomize_lite.py DIRECTORY", file=sys.stderr)
        return 2
    try:
        objects = build(argv[0])
    except KustomizeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

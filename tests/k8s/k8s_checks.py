"""Helpers for the manifest tests: render overlays, validate objects, parse `halo` command lines."""

from __future__ import annotations

import base64
import functools
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import referencing
import typer.main
import yaml
from kubernetes_validate.utils import schema_contents

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = ("dev-cpu", "prod-a100")
K8S_VERSION = "1.37"
KUBERAY_KINDS = {"RayCluster", "RayJob", "RayService"}
CRD_SCHEMA = Path(__file__).with_name("crds") / "kuberay_v1.schema.yaml"

Obj = dict[str, Any]


def kubectl_or_skip() -> str:
    """The `kubectl` binary (its embedded kustomize renders the overlays), or skip the test saying why."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH: the overlays cannot be rendered, so the manifest checks are skipped "
                    "(install kubectl >= 1.27, which embeds kustomize v5, to run them)")
    return kubectl


def kustomize(directory: Path) -> list[Obj]:
    """Render a kustomization with `kubectl kustomize` (no cluster needed); a failure names kubectl's error."""
    done = subprocess.run([kubectl_or_skip(), "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@functools.cache
def _rendered(overlay: str) -> str:
    return json.dumps(kustomize(K8S / "overlays" / overlay))


def render(overlay: str) -> list[Obj]:
    """A fresh copy of the rendered overlay (tests may mutate it)."""
    return json.loads(_rendered(overlay))


def secret_values(secret: Obj) -> dict[str, str]:
    """A Secret's values in clear (kustomize writes generated literals base64-encoded under `data`)."""
    values = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return {**values, **(secret.get("stringData") or {})}


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise KeyError(f"{kind}/{name}")


# --- schema validation -------------------------------------------------------------------------

def validate_core(obj: Obj) -> None:
    """Strict Kubernetes schema validation (unknown fields are errors); raises on failure."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@functools.cache
def _kuberay_registry() -> referencing.Registry:
    k8s_defs = schema_contents(f"kubernetes-json-schema/v{K8S_VERSION}.0-local-strict/_definitions.json",
                               K8S_VERSION)
    ours = yaml.safe_load(CRD_SCHEMA.read_text())
    registry: referencing.Registry = referencing.Registry()
    for contents in (k8s_defs, ours):
        registry = registry.with_resource(contents["$id"], referencing.Resource.from_contents(contents))
    return registry


def kuberay_errors(obj: Obj) -> list[str]:
    """Every schema error of a KubeRay object, as 'path: message'."""
    kind = obj.get("kind")
    if kind not in KUBERAY_KINDS:
        return [f"kind: {kind!r} is not a KubeRay kind"]
    ours = yaml.safe_load(CRD_SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator({"$ref": f"{ours['$id']}#/$defs/{kind}"},
                                                registry=_kuberay_registry())
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))]


def pod_templates(obj: Obj) -> Iterator[tuple[str, Obj]]:
    """(where, pod template) for every pod template in a KubeRay object."""
    spec = obj["spec"]
    clusters: list[tuple[str, Obj]] = []
    if obj["kind"] == "RayCluster":
        clusters.append(("spec", spec))
    elif obj["kind"] == "RayService":
        clusters.append(("spec.rayClusterConfig", spec["rayClusterConfig"]))
    elif obj["kind"] == "RayJob":
        if "rayClusterSpec" in spec:
            clusters.append(("spec.rayClusterSpec", spec["rayClusterSpec"]))
        if "submitterPodTemplate" in spec:
            yield "spec.submitterPodTemplate", spec["submitterPodTemplate"]
    for where, cluster in clusters:
        yield f"{where}.headGroupSpec", cluster["headGroupSpec"]["template"]
        for group in cluster.get("workerGroupSpecs", []):
            yield f"{where}.workerGroupSpecs[{group['groupName']}]", group["template"]


def containers(obj: Obj) -> Iterator[tuple[str, Obj]]:
    if obj["kind"] in KUBERAY_KINDS:
        for where, template in pod_templates(obj):
            for c in template["spec"]["containers"]:
                yield f"{obj['kind']}/{obj['metadata']['name']} {where} {c['name']}", c


# --- halo command lines -------------------------------------------------------------------------

def serve_config(obj: Obj) -> Obj:
    return yaml.safe_load(obj["spec"]["serveConfigV2"])


def command_lines(objects: list[Obj]) -> Iterator[tuple[str, str]]:
    """(where, shell command line) for every command a manifest runs."""
    for obj in objects:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "RayJob":
            yield where, obj["spec"]["entrypoint"]
        if obj["kind"] in KUBERAY_KINDS:
            for cwhere, c in containers(obj):
                for field in ("command", "args"):
                    if c.get(field):
                        yield cwhere, shlex.join(c[field])


def expand_env(line: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in env:
            raise AssertionError(f"command line uses ${name}, which no ConfigMap or Secret provides: {line}")
        return env[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, line)


def halo_invocations(line: str) -> list[list[str]]:
    """The argv of every `halo ...` in a shell line (commands joined by && or ;)."""
    out = []
    for part in re.split(r"&&|;", line):
        argv = shlex.split(part)
        if argv and argv[0] == "halo":
            out.append(argv)
        elif argv:
            raise AssertionError(f"manifest runs {argv[0]!r}, not halo: {part.strip()}")
    return out


def halo_cli() -> Any:
    """The click command tree of `halo` (typer vendors its own click, so this is duck-typed)."""
    from cluster.cli import app

    return typer.main.get_command(app)


def resolve_command(argv: list[str]) -> tuple[Any, list[str], list[str]]:
    """Walk `halo sub sub ...` down to the leaf command; return it, its path and its arguments."""
    cmd = halo_cli()
    path: list[str] = []
    args = argv[1:]
    while hasattr(cmd, "commands"):
        if path and args and args[0].startswith("-") and any(p.param_type_name == "option" for p in cmd.params):
            break  # a group whose callback takes options runs itself (`halo loop --config ...`)
        if not args or args[0] not in cmd.commands:
            have = ", ".join(sorted(cmd.commands))
            got = args[0] if args else "(nothing)"
            raise AssertionError(f"`halo {' '.join(path)}` has no subcommand {got!r} (it has: {have})")
        path.append(args[0])
        cmd = cmd.commands[args[0]]
        args = args[1:]
    return cmd, path, args


def check_halo_argv(argv: list[str]) -> None:
    """Fail with a clear message unless `argv` is a valid command line of the current CLI."""
    cmd, path, args = resolve_command(argv)
    name = "halo " + " ".join(path)
    options = [p for p in cmd.params if p.param_type_name == "option"]
    known = {opt: p for p in options for opt in [*p.opts, *p.secondary_opts]}
    positional = [p for p in cmd.params if p.param_type_name == "argument"]
    free: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token.startswith("--") and token != "--":
            opt, eq, value = token.partition("=")
            if opt not in known:
                raise AssertionError(f"`{name}` has no option {opt} (options: {', '.join(sorted(known))})")
            param = known[opt]
            if param.is_flag or param.count:
                if eq:
                    raise AssertionError(f"`{name} {opt}` is a flag and takes no value")
            elif not eq:
                if i + 1 >= len(args) or args[i + 1].startswith("--"):
                    raise AssertionError(f"`{name} {opt}` needs a value")
                i += 1
        else:
            free.append(token)
        i += 1
    if len(free) > sum(max(p.nargs, 1) for p in positional) and not any(p.nargs == -1 for p in positional):
        raise AssertionError(f"`{name}` takes {len(positional)} positional argument(s), got {free}")
    missing = [p.name for p in options if p.required
               and not any(o in args or any(a.startswith(o + "=") for a in args) for o in p.opts)]
    if missing:
        raise AssertionError(f"`{name}` is missing required option(s) {missing}")

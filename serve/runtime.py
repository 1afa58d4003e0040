"""Loading a served model: resolve its source, verify its manifest, pick a runtime.

Runtimes: the CPU ones come from `train.policies.load_policy` (the fast policy classes and the
transformers + LoRA LLM policy); the GPU one is `serve.vllm_runtime` (imported only when chosen).
A model whose manifest does not verify never gets past `load_model`.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rollout.core.agent_table import NUM_AGENTS
from rollout.core.decision import MODEL, Decision, Policy
from rollout.core.state import EpisodeState
from serve.model_source import DEFAULT_CACHE, ModelRoots, SizeLimits, check_npz_files, resolve_model
from solvers.errors import HaloError
from train.manifest import Manifest, ManifestError
from train.policies import decides_inline


class ModelLoadError(HaloError, RuntimeError):
    pass


@dataclass
class LoadedModel:
    ref: str
    path: Path
    manifest: Manifest
    policy: Policy
    runtime: str  # "cpu" | "vllm"
    loaded_at: float = field(default_factory=time.time)

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def name(self) -> str:
        return self.manifest.name

    # set once at load, not asked per decision: the hot path stays out of train's registry
    inline: bool = field(init=False)

    def __post_init__(self) -> None:
        self.inline = self.runtime == "cpu" and decides_inline(self.manifest.policy_class)

    def decide_batch(self, states: list[EpisodeState]) -> list[Decision]:
        batch_fn = getattr(self.policy, "decide_batch", None)
        t0 = time.perf_counter()
        decisions = list(batch_fn(states)) if batch_fn is not None else [self.policy.decide(s) for s in states]
        if len(decisions) != len(states):
            raise ModelLoadError(f"runtime returned {len(decisions)} decisions for {len(states)} states")
        per_state_ms = (time.perf_counter() - t0) * 1000.0 / max(1, len(states))
        for d in decisions:
            if not 0 <= d.agent_id < NUM_AGENTS:
                raise ModelLoadError(f"model answered agent id {d.agent_id}, outside its 0..{NUM_AGENTS - 1} label map")
            if d.decided_by != MODEL:
                raise ModelLoadError(f"model labelled its decision {d.decided_by!r}; trained policies say {MODEL!r}")
        # Every other field (dynamic profile, costs) is the policy's own.
        return [replace(d, latency_ms=d.latency_ms or per_state_ms, policy_version=self.version) for d in decisions]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "policy_class": self.manifest.policy_class,
                "encoder_version": self.manifest.encoder_version, "runtime": self.runtime, "ref": self.ref}


def verify_model(ref: str, cache_dir: str | None = None, *, roots: ModelRoots | None = None,
                 limits: SizeLimits | None = None) -> tuple[Path, Manifest]:
    """Resolve `ref` (confined to `roots` when given) and verify its manifest and .npz sizes;
    raises ManifestError / ModelSourceError. A downloaded copy that fails is removed."""
    path = resolve_model(ref, cache_dir or None, roots=roots, limits=limits)
    try:
        manifest = Manifest.load(path)
        check_npz_files(path, limits or SizeLimits())
    except Exception:
        _drop_cached(path, cache_dir)
        raise
    return path, manifest


def _drop_cached(path: Path, cache_dir: str | None) -> None:
    """Remove a model copy when it lies in the download cache (never a local model directory)."""
    import shutil

    cache = Path(cache_dir).resolve() if cache_dir else DEFAULT_CACHE.resolve()
    if cache in path.resolve().parents:
        shutil.rmtree(path, ignore_errors=True)


def choose_runtime(manifest: Manifest, requested: str) -> str:
    if requested in ("cpu", "vllm"):
        return requested
    if manifest.policy_class == "llm" and importlib.util.find_spec("vllm") is not None and _cuda_available():
        return "vllm"
    return "cpu"


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def load_model(ref: str, *, runtime: str = "auto", cache_dir: str | None = None,
               vllm_options: dict[str, Any] | None = None, roots: ModelRoots | None = None,
               limits: SizeLimits | None = None) -> LoadedModel:
    path, manifest = verify_model(ref, cache_dir, roots=roots, limits=limits)
    try:
        return _load_verified(ref, path, manifest, runtime, vllm_options)
    except Exception:
        _drop_cached(path, cache_dir)
        raise


def _load_verified(ref: str, path: Path, manifest: Manifest, runtime: str,
                   vllm_options: dict[str, Any] | None) -> LoadedModel:
    chosen = choose_runtime(manifest, runtime)
    if chosen == "vllm":
        if manifest.policy_class != "llm":
            raise ModelLoadError(f"runtime vllm serves LLM policies only, not {manifest.policy_class!r}")
        if importlib.util.find_spec("vllm") is None:
            raise ModelLoadError("runtime vllm requested but vllm is not installed (pip install 'halo-cluster[gpu]' "
                                 "on a CUDA node), or use runtime cpu")
        from serve.vllm_runtime import VLLMPolicy

        policy: Policy = VLLMPolicy(path, manifest, **(vllm_options or {}))
    else:
        from train.policies import load_policy

        try:
            policy = load_policy(path)
        except ManifestError:
            raise
        except Exception as exc:  # a broken artifact must not take the service down
            raise ModelLoadError(f"{path}: cannot load policy {manifest.policy_class!r}: {exc}") from exc
    model = LoadedModel(ref=ref, path=path, manifest=manifest, policy=policy, runtime=chosen)
    _warm_up(model)
    return model


# States the rules layer does not answer, so each one reaches the model (one per common symptom).
PROBE_STATES = tuple(
    EpisodeState(task_description="probe: stack the blocks", domain="(define (domain probe))",
                 problem="(define (problem p) (:domain probe))", plan=plan, validator_errors=errors,
                 error_category=category, plan_found=bool(plan), history=history, step=step)
    for plan, errors, category, history, step in (
        ("", "goal not reached", "goal_not_reached", [], 0),
        ("(pick-up a)\n", "precondition (clear b) not satisfied", "plan_invalid", [13], 1),
        ("", "search exhausted: no plan found", "no_plan_found", [20, 13], 2),
        ("", ":durative-actions are not supported", "unsupported_requirement", [7], 3)))


def _warm_up(model: LoadedModel) -> None:
    """Real decisions on probe states, checked as the API will answer them, so a model that loads
    but cannot decide (or answers in the wrong types) is refused before it takes traffic."""
    try:
        decisions = model.decide_batch(list(PROBE_STATES))
        for d in decisions:
            if not isinstance(d.policy_version, str) or not isinstance(d.agent_id, int) \
                    or not isinstance(d.reason, str) or not isinstance(d.latency_ms, float | int):
                raise ModelLoadError(f"decision {d!r} has fields of the wrong type")
            json.dumps([d.agent_id, d.agent_name, d.decided_by, d.policy_version, d.latency_ms, d.reason])
    except Exception as exc:
        raise ModelLoadError(f"{model.path}: model failed its probe decisions: {exc}") from exc

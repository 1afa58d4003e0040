"""The online learning loop: collect -> retrain -> gate -> promote, cycle after cycle.

Each step of a cycle is recorded in the event log (cluster/loop/events.py) under an idempotency
key once it has completed; a restarted loop skips every recorded step and redoes only the one it
was in. Steps whose effect outlives the process check for that effect before acting again:
- collect: rollout batches have fixed run IDs, and the rollout job resumes a run instead of
  repeating committed episodes;
- train: a candidate artifact already in the store for the same data digest is adopted, not
  retrained (the manifest is uploaded last, so a present manifest means a complete artifact);
- promote: the service is asked what it serves; a candidate already deployed is recorded, not
  posted again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.loop.config import LoopConfig
from cluster.loop.data import Snapshot, accepted_episodes, load_snapshot_episodes, take_snapshot
from cluster.loop.events import EventLog, step_key
from cluster.loop.serving import ServingClient, ServingError
from rollout.store import TrajectoryStore
from solvers.errors import HaloError
from train.manifest import MANIFEST_FILE, Manifest, ManifestError

log = logging.getLogger("halo.loop")


class LoopError(HaloError, RuntimeError):
    pass


@dataclass
class LoopHooks:
    """Called around each step (tests inject crashes here): before it runs, and after its effect
    but before its event is written."""

    before_step: Callable[[str], None] = lambda key: None
    after_effect: Callable[[str], None] = lambda key: None


class LoopRunner:
    def __init__(self, config: LoopConfig, *, store: TrajectoryStore | None = None,
                 serving: ServingClient | None = None, hooks: LoopHooks | None = None,
                 echo: Callable[[str], None] = print) -> None:
        self.config = config.validate()
        self.store = store or TrajectoryStore(config.store)
        self.log = EventLog(self.store, config.name)
        self.serving = serving or ServingClient(config.serve_url)
        self.hooks = hooks or LoopHooks()
        self.echo = echo
        self.work = Path(config.work_dir).expanduser() / config.name
        self.rollout_prefix = f"loop-{config.name}-rollout"
        self.gate_prefix = f"loop-{config.name}-gate"
        self.trainings = 0  # trainings run by this process (tests count them)
        self.deploys = 0  # rollouts to the service posted by this process

    # ---- driving ----------------------------------------------------------------------------

    def run(self) -> None:
        self.log.acquire_lease()
        try:
            self._step(0, "init", self._init, key="init")
            while True:
                cycle = self.next_cycle()
                if self.config.max_cycles and cycle > self.config.max_cycles:
                    self.echo(f"loop {self.config.name}: {self.config.max_cycles} cycle(s) done")
                    return
                self.run_cycle(cycle)
        finally:
            self.log.release_lease()

    def next_cycle(self) -> int:
        done = self.log.last("done")
        return done.cycle + 1 if done else 1

    def run_cycle(self, cycle: int) -> dict[str, Any]:
        self._step(cycle, "collect", self._collect)
        self._step(cycle, "train", self._train)
        gate = self._step(cycle, "gate", self._gate)
        if gate["decision"] == "promote":
            self._step(cycle, "promote", self._promote)
        return self._step(cycle, "done", self._done)

    def _step(self, cycle: int, step: str, fn: Callable[[int], dict[str, Any]], key: str | None = None
              ) -> dict[str, Any]:
        key = key or step_key(cycle, step)
        recorded = self.log.get(key)
        if recorded is not None:
            return recorded.data
        self.hooks.before_step(key)
        t0 = time.monotonic()
        data = fn(cycle)
        data["wall_s"] = round(time.monotonic() - t0, 3)
        self.hooks.after_effect(key)
        self.log.append(key, step, cycle, data)
        self.echo(f"[{key}] {_summary(step, data)}")
        return data

    # ---- steps ------------------------------------------------------------------------------

    def _init(self, _: int) -> dict[str, Any]:
        from rollout.tasks import load_tasks

        holdout = sorted(t.task_id for t in load_tasks(self.config.holdout_tasks))
        if not holdout:
            raise LoopError(f"holdout_tasks {self.config.holdout_tasks!r} selects no task")
        served = self.serving.current()
        if served is None:
            if not self.config.initial_model:
                raise LoopError("the decision service serves no model and initial_model is not set")
            version = _manifest_of(self.config.initial_model).version
            self.serving.deploy(self.config.initial_model, version)
            served = self.serving.current()
            assert served is not None
        return {"config_hash": self.config.identity_hash(), "config": self.config.to_dict(),
                "holdout_task_ids": holdout, "serving": {"ref": served.ref, "version": served.version}}

    def _collect(self, cycle: int) -> dict[str, Any]:
        self._check_identity()
        used = self._used_episode_ids()
        holdout = set(self.log.get("init").data["holdout_task_ids"])  # type: ignore[union-attr]
        last_train = self.log.last("train")
        since = last_train.at if last_train else self.log.get("init").at  # type: ignore[union-attr]
        rollout_runs: list[str] = []
        batch = 0
        while True:
            accepted = accepted_episodes(self.store, accept_filter=self.config.accept_filter,
                                         llm_backend=self.config.llm, exclude_tasks=holdout,
                                         exclude_run_prefix=self.gate_prefix)
            n_new = len(set(accepted) - used)
            due = time.time() - since >= self.config.max_period_s
            if n_new >= self.config.min_new_episodes or (due and n_new > 0):
                break
            if batch < self.config.max_rollout_batches and self.config.rollout_episodes > 0:
                rollout_runs.append(self._rollout_batch(cycle, batch))
                batch += 1
            else:
                self.log.renew_lease()
                time.sleep(self.config.poll_s)
        snapshot = take_snapshot(accepted, used, old_share=self.config.old_data_share,
                                 seed=f"{self.config.seed}-{cycle}", table_version=self.store.version(),
                                 max_key_share=self.config.max_feedback_key_share)
        snapshot_file = self.log.put_json(f"datasets/c{cycle:04d}.json", snapshot.to_dict())
        return {"snapshot_file": snapshot_file, "digest": snapshot.digest, "n_new": len(snapshot.new),
                "n_old": len(snapshot.old), "runs": snapshot.runs, "table_version": snapshot.table_version,
                "rollout_runs": rollout_runs, "trigger": "count" if n_new >= self.config.min_new_episodes else "period"}

    def _rollout_batch(self, cycle: int, batch: int) -> str:
        from rollout.driver import RolloutConfig, run_rollout

        run_id = f"{self.rollout_prefix}-c{cycle:04d}-r{batch:02d}"
        summary = run_rollout(RolloutConfig(
            store_url=self.config.store, tasks=self.config.tasks, policy=f"rules+student:{self.config.serve_url}",
            llm=self.config.llm, episodes=self.config.rollout_episodes, replicas=self.config.rollout_replicas,
            run_id=run_id, seed=self.config.seed + 1000 * cycle + batch, max_steps=self.config.max_steps,
            progress=False), store=self.store)
        if summary.status != "completed":
            raise LoopError(f"rollout {run_id} {summary.status}: {summary.message}")
        self.echo(f"  rollout {run_id}: {summary.committed} new episodes ({summary.resumed} resumed), "
                  f"{summary.succeeded} validator-accepted")
        return run_id

    def _train(self, cycle: int) -> dict[str, Any]:
        from serve.model_source import resolve_model
        from train.examples import select_examples, split_by_task

        collect = self._event(cycle, "collect")
        snapshot = Snapshot.from_dict(self.log.get_json(collect["snapshot_file"]))
        serving = self._serving_model()
        name = f"loop-{self.config.name}"
        version = f"c{cycle:04d}-{snapshot.digest[:8]}"
        rel = f"models/{name}/{version}"
        ref = self.store.path_for(rel)
        data_versions = [f"{run}@v{snapshot.table_version}" for run in snapshot.runs]
        base = {"model_ref": ref, "name": name, "version": version, "warm_start_from": serving,
                "data": {"snapshot_file": collect["snapshot_file"], "digest": snapshot.digest,
                         "runs": snapshot.runs, "table_version": snapshot.table_version,
                         "episodes": len(snapshot.episode_ids)}}
        existing = self._existing_candidate(rel, snapshot.digest)
        if existing is not None:
            return {**base, "metrics": existing.metrics, "adopted": True}

        episodes = load_snapshot_episodes(self.store, snapshot)
        examples = select_examples(episodes, check=self.config.accept_filter)
        split_by_task(examples, val_fraction=0.2, seed=cycle)
        init_dir = resolve_model(serving["ref"])
        out_dir = self.work / "models" / version
        extra = {"dataset_digest": snapshot.digest, "loop": self.config.name, "cycle": cycle,
                 "warm_start_version": serving["version"]}
        self.trainings += 1
        if self.config.policy_class == "fast":
            from train.fast_finetune import finetune_fast

            rl = self.config.train.mode == "supervised+rl"
            manifest = finetune_fast(examples, out_dir.with_name(f"{version}-supervised") if rl else out_dir,
                                     init_dir=init_dir, settings=self.config.train, name=name, version=version,
                                     data_versions=data_versions, storage_path=self._ray_train_storage(), extra=extra)
            if rl:
                from cluster.loop.finetune import reinforce_fast

                manifest = reinforce_fast(out_dir.with_name(f"{version}-supervised"), out_dir, self.config, cycle,
                                          self.echo)
        else:
            manifest = self._train_llm(episodes, out_dir, init_dir, name, version, data_versions, extra)
        self._upload_model(out_dir, rel)
        return {**base, "metrics": manifest.metrics, "adopted": False}

    def _train_llm(self, episodes: list[Any], out_dir: Path, init_dir: Path, name: str, version: str,
                   data_versions: list[str], extra: dict[str, Any]) -> Manifest:
        from cluster.loop.finetune import finetune_llm
        from train.base_models import resolve_base_model
        from train.dataset import BuildConfig, build_dataset

        data_dir = self.work / "datasets" / version
        tokenizer = resolve_base_model(self.config.train.base_model)
        build_dataset(episodes, data_dir, BuildConfig(check=self.config.accept_filter, tokenizer_dir=str(tokenizer)))
        manifest = finetune_llm(data_dir, out_dir, init_dir=init_dir, settings=self.config.train, name=name)
        manifest.version, manifest.data_versions = version, data_versions
        manifest.extra.update(extra)
        manifest.save(out_dir)
        return manifest

    def _gate(self, cycle: int) -> dict[str, Any]:
        from cluster.loop.gate import pair_up, run_gate_episodes, run_sequential_gate
        from rollout.tasks import load_tasks
        from serve.model_source import resolve_model

        train = self._event(cycle, "train")
        serving = self._serving_model()
        holdout = load_tasks(self.config.holdout_tasks)
        gate = self.config.gate
        models = {"candidate": resolve_model(train["model_ref"]), "serving": resolve_model(serving["ref"])}
        runs = {role: f"{self.gate_prefix}-c{cycle:04d}-{role}" for role in models}
        episodes: dict[str, list[Any]] = {role: [] for role in models}

        def next_batch(k: int) -> list[Any]:
            # batch k: every held-out task with seeds gate.seed + k*episodes_per_task ... (the same for both)
            seeds = [gate.seed + k * gate.episodes_per_task + i for i in range(gate.episodes_per_task)]
            got = {role: run_gate_episodes(model, holdout, seeds=seeds, run_id=runs[role],
                                           max_steps=self.config.max_steps, llm=self.config.llm)
                   for role, model in models.items()}
            for role, recs in got.items():
                episodes[role] += recs
            return pair_up(got["candidate"], got["serving"])

        result, _ = run_sequential_gate(next_batch, gate, max_steps=self.config.max_steps)
        for role, recs in episodes.items():
            self.store.write_episodes(runs[role], recs)
        settings = {k: getattr(gate, k) for k in ("alpha", "min_effect", "beta", "noninferiority_margin",
                                                  "min_calls_saving", "max_episodes", "mode")}
        return {**result.to_dict(), "candidate_version": train["version"], "serving_version": serving["version"],
                "runs": runs, "settings": settings}

    def _promote(self, cycle: int) -> dict[str, Any]:
        train = self._event(cycle, "train")
        previous = self._serving_model()
        current = self.serving.current()
        already = current is not None and current.ref == train["model_ref"] and current.version == train["version"]
        if not already:
            self.deploys += 1
            self.serving.deploy(train["model_ref"], train["version"])
        served = self.serving.current()
        if served is None or served.version != train["version"]:
            raise ServingError(f"after rolling out {train['version']} the service targets "
                               f"{served.version if served else 'nothing'}")
        published = ""
        if self.config.publish_as:
            local = self.work / "publish" / train["version"]
            self.store.download_dir(train["model_ref"][len(self.store.url) + 1:], local)
            self._upload_model(local, self.config.publish_as)
            published = self.store.path_for(self.config.publish_as)
        return {"model_ref": train["model_ref"], "version": train["version"], "previous": previous,
                "already_deployed": already, "published": published}

    def _done(self, cycle: int) -> dict[str, Any]:
        gate = self._event(cycle, "gate")
        return {"promoted": gate["decision"] == "promote", "serving": self._serving_model(),
                "reasons": gate["reasons"]}

    # ---- helpers ----------------------------------------------------------------------------

    def _event(self, cycle: int, step: str) -> dict[str, Any]:
        event = self.log.get(step_key(cycle, step))
        if event is None:
            raise LoopError(f"cycle {cycle}: step {step} has no event (log is inconsistent)")
        return event.data

    def _serving_model(self) -> dict[str, str]:
        """The model the loop last put (or found) in service, per the log."""
        promoted = self.log.last("promote")
        if promoted is not None:
            return {"ref": promoted.data["model_ref"], "version": promoted.data["version"]}
        return dict(self.log.get("init").data["serving"])  # type: ignore[union-attr]

    def _used_episode_ids(self) -> set[str]:
        used: set[str] = set()
        for event in self.log.events():
            if event.step == "collect":
                used.update(self.log.get_json(event.data["snapshot_file"])["new"])
        return used

    def _check_identity(self) -> None:
        recorded = self.log.get("init").data["config_hash"]  # type: ignore[union-attr]
        if recorded != self.config.identity_hash():
            raise LoopError(f"loop {self.config.name}: tasks, holdout_tasks, policy_class, llm, accept_filter or "
                            "gate.seed differ from the ones its event log was started with; start a new loop "
                            "name instead of changing them under a running one")

    def _existing_candidate(self, rel: str, digest: str) -> Manifest | None:
        raw = self.store.get_bytes(f"{rel}/{MANIFEST_FILE}")
        if raw is None:
            return None
        local = self.work / "adopt" / rel.replace("/", "_")
        self.store.download_dir(rel, local)
        try:
            manifest = Manifest.load(local)
            from train.policies import load_policy

            load_policy(local).close()
        except ManifestError:
            return None
        return manifest if manifest.extra.get("dataset_digest") == digest else None

    def _ray_train_storage(self) -> str:
        # Ray Train workers on other nodes must reach the run's storage: with an S3 store use it,
        # otherwise (a local store: one machine) the local work directory.
        if self.store.location.is_s3:
            return self.store.path_for(f"loop/{self.config.name}/ray_results")
        return str((self.work / "ray_results").resolve())

    def _upload_model(self, out_dir: Path, rel: str) -> None:
        from cluster.loop.publish import upload_model

        upload_model(self.store, out_dir, rel)


def _manifest_of(ref: str) -> Manifest:
    from serve.model_source import resolve_model

    return Manifest.load(resolve_model(ref))


def _summary(step: str, data: dict[str, Any]) -> str:
    if step == "collect":
        return f"{data['n_new']} new + {data['n_old']} older accepted episodes ({data['trigger']})"
    if step == "train":
        acc = data["metrics"].get("val_accuracy", data["metrics"].get("train_accuracy", float("nan")))
        return f"candidate {data['version']} ({'adopted' if data['adopted'] else 'trained'}), accuracy {acc:.3f}"
    if step == "gate":
        c, s, q = data["candidate"], data["serving"], data.get("sequential") or {}
        if c is None or s is None:
            return f"{data['decision']}: no gate episodes ({'; '.join(data['reasons'])})"
        interval = (f" (difference {100 * q['success_diff']:+.1f} points, {100 * q['confidence']:.0f}% interval "
                    f"[{100 * q['success_low']:+.1f}, {100 * q['success_high']:+.1f}] over {q['pairs']} pairs)"
                    if q.get("pairs") else "")
        return (f"{data['decision']}: oracle {c['oracle_success']:.3f} vs {s['oracle_success']:.3f}{interval}, "
                f"LLM calls/ep {c['llm_calls_per_episode']:.2f} vs {s['llm_calls_per_episode']:.2f}")
    if step == "promote":
        return f"serving {data['version']}" + (" (was already deployed)" if data["already_deployed"] else "")
    if step == "done":
        return f"serving {data['serving']['version']}"
    return "ok"

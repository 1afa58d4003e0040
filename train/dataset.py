"""Building a supervised dataset from stored trajectories.

Pipeline: read episodes -> keep the accepted ones (validator or oracle) -> drop rule-decided
steps -> de-duplicate -> split by task -> augment (verdict-preserving; optional paraphrase and
LLM judge) -> encode -> Parquet (train.parquet, validation.parquet) + a dataset card.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rollout.core.agent_table import AGENT_IDS, agent_name
from rollout.core.trajectory import EpisodeRecord, is_infra_failure
from solvers.errors import InputError
from train.encoder import ENCODER_VERSION, encode_state, encode_text
from train.examples import Example, FilterCounts, select_examples, split_by_task

CARD_FILE = "dataset_card.json"
SPLITS = ("train", "validation")


class DatasetError(InputError, ValueError):
    pass


@dataclass
class BuildConfig:
    check: str = "validator"
    val_fraction: float = 0.2
    seed: int = 0
    prefer_cheap: bool = False
    drop_idle: bool = False  # drop steps whose agent changed nothing (train/examples.idle_step)
    progress_only: bool = False  # keep only steps after which the validator shows progress (progress_step)
    hindsight: bool = False  # relabel a step without progress with the agent that later made it (hindsight_labels)
    augment_copies: int = 1  # verdict-preserving variants per accepted episode (0: none)
    verify_augment: bool = True  # re-run the validator on each variant's final plan
    paraphrase: bool = False
    judge: bool = False
    tokenizer_dir: str = ""  # "" -> prompts are not tokenizer-encoded (text column only)


@dataclass
class DatasetCard:
    dataset_version: str
    sources: list[str]
    encoder_version: str
    tokenizer: str
    label_map: dict[int, str]
    stages: dict[str, int]
    per_agent: dict[str, dict[str, int]]
    per_domain: dict[str, dict[str, int]]
    majority_agent: int
    majority_rate_validation: float
    llm_backends: list[str]
    config: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0

    def save(self, out: Path) -> None:
        data = asdict(self)
        data["label_map"] = {str(k): v for k, v in self.label_map.items()}
        (out / CARD_FILE).write_text(json.dumps(data, indent=2, sort_keys=True))
        (out / "dataset_card.md").write_text(self.table() + "\n")

    @classmethod
    def load(cls, data_dir: str | Path) -> DatasetCard:
        path = Path(data_dir) / CARD_FILE
        if not path.is_file():
            raise DatasetError(f"{data_dir}: no {CARD_FILE} (not a dataset built by `halo dataset build`)")
        data = json.loads(path.read_text())
        data["label_map"] = {int(k): v for k, v in data["label_map"].items()}
        return cls(**data)

    def table(self) -> str:
        lines = [f"dataset {self.dataset_version}  encoder {self.encoder_version}  tokenizer {self.tokenizer or '-'}",
                 f"sources: {', '.join(self.sources)}  backends: {', '.join(self.llm_backends)}", "",
                 "| filter stage | count |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in self.stages.items()]
        lines += ["", "| agent | train | validation |", "|---|---:|---:|"]
        for key, c in sorted(self.per_agent.items(), key=lambda kv: int(kv[0].split(" ")[0])):
            lines.append(f"| {key} | {c.get('train', 0)} | {c.get('validation', 0)} |")
        lines += ["", "| domain | train | validation |", "|---|---:|---:|"]
        for key, c in sorted(self.per_domain.items()):
            lines.append(f"| {key} | {c.get('train', 0)} | {c.get('validation', 0)} |")
        lines.append(f"\nmajority agent {self.majority_agent}: {self.majority_rate_validation:.1%} of validation")
        return "\n".join(lines)


def parse_sources(sources: list[str]) -> list[tuple[str, str]]:
    """`STORE/RUN` -> (store URL, run id); the run is the last path component."""
    out = []
    for src in sources:
        store, sep, run = src.rstrip("/").rpartition("/")
        if not sep or not store or not run:
            raise DatasetError(f"--from {src!r}: expected STORE/RUN (e.g. halo-data/run-7 or s3://bucket/data/run-7)")
        out.append((store, run))
    return out


def read_sources(sources: list[str]) -> list[EpisodeRecord]:
    from rollout.store import TrajectoryStore

    by_store: dict[str, list[str]] = {}
    for store, run in parse_sources(sources):
        by_store.setdefault(store, []).append(run)
    episodes: list[EpisodeRecord] = []
    for store, runs in by_store.items():
        ts = TrajectoryStore(store)
        known = {r.run_id for r in ts.list_runs()}
        missing = [r for r in runs if r not in known]
        if missing:
            have = ", ".join(sorted(known)) or "none"
            raise DatasetError(f"store {store}: no run(s) {', '.join(missing)} (have: {have})")
        episodes.extend(ts.read_episodes(runs))
    return episodes


def build_examples(episodes: list[EpisodeRecord], config: BuildConfig,
                   judge: Callable[[Example], bool] | None = None,
                   paraphrase: Callable[[Example], Example | None] | None = None,
                   ) -> tuple[list[Example], dict[str, int]]:
    counts = FilterCounts()
    infra = sum(is_infra_failure(e) for e in episodes)  # a dependency failed: not the policy's doing
    episodes = [e for e in episodes if not is_infra_failure(e)]
    examples = select_examples(episodes, config.check, counts, prefer_cheap=config.prefer_cheap,
                               drop_idle=config.drop_idle, progress_only=config.progress_only,
                               hindsight=config.hindsight)
    stages = {"episodes read": counts.episodes_in + infra, "infrastructure failures dropped": infra,
              f"episodes accepted ({config.check})": counts.episodes_accepted,
              "costly episodes dropped (prefer_cheap)": counts.episodes_costly,
              "steps read": counts.steps_in, "search steps off the chosen path dropped": counts.steps_off_path,
              "rule steps dropped": counts.steps_hardcoded,
              "idle steps dropped (drop_idle)": counts.steps_idle,
              "steps without verifier progress dropped (progress_only)": counts.steps_no_progress,
              "steps relabelled by hindsight (hindsight)": counts.steps_relabelled,
              "steps without a later repair dropped (hindsight)": counts.steps_unrepaired,
              "duplicates dropped": counts.duplicates_dropped, "examples kept": counts.steps_kept}
    if not examples:
        return [], stages
    split_by_task(examples, config.val_fraction, config.seed)
    if judge is not None:
        before = len(examples)
        examples = [e for e in examples if judge(e)]
        stages["judge rejected"] = before - len(examples)
    train = [e for e in examples if e.split == "train"]
    if config.augment_copies > 0:
        from train.augment import augment_examples

        extra, rejected = augment_examples(train, episodes, copies=config.augment_copies, seed=config.seed,
                                           verify=config.verify_augment)
        stages["augmented added"] = len(extra)
        stages["augmented rejected (verdict changed)"] = rejected
        examples += extra
    if paraphrase is not None:
        extra_p = [p for e in train if (p := paraphrase(e)) is not None]
        stages["paraphrases added"] = len(extra_p)
        examples += extra_p
    stages["examples written"] = len(examples)
    return examples, stages


def write_dataset(examples: list[Example], stages: dict[str, int], out: str | Path, *, config: BuildConfig,
                  sources: list[str]) -> DatasetCard:
    if not examples:
        raise DatasetError("empty dataset: no example survived the filters "
                           f"({', '.join(f'{k}: {v}' for k, v in stages.items())})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer, label_map, tok_name = None, {i: str(i) for i in AGENT_IDS}, ""
    if config.tokenizer_dir:
        from train.base_models import load_tokenizer, resolve_base_model
        from train.labels import choose_label_set

        tok_path = resolve_base_model(config.tokenizer_dir)
        tokenizer = load_tokenizer(tok_path)
        label_map = choose_label_set(tokenizer, allow_added_tokens=True).label_map
        tok_name = tokenizer_fingerprint(tokenizer)
    digest = hashlib.sha256()
    for split in SPLITS:
        rows = [e for e in examples if e.split == split]
        cols: dict[str, list[Any]] = {k: [getattr(e, k) for e in rows] for k in Example.__dataclass_fields__}
        states = [e.state for e in rows]
        cols["text"] = [encode_text(s, label_map) for s in states]
        cols["prompt"] = [encode_state(s, tokenizer, ENCODER_VERSION, label_map) if tokenizer else "" for s in states]
        cols["label"] = [label_map[e.agent_id] for e in rows]
        table = pa.table(cols)
        pq.write_table(table, out / f"{split}.parquet")
        digest.update("".join(sorted(cols["example_id"])).encode())
    per_agent: dict[str, Counter] = {}
    per_domain: dict[str, Counter] = {}
    for e in examples:
        per_agent.setdefault(f"{e.agent_id} {agent_name(e.agent_id)}", Counter())[e.split] += 1
        per_domain.setdefault(f"{e.family}/{e.domain_name}", Counter())[e.split] += 1
    train_counts = Counter(e.agent_id for e in examples if e.split == "train")
    majority = train_counts.most_common(1)[0][0] if train_counts else examples[0].agent_id
    val = [e for e in examples if e.split == "validation"]
    card = DatasetCard(
        dataset_version=digest.hexdigest()[:12], sources=list(sources), encoder_version=ENCODER_VERSION,
        tokenizer=tok_name, label_map=label_map, stages=stages,
        per_agent={k: dict(v) for k, v in per_agent.items()}, per_domain={k: dict(v) for k, v in per_domain.items()},
        majority_agent=int(majority),
        majority_rate_validation=(sum(e.agent_id == majority for e in val) / len(val)) if val else 0.0,
        llm_backends=sorted({e.llm_backend for e in examples}), config=asdict(config), created_at=time.time())
    card.save(out)
    return card


def tokenizer_fingerprint(tokenizer: Any) -> str:
    name = Path(str(getattr(tokenizer, "name_or_path", "") or "tokenizer")).name
    vocab = hashlib.sha1(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()[:10]
    template = hashlib.sha1(str(getattr(tokenizer, "chat_template", "")).encode()).hexdigest()[:6]
    return f"{name}:{len(tokenizer)}:{vocab}:{template}"


def read_split(data_dir: str | Path, split: str) -> list[dict[str, Any]]:
    path = Path(data_dir) / f"{split}.parquet"
    if not path.is_file():
        raise DatasetError(f"{path}: missing (not a dataset built by `halo dataset build`?)")
    return pq.read_table(path).to_pylist()


def load_examples(data_dir: str | Path) -> list[Example]:
    fields = set(Example.__dataclass_fields__)
    return [Example(**{k: v for k, v in row.items() if k in fields})
            for split in SPLITS for row in read_split(data_dir, split)]


def build_dataset(episodes: list[EpisodeRecord], out: str | Path, config: BuildConfig | None = None,
                  sources: list[str] | None = None, judge: Callable[[Example], bool] | None = None,
                  paraphrase: Callable[[Example], Example | None] | None = None) -> DatasetCard:
    config = config or BuildConfig()
    examples, stages = build_examples(episodes, config, judge=judge, paraphrase=paraphrase)
    return write_dataset(examples, stages, out, config=config, sources=sources or sorted({e.run_id for e in episodes}))

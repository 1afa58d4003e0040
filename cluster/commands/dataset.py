"""`halo dataset build`: stored trajectories -> a filtered, augmented, encoded SFT dataset."""

from __future__ import annotations

from pathlib import Path

import typer

from cluster.errors import UsageError


def register(app: typer.Typer) -> None:
    group = typer.Typer(no_args_is_help=True, help="Build supervised datasets from trajectories.")
    app.add_typer(group, name="dataset")

    @group.command("build")
    def build(
        sources: list[str] = typer.Option(..., "--from", help="STORE/RUN (repeatable), e.g. halo-data/run-7"),
        out: Path = typer.Option(..., "--out", help="output directory (Parquet + dataset card)"),
        filter_: str = typer.Option("validator", "--filter", help="validator | oracle: which check must accept"),
        tokenizer: str = typer.Option("smollm2", help="base model whose tokenizer/chat template encodes the "
                                                     "prompts ('' for the token-free text only)"),
        val_fraction: float = typer.Option(0.2, help="share of tasks held out for validation"),
        augment: int = typer.Option(1, help="verdict-preserving variants per accepted episode (0: none)"),
        verify_augment: bool = typer.Option(True, help="re-validate each variant's final plan"),
        prefer_cheap: bool = typer.Option(False, help="per task, keep only accepted episodes with at most the "
                                                      "median number of LLM calls"),
        drop_idle: bool = typer.Option(False, help="drop steps whose agent changed neither domain, problem "
                                                   "nor plan (the label is then a decision that did something)"),
        progress_only: bool = typer.Option(False, help="step-level verifier filter: keep only steps after which "
                                                       "the plan validated or the validator's verdict changed"),
        paraphrase: bool = typer.Option(False, help="add LLM paraphrases of the specification"),
        judge: bool = typer.Option(False, help="drop examples an LLM judge rejects"),
        llm_url: str = typer.Option("", help="OpenAI-compatible base URL for --paraphrase/--judge"),
        llm_model: str = typer.Option("gpt-4o-mini", help="model name for --paraphrase/--judge"),
        seed: int = typer.Option(0),
    ) -> None:
        """Filter, de-duplicate, split by task, augment, encode; print the dataset card."""
        from train.dataset import BuildConfig, DatasetError, build_dataset, read_sources
        from train.examples import FILTERS

        if filter_ not in FILTERS:
            raise typer.BadParameter(f"--filter must be one of {', '.join(FILTERS)}")
        config = BuildConfig(check=filter_, val_fraction=val_fraction, seed=seed, augment_copies=augment,
                             verify_augment=verify_augment, paraphrase=paraphrase, judge=judge,
                             tokenizer_dir=tokenizer, prefer_cheap=prefer_cheap, drop_idle=drop_idle,
                             progress_only=progress_only)
        judge_fn = paraphrase_fn = None
        if judge or paraphrase:
            from train.llm_assist import make_assist

            assist = make_assist(llm_url, llm_model)
            judge_fn = assist.judge if judge else None
            paraphrase_fn = assist.paraphrase if paraphrase else None
        from cluster.preflight import check_store
        from train.dataset import parse_sources

        try:
            for store_url in {store_url for store_url, _ in parse_sources(sources)}:
                check_store(store_url)  # no credentials, no answer: one line and exit 3, not minutes of retries
        except DatasetError as exc:
            raise UsageError(str(exc)) from exc
        try:
            episodes = read_sources(sources)
            card = build_dataset(episodes, out, config, sources=sources, judge=judge_fn, paraphrase=paraphrase_fn)
        except DatasetError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(card.table())
        typer.echo(f"\nwrote {out}/train.parquet, {out}/validation.parquet, {out}/dataset_card.json")

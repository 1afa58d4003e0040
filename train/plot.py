"""The training-curve plot written next to every LLM artifact (curves.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path, title: str) -> Path:
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=80)
    _pyplot().close(fig)
    return path


def plot_curves(history: dict[str, list[dict[str, Any]]], path: str | Path, title: str = "") -> Path:
    plt = _pyplot()
    steps = history.get("steps", [])
    epochs = history.get("epochs", [])
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    if steps:
        ax_loss.plot([s["step"] for s in steps], [s["loss"] for s in steps], label="train loss (per step)", alpha=0.7)
    val = [e for e in epochs if "val_loss" in e]
    if val:
        ax_loss.plot([e["global_step"] for e in val], [e["val_loss"] for e in val], "o-", label="validation loss")
        ax_acc.plot([e["global_step"] for e in val], [e["val_accuracy"] for e in val], "o-", color="tab:green",
                    label="validation agent accuracy")
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("cross-entropy on the label token")
    ax_loss.legend()
    ax_acc.set_xlabel("optimizer step")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(0, 1)
    ax_acc.legend()
    return _save(fig, path, title)


def plot_rl_curves(history: list[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Reward and success per RL iteration (train/rl_loop.py), LLM calls on the right."""
    plt = _pyplot()
    it = [h["iteration"] for h in history]
    fig, (ax_reward, ax_calls) = plt.subplots(1, 2, figsize=(10, 4))
    ax_reward.plot(it, [h["mean_reward"] for h in history], "o-", label="mean reward")
    ax_reward.plot(it, [h["oracle_success"] for h in history], "s-", label="oracle success")
    ax_reward.plot(it, [h["validator_success"] for h in history], "^-", alpha=0.6, label="validator success")
    ax_reward.set_xlabel("iteration")
    ax_reward.set_ylabel("per episode (sampling policy)")
    ax_reward.legend()
    ax_calls.plot(it, [h["llm_calls"] for h in history], "o-", color="tab:red", label="LLM calls per episode")
    ax_calls.set_xlabel("iteration")
    ax_calls.legend()
    return _save(fig, path, title)

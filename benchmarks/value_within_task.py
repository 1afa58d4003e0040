"""What a value model knows beyond the verifier's verdict: on its held-out tasks, the AUC over pairs
(a state of an episode that succeeded, a state of one that failed) of the same task at the same
step, and of the same task, step and verdict (rollout/policies/search.verdict_value).

The first says whether the model tells good states from bad within one task, which the search
needs; the second whether it adds to what the search already orders by. Also what one estimate
costs. SIMULATED when the runs are (the store's episodes say which backend made them).

    python benchmarks/value_within_task.py --model /tmp/s29v/models/value-s53 \\
        --from /tmp/s29v/store/value-s53-p0 --from /tmp/s29v/store/value-s53-p1
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rollout.policies.search import verdict_value  # noqa: E402
from train.dataset import read_sources  # noqa: E402
from train.manifest import Manifest  # noqa: E402
from train.value_model import ValueExample, held_out_tasks, load_value_model, value_examples  # noqa: E402


def paired_auc(examples: list[ValueExample], preds: list[float], *, same_verdict: bool) -> tuple[int, float]:
    """(pairs, AUC) over (success, failure) state pairs sharing task and step (and verdict)."""
    groups: dict[tuple, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for e, p in zip(examples, preds, strict=True):
        key = (e.task_id, e.state.step, verdict_value(e.state) if same_verdict else 0.0)
        groups[key][0 if e.success else 1].append(p)
    wins = pairs = 0.0
    for pos, neg in groups.values():
        for p in pos:
            for q in neg:
                pairs += 1
                wins += 1.0 if p > q else 0.5 if p == q else 0.0
    return int(pairs), wins / pairs if pairs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a value model directory (halo train --value)")
    ap.add_argument("--from", dest="sources", action="append", required=True, help="STORE/RUN (repeatable)")
    args = ap.parse_args(argv)
    model = load_value_model(args.model)
    share = float(Manifest.load(args.model).extra.get("held_out_share", 0.2))
    examples = value_examples(read_sources(args.sources))
    held = held_out_tasks({e.task_id for e in examples}, share)
    test = [e for e in examples if e.task_id in held]
    states = [e.state for e in test]
    t0 = time.perf_counter()
    preds = [model.predict(s) for s in states]
    t1 = time.perf_counter()
    again = [model.predict(s) for s in states]  # the PDDL's static reads cached, as for a search's siblings
    t2 = time.perf_counter()
    assert again == preds
    print(f"{args.model}: {len(states)} held-out states, an estimate takes {1000 * (t1 - t0) / len(states):.2f} ms "
          f"the first time, {1000 * (t2 - t1) / len(states):.2f} ms again")
    for same_verdict, what in ((False, "same task and step"), (True, "same task, step and verdict")):
        pairs, auc = paired_auc(test, preds, same_verdict=same_verdict)
        print(f"{args.model}: held-out {what}: {pairs} pairs, AUC {auc:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

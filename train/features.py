"""Hashed sparse features of an EpisodeState for the fast (linear) policy.

The features are the state's symptoms as an orchestrator reads them: the error category and
plan flags, diagnostic codes such as [validate.precondition_failed], words and word pairs of
the validator errors and planner log tail, domain features the target planner may reject,
and the recent agent history (last agent, last pair, which agents were tried). Numbers and
object names are stripped from the text so the features generalise across tasks.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

from rollout.state import EpisodeState

FEATURE_VERSION = "halo-feat-1"
DEFAULT_BUCKETS = 1 << 20

_CODE_RE = re.compile(r"\[([a-z_]+\.[a-z_]+)\]")
_FALSE_PRE_RE = re.compile(r"precondition false: \((\S+?)[ )]")
_STEP_RE = re.compile(r"step (\d+) \(([^)]*)\)")
_WORD_RE = re.compile(r"[a-z][a-z_\-]{2,}")
_DOMAIN_MARKERS = (":durative-action", ":functions", "increase", "decrease", "(when", ":types", "either",
                   ":negative-preconditions", ":conditional-effects", ":numeric-fluents", ":constants",
                   "forall", "exists", ":derived")
_LOG_TAIL_CHARS = 400
_ERR_CHARS = 1200


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(text.lower())


def state_features(state: EpisodeState) -> list[str]:
    feats = ["bias", f"cat={state.error_category or 'none'}", f"found={state.plan_found}",
             f"valid={state.plan_valid}", f"planner={state.target_planner}", f"step={min(state.step, 9)}",
             f"dom_empty={not state.domain.strip()}", f"prob_empty={not state.problem.strip()}",
             f"plan_empty={not state.plan.strip()}", f"has_solution={bool(state.proposed_solution.strip())}"]
    plan_len = len([ln for ln in state.plan.splitlines() if ln.strip() and not ln.startswith(";")])
    feats.append(f"plan_len={min(plan_len, 20) // 4}")
    hist = state.history
    last = hist[-1] if hist else -1
    feats.append(f"last={last}")
    feats.append(f"last2={hist[-2] if len(hist) > 1 else -1},{last}")
    feats.extend(f"tried={a}" for a in set(hist))
    feats.extend(f"tried2={a}" for a in {a for a in hist if hist.count(a) >= 2})
    feats.append(f"cat_last={state.error_category}|{last}")
    errors = state.validator_errors[-_ERR_CHARS:]
    log = state.planner_log[-_LOG_TAIL_CHARS:]
    codes = set(_CODE_RE.findall(errors)) | set(_CODE_RE.findall(log))
    feats.extend(f"code={c}" for c in codes)
    feats.extend(f"code_last={c}|{last}" for c in codes)
    err_words = _words(errors)
    feats.extend(f"err={w}" for w in set(err_words))
    feats.extend(f"err2={a}_{b}" for a, b in set(zip(err_words, err_words[1:], strict=False)))
    feats.extend(f"log={w}" for w in set(_words(log)))
    domain = state.domain.lower()
    feats.extend(f"dom:{m}" for m in _DOMAIN_MARKERS if m in domain)
    failure = _failure_features(state)
    # The whole symptom (category, codes, failure analysis) together with the last k agents
    # tried: what decides the next candidate when the first repair did not take.
    key = "|".join([state.error_category or "none", *sorted(codes), *failure])
    for k in (0, 1, 2, 3):
        feats.append(f"ctx{k}={key}|{hist[-k:] if k else ''}")
    feats.extend(failure)
    return feats


def _failure_features(state: EpisodeState) -> list[str]:
    """Where a failing precondition's predicate comes from, and whether the failing step repeats
    the one before it: cheap static analysis a human orchestrator would do by eye."""
    out: list[str] = []
    m = _FALSE_PRE_RE.search(state.validator_errors)
    if m:
        pat = "(" + m.group(1).lower()
        domain, problem = state.domain.lower(), state.problem.lower()
        init = problem.split(":init", 1)[-1]
        effects = [part.split(":action", 1)[0] for part in domain.split(":effect")[1:]]
        out.append(f"false_pre_in_init={pat in init}")
        out.append(f"false_pre_in_effects={any(pat in e for e in effects)}")
        out.append(f"false_pre_declared={pat in domain.split(':action', 1)[0]}")
    step = _STEP_RE.search(state.validator_errors)
    if step:
        lines = [ln.strip().lower() for ln in state.plan.splitlines() if ln.strip() and not ln.startswith(";")]
        i = int(step.group(1))
        out.append(f"fail_step_repeats={2 <= i <= len(lines) and lines[i - 1] == lines[i - 2]}")
        out.append(f"fail_step_first={i == 1}")
    return out


def hash_features(feats: Iterable[str], buckets: int = DEFAULT_BUCKETS) -> list[int]:
    return sorted({zlib.crc32(f.encode()) % buckets for f in feats})

"""Decision-service benchmark through HTTP on 127.0.0.1, against a Serve no-op deployment measured
in the same run (Serve's own per-request overhead is the baseline; the machine may be shared).

    python benchmarks/serve.py [--requests 400] [--seconds 5] [--llm-model DIR] [--skip-llm]

1. rule-decided requests: p50 <= 2x the no-op p50, p99 <= 3x
2. fast policy (hashed_linear): p50 <= 10 ms, p99 <= 25 ms at concurrency 1; throughput at
   concurrency 16 >= 70% of the no-op's
3. LLM policy on CPU (SmolLM2-135M + LoRA; --llm-model for a trained artifact): p50/p99, decisions/s,
   and the saving from reusing the KV cache of a static prompt prefix vs recomputing it.
"""



import argparse
import asyncio
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rollout.agent_table import AGENT_TABLE  # noqa: E402
from rollout.state import EpisodeState  # noqa: E402
from rollout.trajectory import EpisodeRecord, StepRecord  # noqa: E402

DOMAIN = ("(define (domain blocks) (:requirements :strips :typing) (:types block)\n"
          " (:predicates (on ?x - block ?y - block) (clear ?x - block) (holding ?x - block) (handempty))\n"
          " (:action stack :parameters (?x - block ?y - block) :precondition (and (holding ?x) (clear ?y))\n"
          "  :effect (and (on ?x ?y) (clear ?x) (handempty) (not (holding ?x)) (not (clear ?y)))))")
SYMPTOMS = (("plan_invalid", "[validate.precondition_failed] precondition (clear b) of step 2 not satisfied", 13),
            ("plan_invalid", "[validate.goal_not_reached] goal (on a b) not reached after the last step", 17),
            ("no_plan_found", "search exhausted: no plan found", 20),
            ("unsupported_requirement", "[translate.unsupported] :durative-actions are not supported", 7))


def model_state(i: int) -> EpisodeState:
    cat, err, _ = SYMPTOMS[i % len(SYMPTOMS)]
    return EpisodeState(task_description=f"Stack the {3 + i % 5} blocks of task {i} into a single tower, "
                                         "largest at the bottom.", domain=DOMAIN,
                        problem=f"(define (problem p{i}) (:domain blocks) (:objects a b c - block))",
                        plan="(pick-up a)\n(stack a b)\n", validator_errors=err, error_category=cat,
                        plan_found=cat == "plan_invalid", history=[2, 9][: i % 3], step=1 + i % 4)


def rule_state(i: int) -> EpisodeState:
    if i % 2:
        return EpisodeState(task_description=f"Stack the blocks of task {i}.")  # empty domain -> 2
    return EpisodeState(task_description=f"Stack the blocks of task {i}.", domain=DOMAIN, plan="(stack a b)\n",
                        plan_found=True, plan_valid=True)  # accepted -> 11


def training_episodes(n: int = 40) -> list[EpisodeRecord]:
    rng = random.Random(0)
    out = []
    for t in range(n):
        steps = []
        for s in range(3):
            k = rng.randrange(len(SYMPTOMS))
            agent = SYMPTOMS[k][2]
            steps.append(StepRecord(step=s, state_json=model_state(k + 4 * t).to_json(), agent_id=agent,
                                    agent_name=AGENT_TABLE[agent].name, decided_by="teacher", is_hardcoded=False))
        out.append(EpisodeRecord(episode_id=f"bench-{t}", run_id="bench", task_id=f"bench/{t}", family="classical",
                                 domain_name="blocks", policy_name="scripted", policy_version="1",
                                 llm_backend="sim", success_validator=True, success_oracle=True, steps=steps))
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def deploy_noop(prefix: str) -> None:
    from fastapi import FastAPI, Request
    from ray import serve

    app = FastAPI()

    @serve.deployment(name="NoOp", max_ongoing_requests=32, ray_actor_options={"num_cpus": 0})
    @serve.ingress(app)
    class NoOp:
        @app.post("/v1/decide")
        async def decide(self, request: Request) -> dict[str, Any]:
            await request.body()
            return {"agent_id": 0, "agent_name": "AgentHallucinations", "decided_by": "rule",
                    "policy_version": "noop", "latency_ms": 0.0}

    serve.run(NoOp.bind(), name="noop", route_prefix=prefix)


def latency_round(client: httpx.Client, kinds: dict[str, tuple[str, Any]], n: int) -> dict[str, list[float]]:
    """Concurrency 1, the kinds interleaved so drifting background load hits all of them alike."""
    out: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(n):
        for kind, (path, make) in kinds.items():
            body = make(i).to_dict()
            t0 = time.perf_counter()
            r = client.post(path, json=body)
            out[kind].append((time.perf_counter() - t0) * 1000.0)
            if r.status_code != 200:
                raise RuntimeError(f"{kind}: {r.status_code} {r.text[:200]}")
    return out


async def throughput(url: str, path: str, make: Any, concurrency: int, seconds: float) -> tuple[float, int]:
    done, errors = 0, 0
    deadline = time.monotonic() + seconds

    async def worker(client: httpx.AsyncClient, w: int) -> None:
        nonlocal done, errors
        i = w
        while time.monotonic() < deadline:
            r = await client.post(path, json=make(i).to_dict())
            if r.status_code == 200:
                done += 1
            else:
                errors += 1
            i += concurrency

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        t0 = time.monotonic()
        await asyncio.gather(*(worker(client, w) for w in range(concurrency)))
        return done / (time.monotonic() - t0), errors


def kv_prefix_saving(base_dir: Path, prefix_tokens: int, suffix_tokens: int, reps: int) -> dict[str, float]:
    """Time one forward pass over prefix+suffix vs the suffix alone on a cached prefix."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM

    from train.base_models import load_tokenizer
    from train.encoder import SYSTEM_PROMPT

    tok = load_tokenizer(base_dir)
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).eval()
    agents = "\n".join(f"{a.agent_id}: {a.name} - {a.summary}" for a in AGENT_TABLE)
    static = SYSTEM_PROMPT + "\n\n### Available agents\n" + agents + "\n\n### Domain\n"
    prefix_ids = tok(static, add_special_tokens=False)["input_ids"]
    filler = tok(DOMAIN + "\n", add_special_tokens=False)["input_ids"]
    while len(prefix_ids) < prefix_tokens:
        prefix_ids += filler
    prefix_ids = prefix_ids[:prefix_tokens]
    suffix_ids = (tok(model_state(1).validator_errors + "\n" + model_state(1).plan, add_special_tokens=False)
                  ["input_ids"] * 40)[:suffix_tokens]
    full = torch.tensor([prefix_ids + suffix_ids])
    suffix = torch.tensor([suffix_ids])
    with torch.inference_mode():
        out = model(torch.tensor([prefix_ids]), use_cache=True)
        cache = getattr(out, "cache", None) or out.past_key_values
        model(full, logits_to_keep=1)  # warm-up
        full_ms, cached_ms = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            a = model(full, logits_to_keep=1).logits[0, -1]
            full_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            # the cache is extended in place by a forward pass, so each decision starts from a copy
            b = model(suffix, cache=copy.deepcopy(cache), logits_to_keep=1).logits[0, -1]
            cached_ms.append((time.perf_counter() - t0) * 1000)
        same = bool(torch.argmax(a) == torch.argmax(b))
    return {"full_ms": statistics.median(full_ms), "cached_ms": statistics.median(cached_ms), "same_argmax": same}


def make_llm_model(out: Path, base_dir: Path) -> Path:
    """An LLM policy artifact on SmolLM2 with an untrained LoRA adapter: latency does not depend on
    training, and no trained artifact may exist yet (pass --llm-model for one)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from train.base_models import load_tokenizer
    from train.encoder import ENCODER_VERSION
    from train.labels import choose_label_set
    from train.llm_policy import ADAPTER_DIR
    from train.manifest import Manifest
    from train.sft import LORA_TARGETS

    tok = load_tokenizer(base_dir)
    labels = choose_label_set(tok, allow_added_tokens=False)
    base = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=list(LORA_TARGETS))).save_pretrained(
        str(out / ADAPTER_DIR))
    tok.save_pretrained(str(out))
    Manifest(name="bench-llm", version="bench-llm", policy_class="llm", label_map=labels.label_map,
             encoder_version=ENCODER_VERSION, base_model=str(base_dir),
             extra={"base_model_path": str(base_dir)}).save(out)
    return out


def row(name: str, p50: float | str, p99: float | str, rate: float | str, ratio: str, verdict: str) -> str:
    def f(v: float | str) -> str:
        return f"{v:9.2f}" if isinstance(v, float) else f"{v:>9}"
    return f"{name:<34} {f(p50)} {f(p99)} {f(rate)}  {ratio:<26} {verdict}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per kind at concurrency 1")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--llm-model", type=Path, default=None, help="a trained LLM policy artifact")
    parser.add_argument("--llm-requests", type=int, default=30)
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    import ray
    from ray import serve

    from serve.config import ServeConfig
    from serve.launcher import start_service
    from train.fast_policy import train_fast_policy

    work = Path(tempfile.mkdtemp(prefix="halo-bench-serve-"))
    fast_dir = work / "fast"
    train_fast_policy(training_episodes(), fast_dir, name="bench-fast")
    port = free_port()
    fails: list[str] = []
    try:
        cfg = ServeConfig(model=str(fast_dir), port=port, app_name="bench", route_prefix="/", num_replicas=1,
                          replica_num_cpus=0, registry_name="reg-bench", max_ongoing_requests=64,
                          max_queued_requests=1024)
        svc = start_service(cfg, num_cpus=args.num_cpus)
        deploy_noop("/noop")
        url = svc.url
        with httpx.Client(base_url=url, timeout=60) as client:
            kinds = {"noop": ("/noop/v1/decide", model_state), "rule": ("/v1/decide", rule_state),
                     "fast": ("/v1/decide", model_state)}
            latency_round(client, kinds, 30)  # warm-up
            lat = latency_round(client, kinds, args.requests)
        # check the fast path really went to the model
        check = httpx.post(f"{url}/v1/decide", json=model_state(0).to_dict()).json()
        assert check["decided_by"] == "model", check
        noop_rate, e1 = asyncio.run(throughput(url, "/noop/v1/decide", model_state, args.concurrency, args.seconds))
        fast_rate, e2 = asyncio.run(throughput(url, "/v1/decide", model_state, args.concurrency, args.seconds))
        rule_rate, e3 = asyncio.run(throughput(url, "/v1/decide", rule_state, args.concurrency, args.seconds))
        if e1 + e2 + e3:
            fails.append(f"throughput runs saw {e1 + e2 + e3} errors")

        p = {k: (pct(v, 0.5), pct(v, 0.99)) for k, v in lat.items()}
        r50, r99 = p["rule"][0] / p["noop"][0], p["rule"][1] / p["noop"][1]
        share = fast_rate / noop_rate
        checks = {
            "rule p50 <= 2x no-op": r50 <= 2.0, "rule p99 <= 3x no-op": r99 <= 3.0,
            "fast p50 <= 10 ms": p["fast"][0] <= 10.0, "fast p99 <= 25 ms": p["fast"][1] <= 25.0,
            f"fast throughput @{args.concurrency} >= 70% no-op": share >= 0.7,
        }
        print(f"\nDecision service over HTTP on 127.0.0.1 ({args.requests} requests per kind at concurrency 1, "
              f"{args.seconds:.0f} s per throughput run at concurrency {args.concurrency})\n")
        print(f"{'':<34} {'p50 ms':>9} {'p99 ms':>9} {'req/s':>9}  {'ratio':<26} target")
        print(row("Serve no-op (baseline)", p["noop"][0], p["noop"][1], noop_rate, "1.00x", ""))
        print(row("rule-decided", p["rule"][0], p["rule"][1], rule_rate, f"p50 {r50:.2f}x p99 {r99:.2f}x",
                  "ok" if r50 <= 2 and r99 <= 3 else "MISSED (<=2x/<=3x)"))
        print(row("fast policy (hashed_linear)", p["fast"][0], p["fast"][1], fast_rate,
                  f"p50 {p['fast'][0] / p['noop'][0]:.2f}x, rate {share:.0%} no-op",
                  "ok" if all(v for k, v in checks.items() if k.startswith("fast")) else "MISSED (10/25 ms, 70%)"))

        if not args.skip_llm:
            from train.base_models import smollm2_dir

            base = smollm2_dir()
            llm_dir = args.llm_model or make_llm_model(work / "llm", base)
            llm_cfg = ServeConfig(model=str(llm_dir), port=port, app_name="bench-llm", route_prefix="/llm",
                                  num_replicas=1, replica_num_cpus=0, registry_name="reg-bench-llm",
                                  max_batch_size=8, batch_wait_timeout_s=0.02, runtime="cpu")
            llm = start_service(llm_cfg)
            with httpx.Client(base_url=llm.url, timeout=120) as client:
                latency_round(client, {"llm": ("/v1/decide", model_state)}, 3)
                llm_lat = latency_round(client, {"llm": ("/v1/decide", model_state)}, args.llm_requests)["llm"]
            llm_rate, e4 = asyncio.run(throughput(llm.url, "/v1/decide", model_state, 8, max(args.seconds, 8.0)))
            print(row("LLM policy, CPU (SmolLM2+LoRA)", pct(llm_lat, 0.5), pct(llm_lat, 0.99), llm_rate,
                      "decisions/s at concurrency 8", "reported" + (f" ({e4} errors)" if e4 else "")))
            kv = kv_prefix_saving(base, 1500, 200, reps=5)
            print(row("  forward, 1500+200 tokens", kv["full_ms"], "", "", "", ""))
            print(row("  forward, 200 on cached 1500", kv["cached_ms"], "", "",
                      f"KV prefix saves {kv['full_ms'] / kv['cached_ms']:.1f}x",
                      "same argmax" if kv["same_argmax"] else "ARGMAX DIFFERS"))
        fails += [name for name, ok in checks.items() if not ok]
        print()
        print("all targets met" if not fails else "missed: " + "; ".join(fails))
        print("(ratios are against the no-op measured in this run; absolute numbers depend on machine load)")
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0 if not fails else 1


if __name__ == "__main__":
    raise SystemExit(main())

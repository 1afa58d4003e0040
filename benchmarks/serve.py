"""Decision-service benchmark over HTTP on 127.0.0.1, against a latency floor measured in the same run
(the machine may be shared, so only ratios travel):

    python benchmarks/serve.py [--quick] [--requests 400] [--seconds 5] [--replicas 2] [--llm-model DIR]
                               [--skip-llm]

Rows: the floor (plain uvicorn + FastAPI no-op, its own process), Serve's default no-op (through
Serve's proxy), the same no-op on Serve's direct ingress, and the decision service's fast policy
(hashed_linear) through the proxy, on Serve's direct ingress, and on the one URL `halo serve`
prints first: the replicas' fast ingress (serve/fast_ingress.py: the same app on the replica's
own uvicorn server), all replicas sharing one port (SO_REUSEPORT; the kernel spreads the
connections, no proxy hop); and rule-decided requests there. Default: one replica per CPU (2 here).
Targets, on the one URL, each judged by a 95% bound (benchmarks/bounds.py: bootstrap upper
bounds of latency ratios, a t lower bound over --windows throughput windows):
1. fast policy p50 <= 4x the floor's p50, p99 <= 10x the floor's p99 (concurrency 1)
2. fast policy >= 1,000 decisions/s at concurrency 32
3. rule-decided no slower than the fast policy (p50 <= 1.1x, rate >= 0.9x: noise margin)
`--plans`: the plan-jobs load run instead (benchmarks/serve_plans.py).
Then the LLM policy on CPU (SmolLM2-135M + LoRA; --llm-model for a trained artifact): p50/p99,
decisions/s, and the saving from reusing the KV cache of a static prompt prefix. Exit 1 on a miss.
"""



import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bounds import mean_lower, ratio_upper  # noqa: E402
from benchmarks.http_load import latency, throughput  # noqa: E402
from rollout.core.agent_table import AGENT_TABLE  # noqa: E402
from rollout.core.state import EpisodeState  # noqa: E402
from rollout.core.trajectory import EpisodeRecord, StepRecord  # noqa: E402
from serve.ports import free_port  # noqa: E402

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
    return f"{name:<36} {f(p50)} {f(p99)} {f(rate)}  {ratio:<30} {verdict}"


def start_floor(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "floor_app.py"), str(port)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.post(f"http://127.0.0.1:{port}/v1/decide", json={}, timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the floor server did not start")


def direct_port_of(app_prefix: str, lo: int, hi: int) -> int:
    """The direct-ingress port whose replica serves `app_prefix` (each answers /-/routes)."""
    for port in range(lo, hi + 1):
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/-/routes", timeout=0.5)
        except httpx.HTTPError:
            continue
        if r.status_code == 200 and app_prefix in r.json():
            return port
    raise RuntimeError(f"no direct-ingress replica serves {app_prefix} in ports {lo}-{hi}")


ROWS = ("floor", "noop_proxy", "noop_direct", "fast_proxy", "fast_serve_direct", "fast", "rule")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per row at concurrency 1")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput run")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--quick", action="store_true", help="200 requests, 3 s runs, no LLM (about 2 minutes)")
    parser.add_argument("--llm-model", type=Path, default=None, help="a trained LLM policy artifact")
    parser.add_argument("--llm-requests", type=int, default=30)
    parser.add_argument("--skip-llm", action="store_true")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="also print the figures and verdicts as one JSON line")
    parser.add_argument("--replicas", type=int, default=2, help="decision-service replicas (sharing the one URL)")
    parser.add_argument("--windows", type=int, default=5, help="throughput windows per run (for the bound)")
    parser.add_argument("--plans", action="store_true",
                        help="the plan-jobs load run instead (benchmarks/serve_plans.py)")
    args, _ = parser.parse_known_args()
    if args.quick:
        args.requests, args.seconds, args.skip_llm = min(args.requests, 200), min(args.seconds, 3.0), True
    return args


def direct_ingress_range() -> tuple[int, int]:
    """Serve's direct-ingress ports from a random range (other sessions may share this machine)."""
    base = random.randrange(20_000, 28_000, 200)
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", str(base))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT", str(base + 99))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT", str(base + 100))
    os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT", str(base + 199))
    return (int(os.environ["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]),
            int(os.environ["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]))


def model_body(i: int) -> dict[str, Any]:
    return model_state(i).to_dict()


def rule_body(i: int) -> dict[str, Any]:
    return rule_state(i).to_dict()


def start_decisions(args: argparse.Namespace, work: Path, port: int, lo: int, hi: int) -> tuple[dict, list[int]]:
    """The decision service and the no-op app; returns each row's (host, port, path) and the
    decision replicas' own Serve direct-ingress ports."""
    from serve.config import ServeConfig
    from serve.launcher import accepts_connection, start_service
    from train.fast_policy import train_fast_policy

    train_fast_policy(training_episodes(), work / "fast", name="bench-fast")
    cfg = ServeConfig(model=str(work / "fast"), port=port, app_name="bench", route_prefix="/",
                      num_replicas=args.replicas, replica_num_cpus=0, registry_name="reg-bench",
                      max_ongoing_requests=64, max_queued_requests=1024, max_inflight_per_client=64,
                      fast_port=free_port())
    svc = start_service(cfg, num_cpus=args.num_cpus)
    if not svc.direct_ports:
        raise RuntimeError("direct ingress is off (RAY_SERVE_ENABLE_DIRECT_INGRESS=0 in the environment?)")
    deploy_noop("/noop")
    noop_direct = direct_port_of("/noop", lo, hi)
    h, d = "127.0.0.1", svc.config.fast_port  # the one URL, the one `halo serve` prints first
    # The decision replicas' own Serve direct-ingress ports (Serve's per-request path, for comparison)
    serve_direct = [q for q in range(lo, hi + 1) if q != noop_direct and accepts_connection(h, q)]
    targets = {"noop_proxy": (h, port, "/noop/v1/decide"), "noop_direct": (h, noop_direct, "/noop/v1/decide"),
               "fast_proxy": (h, port, "/v1/decide"), "fast_serve_direct": (h, serve_direct[0], "/v1/decide"),
               "fast": (h, d, "/v1/decide"), "rule": (h, d, "/v1/decide")}
    return targets, serve_direct


def measure_rows(args: argparse.Namespace, targets: dict, serve_direct: list[int]) -> tuple[dict, dict, dict, int]:
    """Latency samples at concurrency 1 and throughput windows at --concurrency, per row."""
    makers = {k: (rule_body if k == "rule" else model_body) for k in targets}
    asyncio.run(latency(targets, makers, 30))  # warm-up
    lat = asyncio.run(latency(targets, makers, args.requests))
    h, d, _ = targets["fast"]
    check = httpx.post(f"http://{h}:{d}/v1/decide", json=model_body(0)).json()
    if check.get("decided_by") != "model":
        raise RuntimeError(f"the fast-policy row was not decided by the model: {check}")
    windows: dict[str, list[float]] = {}
    errors = 0
    for k in ROWS:
        host, prt, path = targets[k]
        spread: int | list[int] = serve_direct if k == "fast_serve_direct" else prt
        n = args.windows if k in ("fast", "rule") else 1
        windows[k] = []
        for _ in range(n):
            rate, e = asyncio.run(throughput(host, spread, path, makers[k], args.concurrency, args.seconds / n))
            windows[k].append(rate)
            errors += e
    rates = {k: statistics.fmean(v) for k, v in windows.items()}
    return lat, windows, rates, errors


def judge(lat: dict, windows: dict, rates: dict, c: int) -> tuple[dict[str, bool], float, float, float]:
    """The targets, each by a 95% bound: the bootstrap upper bound of each ratio, the t lower bound
    of the rate."""
    x50, x99 = ratio_upper(lat["fast"], lat["floor"], 0.5), ratio_upper(lat["fast"], lat["floor"], 0.99)
    fast_low = mean_lower(windows["fast"])
    checks = {
        "fast p50 <= 4x floor": x50 <= 4.0, "fast p99 <= 10x floor": x99 <= 10.0,
        f"fast >= 1000 decisions/s @{c}": fast_low >= 1000.0,
        "rule p50 <= 1.1x fast": ratio_upper(lat["rule"], lat["fast"], 0.5) <= 1.1,
        "rule rate >= 0.9x fast": mean_lower(windows["rule"]) >= 0.9 * rates["fast"],
    }
    return checks, x50, x99, fast_low


def print_rows(args: argparse.Namespace, p: dict, rates: dict, judged: tuple) -> None:
    checks, x50, x99, fast_low = judged
    f50, f99 = p["floor"]
    print(f"\nDecision service over HTTP on 127.0.0.1 ({args.requests} requests per row at concurrency 1, "
          f"{args.seconds:.0f} s per throughput run at concurrency {args.concurrency}; req/s at concurrency "
          f"{args.concurrency}; {args.replicas} decision replica(s); RAY_SERVE_THROUGHPUT_OPTIMIZED="
          f"{os.environ.get('RAY_SERVE_THROUGHPUT_OPTIMIZED', '0')})\n")
    print(f"{'':<36} {'p50 ms':>9} {'p99 ms':>9} {'req/s':>9}  {'vs floor (p50, p99)':<30} target")

    def vs(k: str) -> str:
        return f"{p[k][0] / f50:.2f}x, {p[k][1] / f99:.2f}x"

    print(row("floor: uvicorn + FastAPI no-op", f50, f99, rates["floor"], "1.00x, 1.00x", "baseline"))
    for k, name in (("noop_proxy", "Serve no-op, default (proxy)"), ("noop_direct", "Serve no-op, direct ingress"),
                    ("fast_proxy", "fast policy via proxy"),
                    ("fast_serve_direct", "fast policy, Serve direct ingress")):
        print(row(name, *p[k], rates[k], vs(k), ""))
    print(row("fast policy, the one URL (chosen)", *p["fast"], rates["fast"], vs("fast"),
              ("ok" if x50 <= 4 and x99 <= 10 else "MISSED") + " (<=4x, <=10x)"))
    print(row("  95% upper bounds of the ratios", "", "", "", f"{x50:.2f}x, {x99:.2f}x", ""))
    print(row("  throughput, 95% lower bound", "", "", fast_low, f"{args.windows} windows",
              ("ok" if fast_low >= 1000 else "MISSED") + " (>= 1000/s)"))
    print(row("rule-decided, the one URL", *p["rule"], rates["rule"], vs("rule"),
              ("ok" if checks["rule p50 <= 1.1x fast"] and checks["rule rate >= 0.9x fast"] else "MISSED")
              + " (no slower than fast)"))


def llm_rows(args: argparse.Namespace, work: Path, port: int) -> None:
    """The LLM policy on CPU (reported, no target) and the KV prefix saving."""
    from serve.config import ServeConfig
    from serve.launcher import start_service
    from train.base_models import smollm2_dir

    base = smollm2_dir()
    llm_dir = args.llm_model or make_llm_model(work / "llm", base)
    llm_cfg = ServeConfig(model=str(llm_dir), port=port, app_name="bench-llm", route_prefix="/llm",
                          num_replicas=1, replica_num_cpus=0, registry_name="reg-bench-llm",
                          max_batch_size=8, batch_wait_timeout_s=0.02, runtime="cpu")
    llm = start_service(llm_cfg)
    target = {"llm": ("127.0.0.1", llm.direct_ports[-1] if llm.direct_ports else port, "/llm/v1/decide")}
    asyncio.run(latency(target, {"llm": model_body}, 3))
    llm_lat = asyncio.run(latency(target, {"llm": model_body}, args.llm_requests))["llm"]
    llm_rate, errors = asyncio.run(throughput(*target["llm"], model_body, 8, max(args.seconds, 8.0)))
    print(row("LLM policy, CPU (SmolLM2+LoRA)", pct(llm_lat, 0.5), pct(llm_lat, 0.99), llm_rate,
              "decisions/s at concurrency 8", "reported" + (f" ({errors} errors)" if errors else "")))
    kv = kv_prefix_saving(base, 1500, 200, reps=5)
    print(row("  forward, 1500+200 tokens", kv["full_ms"], "", "", "", ""))
    print(row("  forward, 200 on cached 1500", kv["cached_ms"], "", "",
              f"KV prefix saves {kv['full_ms'] / kv['cached_ms']:.1f}x",
              "same argmax" if kv["same_argmax"] else "ARGMAX DIFFERS"))


def run(args: argparse.Namespace) -> list[str]:
    """Every row, printed; returns the targets missed."""
    lo, hi = direct_ingress_range()
    work = Path(tempfile.mkdtemp(prefix="halo-bench-serve-"))
    port, floor_port = free_port(), free_port()
    floor = start_floor(floor_port)
    try:
        targets, serve_direct = start_decisions(args, work, port, lo, hi)
        targets["floor"] = ("127.0.0.1", floor_port, "/v1/decide")
        lat, windows, rates, errors = measure_rows(args, targets, serve_direct)
        p = {k: (pct(v, 0.5), pct(v, 0.99)) for k, v in lat.items()}
        judged = judge(lat, windows, rates, args.concurrency)
        print_rows(args, p, rates, judged)
        if not args.skip_llm:
            llm_rows(args, work, port)
        fails = ([f"throughput runs saw {errors} non-200 answers"] if errors else [])
        fails += [name for name, ok in judged[0].items() if not ok]
        print()
        print("all targets met" if not fails else "missed: " + "; ".join(fails))
        if args.json:
            print(json.dumps({"latency_ms": p, "floor_ms": list(p["floor"]), "rates": rates,
                              "fast_ratio_upper": [judged[1], judged[2]], "fast_rate_lower": judged[3],
                              "targets": judged[0], "missed": fails, "passed": not fails}, default=str))
        print("(ratios are against the floor measured in this run; absolute numbers depend on machine load)")
        return fails
    finally:
        floor.terminate()
        floor.wait(timeout=30)
        from ray import serve

        serve.shutdown()
        import ray

        ray.shutdown()


def main() -> int:
    args = parse_args()
    if args.plans:
        from benchmarks.serve_plans import main as plans_main

        return plans_main()
    return 0 if not run(args) else 1


if __name__ == "__main__":
    raise SystemExit(main())

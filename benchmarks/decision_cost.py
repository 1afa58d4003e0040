"""Bounded cost per decision, measured on one replica of a real Serve application (127.0.0.1):

    python benchmarks/decision_cost.py [--rounds 5] [--blocks 6] [--json]

1. Event-loop stall: while 0.5 MB states (benchmarks/heavy_states.py, new PDDL per request) are
   decided, the replica's event loop answers /healthz probes. Per round, the longest probe answer
   during the heavy decides minus the longest with no decide at all (the same round, so machine
   load lands on both). Target: the 95% upper bound of that difference's mean <= 100 ms.
2. Another key's tail: a light key's /v1/decide p99 while a hostile key (benchmarks/heavy_sender.py,
   its own process) sends such states as fast as its budget allows, against the light key's p99
   without it, the quiet and loud phases interleaved in blocks. Target: the 95% bootstrap upper
   bound of p99(loud) / p99(quiet) <= 2. The heavy key must also be both served and refused
   (its cost budget charges it, not the light key).
Exit 1 when a target is missed or cannot be computed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bounds import mean_upper, quantile, ratio_upper  # noqa: E402
from benchmarks.heavy_sender import wait_until_ready  # noqa: E402
from benchmarks.heavy_states import heavy_state  # noqa: E402
from benchmarks.serve import model_state, training_episodes  # noqa: E402

LIGHT_NAME, LIGHT_TOKEN = "light", "light-key-0123456789"
HEAVY_NAME, HEAVY_TOKEN = "heavy", "heavy-key-0123456789"


def worst_probe_while(url: str, work: Callable[[], None]) -> float:
    """The longest /healthz answer (same event loop as /v1/decide) while `work` runs."""
    gaps: list[float] = []
    done = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=30) as client:
            while not done.is_set():
                t0 = time.perf_counter()
                client.get(f"{url}/healthz")
                gaps.append(time.perf_counter() - t0)
                time.sleep(0.002)

    thread = threading.Thread(target=probe)
    thread.start()
    time.sleep(0.3)
    try:
        work()
    finally:
        done.set()
        thread.join()
    return max(gaps)


def stall_rounds(url: str, rounds: int) -> list[float]:
    """Per round: worst probe during five 0.5 MB decides minus worst probe while idle (seconds)."""
    base = heavy_state()
    headers = {"Authorization": f"Bearer {HEAVY_TOKEN}", "content-type": "application/json"}
    out = []
    with httpx.Client(timeout=60) as client:
        for r in range(rounds):
            bodies = [json.dumps({**base, "domain": base["domain"].replace("heavy", f"heavy-{r}-{i}")}).encode()
                      for i in range(5)]

            def decide_heavy(bodies: list[bytes] = bodies) -> None:
                for body in bodies:
                    answer = client.post(f"{url}/v1/decide", content=body, headers=headers)
                    if answer.status_code not in (200, 429):
                        raise RuntimeError(f"a 0.5 MB decide answered {answer.status_code}: {answer.text[:200]}")

            idle = worst_probe_while(url, lambda: time.sleep(1.0))
            out.append(worst_probe_while(url, decide_heavy) - idle)
            time.sleep(2.0)  # the heavy key's cost budget refills between rounds
    return out


def light_latencies(client: httpx.Client, url: str, n: int, offset: int) -> list[float]:
    headers = {"Authorization": f"Bearer {LIGHT_TOKEN}"}
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r = client.post(f"{url}/v1/decide", json=model_state(offset + i).to_dict(), headers=headers)
        out.append(time.perf_counter() - t0)
        if r.status_code != 200:
            raise RuntimeError(f"the light key was answered {r.status_code}: {r.text[:200]}")
        time.sleep(0.003)
    return out


def quiet_and_loud(url: str, blocks: int, work: Path) -> tuple[list[float], list[float], dict[str, int]]:
    flag, stop = work / "heavy-on", work / "stop"
    sender = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "heavy_sender.py"), url, HEAVY_TOKEN,
                               str(flag), str(stop)], stdout=subprocess.PIPE, text=True)
    quiet: list[float] = []
    loud: list[float] = []
    try:
        with httpx.Client(timeout=30) as client:
            light_latencies(client, url, 50, 0)  # warm-up
            wait_until_ready(flag)
            for block in range(blocks):  # interleaved, so machine noise lands on both phases alike
                quiet += light_latencies(client, url, 100, block * 100)
                flag.touch()
                time.sleep(0.5)
                loud += light_latencies(client, url, 100, block * 100)
                flag.unlink()
                time.sleep(0.3)
    finally:
        flag.unlink(missing_ok=True)
        stop.touch()
        out, _ = sender.communicate(timeout=120)
    return quiet, loud, json.loads(out.strip().splitlines()[-1])


def start(work: Path) -> object:
    from serve.config import ServeConfig
    from serve.launcher import start_service
    from serve.ports import free_port
    from train.fast_policy import train_fast_policy

    train_fast_policy(training_episodes(), work / "fast", name="bench-cost")
    cfg = ServeConfig(model=str(work / "fast"), port=free_port(), app_name="costly", route_prefix="/costly",
                      num_replicas=1, replica_num_cpus=0, registry_name="reg-costly",
                      api_keys=[f"{LIGHT_NAME}={LIGHT_TOKEN}", f"{HEAVY_NAME}={HEAVY_TOKEN}"],
                      max_body_bytes=1_048_576, max_inflight_per_client=4,
                      fast_port=free_port())
    return start_service(cfg, num_cpus=2)


def verdicts(stalls: list[float], quiet: list[float], loud: list[float], codes: dict[str, int]) -> dict[str, bool]:
    return {"event-loop stall: upper bound <= 100 ms": mean_upper(stalls) <= 0.100,
            "light key p99 loud/quiet: upper bound <= 2x": ratio_upper(loud, quiet, 0.99) <= 2.0,
            "heavy key served within its budget": codes.get("200", 0) >= 1,
            "heavy key refused past its budget": codes.get("429", 0) >= 1}


def report(stalls: list[float], quiet: list[float], loud: list[float], codes: dict[str, int],
           as_json: bool) -> int:
    checks = verdicts(stalls, quiet, loud, codes)
    q99, l99 = quantile(quiet, 0.99), quantile(loud, 0.99)
    print(f"event-loop stall beyond idle, per round: {', '.join(f'{s * 1000:.1f}' for s in stalls)} ms; "
          f"95% upper bound of the mean {mean_upper(stalls) * 1000:.1f} ms (target <= 100)")
    print(f"light key p99 {q99 * 1000:.2f} ms quiet, {l99 * 1000:.2f} ms loud: {l99 / q99:.2f}x, 95% upper bound "
          f"{ratio_upper(loud, quiet, 0.99):.2f}x (target <= 2x); heavy key answers {codes}")
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    missed = [name for name, ok in checks.items() if not ok]
    print("all targets met" if not missed else "missed: " + "; ".join(missed))
    if as_json:
        print(json.dumps({"stall_s": stalls, "quiet_p99_s": q99, "loud_p99_s": l99, "heavy_codes": codes,
                          "targets": checks, "passed": not missed}))
    return 1 if missed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="stall rounds (each: idle probe, five heavy decides)")
    parser.add_argument("--blocks", type=int, default=6, help="interleaved quiet/loud blocks of 100 light requests")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import ray
    from ray import serve

    work = Path(tempfile.mkdtemp(prefix="halo-bench-cost-"))
    try:
        url = start(work).direct_url  # type: ignore[attr-defined]
        stalls = stall_rounds(url, args.rounds)
        quiet, loud, codes = quiet_and_loud(url, args.blocks, work)
    finally:
        serve.shutdown()
        ray.shutdown()
    return report(stalls, quiet, loud, codes, args.json)


if __name__ == "__main__":
    raise SystemExit(main())

"""The rollout job in the LLM-latency-bound regime (run through `benchmarks/rollout.py`):

    python benchmarks/rollout.py --llm-bound [--llm-episodes 16000] [--quick]
    python benchmarks/rollout.py --budget [--budget-rpm 1200] [--budget-s 90] [--quick]
    python benchmarks/rollout.py --in-flight 5000 [--in-flight-latency-ms 60000] [--quick]
    python benchmarks/rollout.py --students 1000 [--in-flight-latency-ms 20000] [--quick]

A. llm-bound  episodes/s with real-time simulated latency (median 2.5 s, sigma 0.5, no budget) vs
              the CPU-bound default job, same tasks, same 2 workers on 2 CPUs (target >= 0.9x)
B. budget     4 workers against a local OpenAI-protocol server (its own process) that enforces a
              requests/min limit with 429s; every simulated call goes over HTTP through the real
              client. Sustained rate vs the limit (target >= 90%), 429 share (<= 2%), the server's
              peak concurrent requests vs --llm-concurrency (<=)
C. in-flight  one worker holding N episodes in flight (a long simulated latency): resident bytes
              per in-flight episode (target <= 100 KB) and driver CPU per dispatched episode at 100
              and at N in flight (must not grow with N). The job is stopped with SIGINT once all N
              have been in flight for a while (a long job would only repeat the same state).
D. students  one worker holding N episodes whose decisions go over HTTP to the served fast policy
              (`rules+student:URL`): all N in flight, the worker's open connections to the
              service at most the client's pool (64), model decisions answered
All outputs are simulated-world figures (llm_backend=sim).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cluster(cpus: int):  # noqa: ANN202
    from cluster.ray_cluster import start_or_join

    # Ray gives a new node a fixed 30 s to register; on a loaded shared machine that can fail.
    for attempt in range(3):
        try:
            handle = start_or_join(num_cpus=cpus)
            break
        except Exception:  # noqa: BLE001
            if attempt == 2:
                raise
            time.sleep(5)
    time.sleep(2)
    return handle


def _run(config: Any, sampler: Any = None) -> Any:
    from rollout.driver import RolloutJob

    job = RolloutJob(config)
    stop = threading.Event()
    thread = None
    if sampler is not None:
        thread = threading.Thread(target=sampler, args=(job, stop), daemon=True)
        thread.start()
    try:
        summary = job.run()
    finally:
        stop.set()
        if thread is not None:
            thread.join(5)
    return job, summary


# ---- A ------------------------------------------------------------------------------------------

def _row(name: str, work: str, job: Any, s: Any) -> tuple:
    from rollout.store import TrajectoryStore

    eps = TrajectoryStore(work).read_episodes([job.run_id])[:400]
    calls = sorted(st.latency_ms for ep in eps for st in ep.steps if st.llm_calls)
    per_episode = sorted(sum(st.latency_ms for st in ep.steps) for ep in eps)
    return (name, s, s.committed / s.run_s, calls[len(calls) // 2] if calls else 0.0,
            per_episode[len(per_episode) // 2] if per_episode else 0.0)


def llm_bound(args: argparse.Namespace) -> bool:
    from cluster.ray_cluster import shutdown
    from rollout.driver import RolloutConfig

    n = args.llm_episodes or (1000 if args.quick else 16_000)
    rows = []
    handle = _cluster(2)  # both jobs on one cluster: the ratio is not a cluster start-up's noise
    try:
        for name, llm in (("CPU-bound (sim, latency x0.001)", "sim"),
                          ("LLM-bound (sim:realtime=1, median 2.5 s)",
                           "sim:realtime=1,latency_ms=2500,latency_sigma=0.5")):
            work = tempfile.mkdtemp(prefix="halo-bench-llm-")
            config = RolloutConfig(store_url=work, tasks=args.tasks, llm=llm, episodes=n, replicas=2,
                                   run_id=f"bench-{len(rows)}", progress=False)
            job, s = _run(config)
            rows.append(_row(name, work, job, s))
            print(f"   done: {name}: {rows[-1][2]:.2f} episodes/s, max in flight {s.max_in_flight}", flush=True)
    finally:
        shutdown(handle)
    print(f"# A. LLM-bound vs CPU-bound: {n} episodes per job over {args.tasks}, 2 workers on 2 CPUs "
          f"(simulated world, llm_backend=sim)")
    print(f"{'job':44} {'episodes/s':>10} {'run s':>7} {'max in flight':>13} {'median LLM call':>15} "
          f"{'LLM wait per episode':>20}")
    for name, s, rate, call_ms, episode_ms in rows:
        print(f"{name:44} {rate:10.2f} {s.run_s:7.1f} {s.max_in_flight:13d} {call_ms / 1000:14.2f}s "
              f"{episode_ms / 1000:19.1f}s")
    ratio = rows[1][2] / rows[0][2]
    ok = ratio >= 0.9
    print(f"A. LLM-bound / CPU-bound = {ratio:.2f}x (target >= 0.9x): {'PASS' if ok else 'FAIL'}")
    return ok


# ---- B ------------------------------------------------------------------------------------------

def _start_server(rpm: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fake_openai.py"), "--rpm", str(rpm),
                             "--burst-s", "5"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise RuntimeError(f"the local OpenAI-protocol server did not start: {line!r}")
    return proc, line.split()[-1]


def _server_stats(base_url: str) -> dict[str, Any]:
    import httpx

    return httpx.get(base_url.rsplit("/v1", 1)[0] + "/stats", timeout=10).json()


def budget(args: argparse.Namespace) -> bool:
    from cluster.ray_cluster import shutdown
    from rollout.driver import RolloutConfig

    rpm, seconds, concurrency = args.budget_rpm, (40 if args.quick else args.budget_s), args.budget_concurrency
    proc, url = _start_server(rpm)
    samples: list[tuple[float, int, int]] = []  # (time, server requests, episodes left to dispatch or run)

    def sample(job: Any, stop: threading.Event) -> None:
        while not stop.wait(1.0):
            st = _server_stats(url)
            # episodes not yet dispatched: while there are some, the job wants all the budget gives
            samples.append((time.monotonic(), st["requests"], job.stats.remaining - job.stats.in_flight))

    # ~3.3 calls per episode: enough episodes to keep the budget busy for `seconds`
    episodes = int(rpm / 60 * seconds / 3) + 100
    work = tempfile.mkdtemp(prefix="halo-bench-budget-")
    handle = _cluster(4)
    try:
        config = RolloutConfig(store_url=work, tasks=args.tasks, episodes=episodes, replicas=4, progress=False,
                               llm=f"sim:realtime=1,latency_ms=2500,latency_sigma=0.5,base_url={url}",
                               llm_rpm=rpm, llm_concurrency=concurrency, run_id="bench-budget")
        _, s = _run(config, sample)
        final = _server_stats(url)
    finally:
        shutdown(handle)
        proc.terminate()
        proc.wait(10)
    # The steady part: from 10 s after the first request until no episode is left to dispatch
    # (then the drain: fewer calls are wanted than the budget allows).
    started = [x for x in samples if x[1] > 0]
    window = [x for x in started if x[0] >= started[0][0] + 10 and x[2] > 0] if started else []
    if len(window) >= 2:
        sustained = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]) * 60
    else:
        sustained = final["requests"] / max(1e-9, final["last_at"] - final["first_at"]) * 60
    share_429 = final["rate_limited"] / max(1, final["requests"] + final["rate_limited"])
    print(f"# B. budget: {episodes} episodes, 4 workers, every simulated call over HTTP to a local server "
          f"enforcing {rpm:.0f} requests/min; --llm-rpm {rpm:.0f} --llm-concurrency {concurrency}")
    span = window[-1][0] - window[0][0] if len(window) >= 2 else 0.0
    print(f"   sustained {sustained:,.0f} requests/min over {span:.0f} s "
          f"of steady state = {sustained / rpm:.0%} of the limit (target >= 90%)")
    print(f"   {final['rate_limited']} x 429 of {final['requests'] + final['rate_limited']} requests = "
          f"{share_429:.2%} (target <= 2%); server peak concurrent {final['max_in_flight']} "
          f"(limit {concurrency}); job {s.committed} episodes in {s.run_s:.0f} s, max in flight {s.max_in_flight}")
    ok_rate, ok_429, ok_conc = sustained >= 0.9 * rpm, share_429 <= 0.02, final["max_in_flight"] <= concurrency
    print(f"B. rate {'PASS' if ok_rate else 'FAIL'}, 429s {'PASS' if ok_429 else 'FAIL'}, "
          f"concurrency {'PASS' if ok_conc else 'FAIL'}")
    return ok_rate and ok_429 and ok_conc


# ---- C ------------------------------------------------------------------------------------------

def _hold(n: int, latency_ms: float, tasks: str, hold_s: float, *, policy: str = "rules+scripted",
          server_port: int = 0, cluster: bool = True) -> dict[str, float]:
    """One worker, a window of n, n episodes; SIGINT once all n have been in flight for hold_s.
    With `server_port`, also the peak of the worker's open connections to that port."""
    import psutil

    from cluster.ray_cluster import shutdown
    from rollout.driver import RolloutConfig

    me = psutil.Process()
    out: dict[str, float] = {}

    def sample(job: Any, stop: threading.Event) -> None:
        while not job.slots or not job.slots[0].pid:
            if stop.wait(0.2):
                return
        worker = psutil.Process(job.slots[0].pid)
        out["idle_rss"] = worker.memory_info().rss
        cpu0 = sum(me.cpu_times()[:2])
        t0 = time.monotonic()
        full_since = None
        while not stop.wait(0.5):
            held = int(job.slots[0].status.get("in_flight", 0))
            out["peak_in_flight"] = max(out.get("peak_in_flight", 0), held)
            out["peak_rss"] = max(out.get("peak_rss", 0), worker.memory_info().rss)
            if server_port:
                conns = [c for c in worker.net_connections(kind="tcp")
                         if c.raddr and c.raddr.port == server_port and c.status == psutil.CONN_ESTABLISHED]
                out["peak_connections"] = max(out.get("peak_connections", 0), len(conns))
            if held >= n and full_since is None:
                full_since = time.monotonic()
                out["fill_s"] = full_since - t0
            if full_since is not None and time.monotonic() - full_since >= hold_s:
                out["driver_cpu_s"] = sum(me.cpu_times()[:2]) - cpu0
                out["dispatched"] = n
                signal.raise_signal(signal.SIGINT)  # the job stops as on Ctrl-C
                return

    work = tempfile.mkdtemp(prefix="halo-bench-inflight-")
    handle = _cluster(1) if cluster else None
    try:
        config = RolloutConfig(store_url=work, tasks=tasks, episodes=n, replicas=1, progress=False, max_steps=2,
                               llm=f"sim:realtime=1,latency_ms={latency_ms:g},latency_sigma=0", policy=policy,
                               initial_window=n, max_window=n, backup_tail=False, run_id=f"bench-hold-{n}")
        with contextlib.suppress(KeyboardInterrupt):
            _run(config, sample)
    finally:
        if handle is not None:
            shutdown(handle)
    return out


# ---- D ------------------------------------------------------------------------------------------

def students(args: argparse.Namespace) -> bool:
    """N student episodes in flight in one worker, deciding through the served fast policy over
    HTTP (`rules+student:URL`, the replica's fast ingress): peak in flight, the worker's open
    connections to the service (the bounded pool), model decisions answered."""
    import importlib.util

    import httpx

    from cluster.ray_cluster import shutdown
    from serve.config import ServeConfig
    from serve.launcher import start_service, stop_service
    from train.fast_policy import train_fast_policy

    spec = importlib.util.spec_from_file_location("bench_serve", ROOT / "benchmarks" / "serve.py")
    bench_serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_serve)  # type: ignore[union-attr]
    n, pool = args.students, 64
    latency = args.in_flight_latency_ms or (10_000 if args.quick else 20_000)
    # Held past one simulated call, so the calls that all started together end together and the
    # episodes' next decisions arrive as one burst (the pool's worst case).
    hold_s = latency / 1000 * 1.5
    model = Path(tempfile.mkdtemp(prefix="halo-bench-students-")) / "fast"
    train_fast_policy(bench_serve.training_episodes(), model, name="bench-students")
    handle = _cluster(2)
    try:
        svc = start_service(ServeConfig(model=str(model), port=bench_serve.free_port(), app_name="students",
                                        replica_num_cpus=0, registry_name="reg-students",
                                        max_inflight_per_client=pool))
        port = svc.direct_ports[0]
        r = _hold(n, latency, args.tasks, hold_s, policy=f"rules+student:http://127.0.0.1:{port}",
                  server_port=port, cluster=False)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        stop_service(svc)
    finally:
        shutdown(handle)
    peak, conns = int(r.get("peak_in_flight", 0)), int(r.get("peak_connections", 0))
    decided = {by: sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                       if line.startswith("halo_serve_decisions_total{") and f'decided_by="{by}"' in line)
               for by in ("model", "rule")}
    print(f"# D. students: one worker, {n} episodes deciding through the served fast policy "
          f"(rules+student:URL on the fast ingress), simulated latency {latency / 1000:.0f} s per call")
    print(f"   peak in flight {peak}; the worker's open connections to the service: peak {conns} (pool {pool}); "
          f"the service answered {decided['model']:.0f} model and {decided['rule']:.0f} rule decisions")
    ok = peak >= n and 0 < conns <= pool and decided["model"] > 0
    print(f"D. {n} students in flight with a bounded pool: {'PASS' if ok else 'FAIL'}")
    return ok


def in_flight(args: argparse.Namespace) -> bool:
    n = args.in_flight
    latency = args.in_flight_latency_ms or (20_000 if args.quick else 60_000)
    hold_s = 5 if args.quick else 15
    small = _hold(100, latency, args.tasks, hold_s)
    big = _hold(n, latency, args.tasks, hold_s)
    print(f"# C. in flight: one worker (1 CPU), simulated latency {latency / 1000:.0f} s per call; "
          f"held for {hold_s} s once full")
    ok = True
    for label, r, count in (("100", small, 100), (str(n), big, n)):
        if "driver_cpu_s" not in r:
            print(f"   {label}: never reached {count} in flight (peak {r.get('peak_in_flight', 0):.0f})")
            ok = False
            continue
        per_ep_kb = (r["peak_rss"] - r["idle_rss"]) / count / 1024
        print(f"   {label:>5} in flight: filled in {r['fill_s']:.1f} s; resident {per_ep_kb:,.1f} KB per in-flight "
              f"episode ({(r['peak_rss'] - r['idle_rss']) / 2**20:,.0f} MB over the idle worker's "
              f"{r['idle_rss'] / 2**20:,.0f} MB); driver CPU {r['driver_cpu_s'] / count * 1000:.2f} ms per "
              f"dispatched episode")
    if ok:
        kb = (big["peak_rss"] - big["idle_rss"]) / n / 1024
        per_small = small["driver_cpu_s"] / 100
        per_big = big["driver_cpu_s"] / n
        ok_mem, ok_cpu = kb <= 100, per_big <= per_small * 1.1
        print(f"C. {n} in flight: {'PASS' if big['peak_in_flight'] >= n else 'FAIL'}; bytes/episode "
              f"{'PASS' if ok_mem else 'FAIL'} ({kb:.1f} KB <= 100 KB); driver CPU/episode "
              f"{'PASS' if ok_cpu else 'FAIL'} ({per_big * 1000:.2f} ms at {n} vs {per_small * 1000:.2f} ms at 100)")
        ok = ok_mem and ok_cpu and big["peak_in_flight"] >= n
    return ok


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("LLM-latency-bound regime (benchmarks/rollout_regimes.py)")
    g.add_argument("--llm-bound", action="store_true", help="A: real-time simulated latency vs CPU-bound")
    g.add_argument("--llm-episodes", type=int, default=None,
                   help="A: episodes per job (default 16000, 20-30 min; --quick 1000)")
    g.add_argument("--budget", action="store_true", help="B: the job-wide budget against a rate-limited server")
    g.add_argument("--budget-rpm", type=float, default=1200.0)
    g.add_argument("--budget-concurrency", type=int, default=96,
                   help="B: at least rpm/60 x mean latency (1,200 rpm x ~3.2 s mean = 64) plus headroom")
    g.add_argument("--budget-s", type=float, default=90.0, help="B: about how long the budget is kept busy")
    g.add_argument("--in-flight", type=int, default=0, metavar="N", help="C: hold N episodes in one worker")
    g.add_argument("--in-flight-latency-ms", type=float, default=None)
    g.add_argument("--students", type=int, default=0, metavar="N",
                   help="D: hold N student episodes (rules+student:URL against the served policy) in one worker")
    g.add_argument("--quick", action="store_true", help="smaller runs (a few minutes)")


def run(args: argparse.Namespace) -> bool:
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ok = True
    if args.llm_bound:
        ok &= llm_bound(args)
    if args.budget:
        ok &= budget(args)
    if args.in_flight:
        ok &= in_flight(args)
    if args.students:
        ok &= students(args)
    return ok

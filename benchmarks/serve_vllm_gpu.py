"""vLLM runtime benchmark for a GPU node (one short prepared script; needs `halo-cluster[gpu]`).

    python benchmarks/serve_vllm_gpu.py --model DIR [--cpu-check 8] [--requests 200]

DIR is an LLM policy artifact (manifest.json, tokenizer, adapter/) whose manifest names an
8B-class base model directory (extra.base_model_path or base_model). Prints p50/p99 of one
decision at concurrency 1, decisions/s for batches of 16, and whether the vLLM answers equal the
CPU runtime's (transformers + LoRA) on the first --cpu-check states (0 skips the check).
Not yet run here: the development machines have no GPU.
"""

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def states(n: int) -> list:
    """The same decision states as benchmarks/serve.py."""
    spec = importlib.util.spec_from_file_location("halo_bench_serve", HERE / "serve.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return [module.model_state(i) for i in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--cpu-check", type=int, default=8)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    args = parser.parse_args()

    if importlib.util.find_spec("vllm") is None:
        print("vllm is not installed: run this on a GPU node with `pip install 'halo-cluster[gpu]'`", file=sys.stderr)
        return 2
    from serve.vllm_runtime import VLLMPolicy
    from train.manifest import Manifest

    manifest = Manifest.load(args.model)
    t0 = time.perf_counter()
    policy = VLLMPolicy(args.model, manifest, gpu_memory_utilization=args.gpu_memory_utilization)
    load_s = time.perf_counter() - t0
    pool = states(max(args.requests, args.batch * 8))
    policy.decide_batch(pool[:4])  # warm-up (CUDA graphs, prefix cache)
    single = []
    for s in pool[: args.requests]:
        t = time.perf_counter()
        policy.decide_batch([s])
        single.append((time.perf_counter() - t) * 1000)
    single.sort()
    t = time.perf_counter()
    n = 0
    for i in range(0, len(pool) - args.batch + 1, args.batch):
        policy.decide_batch(pool[i: i + args.batch])
        n += args.batch
    rate = n / (time.perf_counter() - t)
    print(f"vLLM {manifest.name} {manifest.version} on {manifest.extra.get('base_model_path') or manifest.base_model}"
          f" (load {load_s:.1f}s)")
    print(f"concurrency 1: p50 {statistics.median(single):.2f} ms  p99 {single[int(0.99 * (len(single) - 1))]:.2f} ms")
    print(f"batches of {args.batch}: {rate:.1f} decisions/s")
    if args.cpu_check:
        from train.policies import load_policy

        gpu = [d.agent_id for d in policy.decide_batch(pool[: args.cpu_check])]
        del policy
        cpu_policy = load_policy(args.model, device="cpu")
        cpu = [cpu_policy.decide(s).agent_id for s in pool[: args.cpu_check]]
        same = sum(a == b for a, b in zip(gpu, cpu, strict=True))
        print(f"same answer as the CPU runtime on {same}/{len(cpu)} states"
              + ("" if same == len(cpu) else f"  (vLLM {gpu} vs CPU {cpu}; bf16 vs fp32 near-ties)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

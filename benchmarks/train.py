"""Training benchmarks, each measured against its baseline in the same run.

1. Label-only logits vs full-sequence logits: one LoRA training step (forward, backward,
   optimizer; gradient checkpointing on, as in training) of SmolLM2-135M at sequence length
   2048. The baseline is the usual SFT path: label token appended, every other position masked
   with -100, logits and shifted loss over the whole sequence by the model. Each variant runs in a fresh process so
   peak memory is its own. Targets: label-only >= 1.3x faster per step, <= 0.75x peak memory.
   Peak memory: torch.cuda.max_memory_allocated on CUDA; on CPU the resident-set high-water
   mark sampled during the steps, minus the resident set before them (glibc is told to mmap
   every large block, so freed activations leave the resident set and it tracks live memory).
   That allocator setting costs page faults on every large allocation, so on CPU the step time
   is measured in separate processes with the default allocator, as training runs.
2. 1 vs 2 Ray Train workers on the same global batch (tiny Llama model, dropout off, same
   seed): per-step training losses must agree within a tolerance.

    python benchmarks/train.py                 # both parts
    python benchmarks/train.py --part logits --seq-len 2048 --steps 3
    python benchmarks/train.py --part workers --steps 6
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _step_worker(queue: mp.Queue, model_dir: str, seq_len: int, batch: int, label_only: bool, steps: int,
                 threads: int, device: str, checkpointing: bool, lora_dropout: float = 0.05) -> None:
    import psutil
    import torch

    from train.base_models import load_tokenizer
    from train.labels import choose_label_set
    from train.sft import Batch, build_model, full_sequence_loss, label_loss, last_position_logits

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    tok = load_tokenizer(model_dir)
    labels = choose_label_set(tok)
    model = build_model(model_dir, label_token_ids=list(labels.token_ids), vocab_size=len(tok), qlora=False,
                        lora_r=16, lora_alpha=32, lora_dropout=lora_dropout, lm_head="labels", device=device,
                        gradient_checkpointing=checkpointing)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
    ids = torch.randint(100, 40000, (batch, seq_len), device=device)
    mask = torch.ones_like(ids)
    pos = torch.arange(seq_len, device=device).expand(batch, -1)
    target = torch.tensor([labels.token_ids[i % 21] for i in range(batch)], device=device)
    b = Batch(ids, mask, pos, target, torch.zeros(batch, dtype=torch.long))

    def one_step() -> None:
        loss = label_loss(last_position_logits(model, b), b) if label_only else full_sequence_loss(model, b)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    one_step()  # warm-up: allocator pools, optimizer state, kernels
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        cuda_base = torch.cuda.memory_allocated()
    sampler.start()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        one_step()
        times.append(time.perf_counter() - t0)
    stop.set()
    sampler.join()
    if device.startswith("cuda"):
        peak_mb = (torch.cuda.max_memory_allocated() - cuda_base) / 2**20
    else:
        peak_mb = (peak[0] - base) / 2**20
    queue.put({"label_only": label_only, "step_s": sorted(times)[len(times) // 2], "all_step_s": times,
               "peak_step_mb": peak_mb})


# Large blocks via mmap and returned on free: RSS then follows live tensors, not the heap's past.
MEMORY_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def _run_step_worker(model_dir: str, seq_len: int, batch: int, label_only: bool, steps: int, threads: int,
                     device: str, checkpointing: bool, env: dict[str, str], lora_dropout: float = 0.05) -> dict:
    """One variant in a fresh (spawned) process with `env` added to its environment."""
    ctx = mp.get_context("spawn")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        q: mp.Queue = ctx.Queue()
        p = ctx.Process(target=_step_worker, args=(q, model_dir, seq_len, batch, label_only, steps, threads, device,
                                                   checkpointing, lora_dropout))
        p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    res = q.get()
    p.join()
    return res


def bench_logits(model_dir: str, seq_len: int, batch: int, steps: int, threads: int, device: str,
                 checkpointing: bool = True, lora_dropout: float = 0.05) -> dict:
    results = {}
    for label_only in (False, True):
        args = (model_dir, seq_len, batch, label_only)
        res = _run_step_worker(*args, steps, threads, device, checkpointing, {}, lora_dropout)
        if not device.startswith("cuda"):  # CUDA measures its peak in the timed run itself
            mem = _run_step_worker(*args, 1, threads, device, checkpointing, MEMORY_ALLOCATOR_ENV, lora_dropout)
            res["peak_step_mb"] = mem["peak_step_mb"]
            res["step_s_mmap_allocator"] = mem["step_s"]
        results["label_only" if label_only else "full_sequence"] = res
    full, lab = results["full_sequence"], results["label_only"]
    results["speedup"] = full["step_s"] / lab["step_s"]
    results["memory_ratio"] = lab["peak_step_mb"] / max(full["peak_step_mb"], 1e-9)
    return results


def bench_workers(steps: int, tolerance: float) -> dict:
    import ray

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "train"))
    from synthetic import synthetic_episodes

    from train.base_models import make_tiny_model, smollm2_dir
    from train.dataset import BuildConfig, build_dataset
    from train.trainer import TrainConfig, train_llm

    tmp = Path(tempfile.mkdtemp(prefix="halo-bench-train-"))
    tiny = make_tiny_model(tmp / "tiny", smollm2_dir())
    build_dataset(synthetic_episodes(n_tasks=16, seed=5), tmp / "data",
                  BuildConfig(augment_copies=0, tokenizer_dir=str(smollm2_dir())))
    curves = {}
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # Same global batch of 4: 1 worker x batch 2 x accumulation 2, or 2 workers x 1 x 2.
        for workers, batch in ((1, 2), (2, 1)):
            cfg = TrainConfig(data_dir=str(tmp / "data"), base_model=str(tiny), out=str(tmp / f"w{workers}"),
                              workers=workers, batch_size=batch, grad_accum=2, max_steps=steps, warmup_steps=1,
                              lr=5e-3, lora_dropout=0.0, max_length=256, threads_per_worker=1, resume=False,
                              max_train_examples=4 * steps, max_val_examples=8)
            t0 = time.perf_counter()
            train_llm(cfg)
            hist = json.loads((tmp / f"w{workers}" / "history.json").read_text())
            curves[workers] = {"loss": [s["loss"] for s in hist["steps"]], "wall_s": time.perf_counter() - t0}
    finally:
        ray.shutdown()
    diffs = [abs(a - b) for a, b in zip(curves[1]["loss"], curves[2]["loss"], strict=True)]
    return {"curves": curves, "max_abs_diff": max(diffs), "tolerance": tolerance,
            "same_curve": max(diffs) <= tolerance * max(1.0, max(curves[1]["loss"]))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("all", "logits", "workers"), default="all")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--model", default="smollm2", help="model directory or 'smollm2'")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--no-checkpointing", action="store_true", help="measure without gradient checkpointing")
    ap.add_argument("--lora-dropout", type=float, default=0.05,
                    help="LoRA dropout (the recipe's 0.05; on CPU its random masks cost about a quarter of a step)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    import torch

    from train.base_models import resolve_base_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    out: dict = {"device": device}
    ok = True
    if args.part in ("all", "logits"):
        r = bench_logits(str(resolve_base_model(args.model)), args.seq_len, args.batch, args.steps, args.threads,
                         device, checkpointing=not args.no_checkpointing, lora_dropout=args.lora_dropout)
        out["logits"] = r
        f, lab = r["full_sequence"], r["label_only"]
        print(f"[logits] seq_len {args.seq_len} batch {args.batch} device {device} "
              f"gradient checkpointing {'off' if args.no_checkpointing else 'on'}, LoRA dropout {args.lora_dropout:g}")
        print(f"  full-sequence logits: {f['step_s']:.3f} s/step, peak step memory {f['peak_step_mb']:.0f} MiB")
        print(f"  label-only logits:    {lab['step_s']:.3f} s/step, peak step memory {lab['peak_step_mb']:.0f} MiB")
        speed_ok, mem_ok = r["speedup"] >= 1.3, r["memory_ratio"] <= 0.75
        print(f"  speed-up {r['speedup']:.2f}x (target >= 1.3x: {'PASS' if speed_ok else 'FAIL'}); "
              f"memory ratio {r['memory_ratio']:.2f} (target <= 0.75: {'PASS' if mem_ok else 'FAIL'})")
        ok &= speed_ok and mem_ok
    if args.part in ("all", "workers"):
        r = bench_workers(args.steps * 2, args.tolerance)
        out["workers"] = r
        print("[workers] same global batch (4), tiny Llama, dropout off")
        for w, c in r["curves"].items():
            print(f"  {w} worker(s): loss {' '.join(f'{x:.5f}' for x in c['loss'])}  ({c['wall_s']:.0f} s)")
        print(f"  max |difference| {r['max_abs_diff']:.2e} (tolerance {args.tolerance:g}: "
              f"{'PASS' if r['same_curve'] else 'FAIL'})")
        ok &= r["same_curve"]
    if args.json:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

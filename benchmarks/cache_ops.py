"""Benchmark of the KV-cache ops (torch.ops.stableops_cache_ops).

GPU (bench_util's method: N calls captured in one CUDA graph, median replay
time / N, inputs rotated so a call does not find them in L2; the device copy
bandwidth measured in the same run is the ceiling):
  * reshape_and_cache_flash, T tokens of [H_kv, D] keys and values into a
    [num_blocks, block_size, H_kv, D] cache ("auto" and FP8), against the same
    math in PyTorch (index_copy_ into the flattened cache; FP8: float32
    division, clamp, conversion), eager and torch.compile(fullgraph=True);
  * concat_and_cache_mla, [T, L] + [T, R] into [num_blocks, block_size, L+R];
  * swap_blocks with 2 MiB blocks: GPU -> GPU against the device copy
    bandwidth, pinned CPU <-> GPU against a plain pinned tensor.copy_ of the
    same bytes.
Bytes moved = sources read + cache written (+ the slot indices).

CPU (--cpu, on by default; median wall time): the CPU kernels against the
eager composition of torch ops at T = 4096 tokens of 4096 values
(reshape_and_cache_flash with H_kv x D = 32 x 128; concat_and_cache_mla with
L + R = 3584 + 512), float32 / float16 / bfloat16, "auto" and FP8.

Run: ./tools/bazel run //benchmarks:cache_ops -- [--json=PATH] [--nogpu] [--nocpu]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from absl import app, flags

from bench_util import copy_bandwidth_gbs, cpu_time_ms, fmt, graph_time_us, plan, to_fp8

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_bool("gpu", True, "Run the GPU benchmarks (when a GPU is visible).")
flags.DEFINE_bool("cpu", True, "Run the CPU benchmarks (CPU kernel vs eager torch ops).")
flags.DEFINE_list("tokens", ["1", "256", "4096", "16384"], "GPU token counts T.")
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "GPU source dtypes.")
flags.DEFINE_list("cpu_dtypes", ["fp32", "fp16", "bf16"], "CPU source dtypes.")
flags.DEFINE_integer("heads", 8, "H_kv of reshape_and_cache_flash (GPU).")
flags.DEFINE_integer("head_size", 128, "D of reshape_and_cache_flash (GPU).")
flags.DEFINE_integer("block_size", 16, "Cache block size.")
flags.DEFINE_integer("lora", 512, "L of concat_and_cache_mla (GPU).")
flags.DEFINE_integer("rope", 64, "R of concat_and_cache_mla (GPU).")
flags.DEFINE_integer("swap_blocks", 64, "Pairs per swap_blocks call (2 MiB blocks).")
flags.DEFINE_integer("replays", 25, "Graph replays per measurement (median).")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
MODES = ("auto", "fp8")


# ---------------------------------------------------------------------------
# The same math in PyTorch ops (all slots valid: no data-dependent shapes, so
# it captures into a CUDA graph and compiles with fullgraph=True).
# ---------------------------------------------------------------------------
def _encode(x: torch.Tensor, fp8: bool, scale: torch.Tensor) -> torch.Tensor:
    if not fp8:
        return x
    return to_fp8(x.float() / scale).view(torch.uint8)


def torch_flash(key, value, kc, vc, slots, fp8, ks, vs):
    n = slots.shape[0]
    h, d = key.shape[1], key.shape[2]
    kc.view(-1, h, d).index_copy_(0, slots, _encode(key[:n], fp8, ks))
    vc.view(-1, h, d).index_copy_(0, slots, _encode(value[:n], fp8, vs))


def torch_mla(kv_c, k_pe, cache, slots, fp8, scale):
    n = slots.shape[0]
    cache.view(-1, cache.shape[-1]).index_copy_(0, slots, _encode(torch.cat([kv_c[:n], k_pe[:n]], dim=1), fp8, scale))


def ours_flash(key, value, kc, vc, slots, fp8, ks, vs):
    torch.ops.stableops_cache_ops.reshape_and_cache_flash.default(key, value, kc, vc, slots, "fp8" if fp8 else "auto", ks, vs)


def ours_mla(kv_c, k_pe, cache, slots, fp8, scale):
    torch.ops.stableops_cache_ops.concat_and_cache_mla.default(kv_c, k_pe, cache, slots, "fp8" if fp8 else "auto", scale)


def flash_set(t: int, h: int, d: int, bs: int, dtype: torch.dtype, fp8: bool, device: str) -> tuple[Any, ...]:
    nb = -(-t // bs) + 1
    cache_dtype = torch.uint8 if fp8 else dtype
    key = torch.randn(t, h, d, device=device).to(dtype)
    value = torch.randn(t, h, d, device=device).to(dtype)
    kc = torch.zeros(nb, bs, h, d, device=device, dtype=cache_dtype)
    vc = torch.zeros_like(kc)
    slots = torch.randperm(nb * bs, device=device)[:t]
    s = torch.tensor([0.5], device=device)
    return (key, value, kc, vc, slots, fp8, s, s)


def mla_set(t: int, lora: int, rope: int, bs: int, dtype: torch.dtype, fp8: bool, device: str) -> tuple[Any, ...]:
    nb = -(-t // bs) + 1
    kv_c = torch.randn(t, lora, device=device).to(dtype)
    k_pe = torch.randn(t, rope, device=device).to(dtype)
    cache = torch.zeros(nb, bs, lora + rope, device=device, dtype=torch.uint8 if fp8 else dtype)
    slots = torch.randperm(nb * bs, device=device)[:t]
    return (kv_c, k_pe, cache, slots, fp8, torch.tensor([0.5], device=device))


def _check(ours: Callable[..., None], ref: Callable[..., None], args: tuple[Any, ...], outs: tuple[int, ...]) -> None:
    """Our result equals the PyTorch composition's, bit for bit."""
    a = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
    b = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
    ours(*a)
    ref(*b)
    for i in outs:
        assert torch.equal(a[i].view(torch.uint8), b[i].view(torch.uint8)), f"result differs from the torch composition (arg {i})"


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------
def gpu_writes(copy_gbs: float) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    compiled = {
        "flash": None if FLAGS.skip_compile else torch.compile(torch_flash, fullgraph=True),
        "mla": None if FLAGS.skip_compile else torch.compile(torch_mla, fullgraph=True),
    }
    header = (
        f"{'op':>6} {'T':>6} {'dtype':>5} {'cache':>5} {'MB':>8} {'ours us':>9} {'eager us':>9} "
        f"{'compile us':>10} {'GB/s':>7} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    h, d, bs = FLAGS.heads, FLAGS.head_size, FLAGS.block_size
    for op in ("flash", "mla"):
        for dname in FLAGS.dtypes:
            dtype = DTYPES[dname]
            es = dtype.itemsize
            for mode in MODES:
                fp8 = mode == "fp8"
                ce = 1 if fp8 else es
                for t in (int(v) for v in FLAGS.tokens):
                    width = 2 * h * d if op == "flash" else FLAGS.lora + FLAGS.rope
                    nbytes = t * width * (es + ce) + 8 * t
                    n_sets, n_calls = plan(nbytes)
                    if op == "flash":
                        sets = [flash_set(t, h, d, bs, dtype, fp8, "cuda") for _ in range(n_sets)]
                        ours, ref, outs = ours_flash, torch_flash, (2, 3)
                    else:
                        sets = [mla_set(t, FLAGS.lora, FLAGS.rope, bs, dtype, fp8, "cuda") for _ in range(n_sets)]
                        ours, ref, outs = ours_mla, torch_mla, (2,)
                    _check(ours, ref, sets[0], outs)
                    t_ours = graph_time_us(ours, sets, n_calls, FLAGS.replays)
                    t_eager = graph_time_us(ref, sets, n_calls, FLAGS.replays)
                    comp = compiled[op]
                    t_comp = graph_time_us(comp, sets, n_calls, FLAGS.replays) if comp is not None else None
                    gbs = nbytes / (t_ours * 1e-6) / 1e9
                    row = dict(op=op, T=t, dtype=dname, cache=mode, bytes=nbytes, ours_us=t_ours, eager_us=t_eager,
                               compile_us=t_comp, ours_gbs=gbs, pct_copy=100 * gbs / copy_gbs,
                               speedup_vs_compile=(t_comp / t_ours) if t_comp else None)
                    rows.append(row)
                    print(
                        f"{op:>6} {t:>6} {dname:>5} {mode:>5} {nbytes / 1e6:>8.2f} {fmt(t_ours, 9, 2)} {fmt(t_eager, 9, 2)} "
                        f"{fmt(t_comp, 10, 2)} {gbs:>7.0f} {100 * gbs / copy_gbs:>5.1f}% {fmt(row['speedup_vs_compile'], 9, 2)}x",
                        flush=True,
                    )
                    del sets
                    torch.cuda.empty_cache()
    return rows


def gpu_swap(copy_gbs: float) -> list[dict[str, Any]]:
    n, block = FLAGS.swap_blocks, 2 << 20
    w = block // 2
    rows: list[dict[str, Any]] = []
    mapping = torch.stack([torch.arange(n), torch.randperm(n)], dim=1)
    gpu_a = torch.randn(n, w, device="cuda", dtype=torch.float16)
    gpu_b = torch.empty_like(gpu_a)
    host = torch.empty(n, w, dtype=torch.float16).pin_memory()
    # The pinned-copy ceiling: one plain copy of the same bytes, each way.
    pinned = {
        "h2d": graph_time_us(lambda: gpu_b.copy_(host, non_blocking=True), [()], 3, FLAGS.replays),
        "d2h": graph_time_us(lambda: host.copy_(gpu_a, non_blocking=True), [()], 3, FLAGS.replays),
    }
    print(f"\nswap_blocks: {n} pairs of 2 MiB blocks")
    print(f"{'direction':>9} {'ours us':>9} {'GB/s':>7} {'ceiling GB/s':>12} {'% ceiling':>9}")
    cases = {
        "d2d": (gpu_a, gpu_b, 2 * n * block, copy_gbs),
        "h2d": (host, gpu_b, n * block, n * block / (pinned["h2d"] * 1e-6) / 1e9),
        "d2h": (gpu_a, host, n * block, n * block / (pinned["d2h"] * 1e-6) / 1e9),
    }
    for name, (src, dst, nbytes, ceiling) in cases.items():
        us = graph_time_us(lambda s=src, d=dst: torch.ops.stableops_cache_ops.swap_blocks.default(s, d, block, mapping),
                           [()], 3, FLAGS.replays)
        gbs = nbytes / (us * 1e-6) / 1e9
        rows.append(dict(op="swap_blocks", direction=name, pairs=n, block_bytes=block, ours_us=us, ours_gbs=gbs,
                         ceiling_gbs=ceiling, pct_ceiling=100 * gbs / ceiling))
        print(f"{name:>9} {us:>9.1f} {gbs:>7.0f} {ceiling:>12.0f} {100 * gbs / ceiling:>8.1f}%", flush=True)
    return rows


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------
def cpu_rows() -> list[dict[str, Any]]:
    import stableops  # noqa: F401

    rows: list[dict[str, Any]] = []
    t = 4096
    print(f"\nCPU ({torch.get_num_threads()} threads): T = {t} tokens of 4096 values, median wall time")
    print(f"{'op':>6} {'dtype':>5} {'cache':>5} {'ours ms':>9} {'eager ms':>9} {'speedup':>8}")
    for op in ("flash", "mla"):
        for dname in FLAGS.cpu_dtypes:
            for mode in MODES:
                fp8 = mode == "fp8"
                if op == "flash":
                    args = flash_set(t, 32, 128, 16, DTYPES[dname], fp8, "cpu")
                    ours, ref, outs = ours_flash, torch_flash, (2, 3)
                else:
                    args = mla_set(t, 3584, 512, 16, DTYPES[dname], fp8, "cpu")
                    ours, ref, outs = ours_mla, torch_mla, (2,)
                _check(ours, ref, args, outs)
                t_ours = cpu_time_ms(lambda: ours(*args))
                t_eager = cpu_time_ms(lambda: ref(*args))
                rows.append(dict(op=op, device="cpu", T=t, dtype=dname, cache=mode, ours_ms=t_ours, eager_ms=t_eager,
                                 speedup_vs_eager=t_eager / t_ours))
                print(f"{op:>6} {dname:>5} {mode:>5} {t_ours:>9.2f} {t_eager:>9.2f} {t_eager / t_ours:>7.2f}x", flush=True)
    return rows


def main(argv: list[str]) -> int:
    del argv
    import stableops  # noqa: F401  (loads the library)

    result: dict[str, Any] = {"rows": []}
    if FLAGS.gpu and torch.cuda.is_available():
        torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
        print(f"device: {props.name}; device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")
        result.update(device=props.name, copy_gbs=copy_gbs)
        writes = gpu_writes(copy_gbs)
        result["rows"] += writes + gpu_swap(copy_gbs)
        big = [r for r in writes if r["bytes"] >= 100e6]
        if big:
            print(f"\nmin % of copy bandwidth at >= 100 MB: {min(r['pct_copy'] for r in big):.1f}%")
        t1 = [r["ours_us"] for r in writes if r["T"] == 1]
        if t1:
            print(f"max time at T=1: {max(t1):.2f} us")
        comp = [r["speedup_vs_compile"] for r in writes if r["speedup_vs_compile"]]
        if comp:
            print(f"min speedup vs torch.compile: {min(comp):.2f}x")
    elif FLAGS.gpu:
        print("no CUDA GPU visible: skipping the GPU benchmarks")
    if FLAGS.cpu:
        result["rows"] += cpu_rows()
    result.update(torch=torch.__version__)
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

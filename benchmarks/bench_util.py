"""Timing helpers shared by the benchmarks (the method of docs/PERFORMANCE.md).

GPU: N back-to-back calls are captured in one CUDA graph, the graph is
replayed between CUDA events, and the median replay time divided by N is the
time per call: no Python or dispatcher overhead, so small shapes show kernel
(+launch) latency only. The ceiling is the device-to-device copy bandwidth
measured in the same run. CPU: the median of repeated wall-clock timings.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

# The FP8 format every benchmark's reference rounds to: OCP e4m3fn, what
# CUDA and gfx950 compute (gfx942's e4m3fnuz has no benchmark: no AMD GPU).
FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max


def to_fp8(v: torch.Tensor) -> torch.Tensor:
    """fp8(clamp(v, -FP8_MAX, FP8_MAX)): the rounding of every stableops op
    with an FP8 result or cache (already-scaled float32 values in)."""
    return v.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def graph_time_us(fn: Callable[..., Any], arg_sets: Sequence[tuple[Any, ...]], n_calls: int, replays: int) -> float:
    """Median time per call (us) of `n_calls` calls captured in one CUDA graph,
    rotating through `arg_sets` (so a call does not find its inputs in L2)."""
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(cur)
    with torch.cuda.stream(side):  # warm-up (compiles, allocator) off-capture
        for i in range(min(3, len(arg_sets)) or 1):
            fn(*arg_sets[i % len(arg_sets)])
    cur.wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n_calls):
            fn(*arg_sets[i % len(arg_sets)])
    graph.replay()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times) * 1e3 / n_calls


def copy_bandwidth_gbs(replays: int) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second.

    The best of a memcpy (Tensor.copy_ of contiguous tensors) and an
    elementwise copy kernel, each over 2 GiB replayed from a CUDA graph: the
    fastest way this GPU moves bytes through PyTorch, our ceiling.
    """
    nbytes = 2 << 30
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1)
    best_us = min(
        graph_time_us(lambda: dst.copy_(src), [()], 5, replays),
        graph_time_us(lambda: torch.neg(src, out=dst), [()], 5, replays),
    )
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / (best_us * 1e-6) / 1e9


def plan(nbytes: float, rotate_bytes: float = 256e6, max_sets: int = 32) -> tuple[int, int]:
    """(input sets to rotate, calls per graph) for a call moving `nbytes`:
    sets together exceed the L2 several times over (capped at a few GB), and a
    graph holds enough calls to run well past launch overhead."""
    n_sets = max(1, min(max_sets, -(-int(rotate_bytes) // max(1, int(nbytes)))))
    n_sets = max(1, min(n_sets, int(8e9 // max(1, nbytes))))
    n_calls = max(5, min(200, int(2e9 / max(1, nbytes))))
    return n_sets, max(n_calls, n_sets)


def cpu_time_ms(fn: Callable[[], Any], repeats: int = 7, min_time_s: float = 0.2) -> float:
    """Median wall time (ms) of `fn()` on the CPU, each sample at least
    `min_time_s` long (several calls averaged)."""
    fn()  # warm-up
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time_s or n >= 1 << 20:
            break
        n *= 2
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples) * 1e3


def fmt(v: float | None, width: int, prec: int = 1) -> str:
    return f"{v:>{width}.{prec}f}" if v is not None else f"{'-':>{width}}"


def gpu_result(
    nbytes: float, copy_gbs: float, ours_us: float, eager_us: float | None, compile_us: float | None
) -> dict[str, Any]:
    """The derived columns of a GPU result row: our bandwidth, its share of
    the copy bandwidth, and the speedups over eager and torch.compile."""
    gbs = nbytes / (ours_us * 1e-6) / 1e9
    return dict(
        bytes=nbytes, ours_us=ours_us, eager_us=eager_us, compile_us=compile_us,
        ours_gbs=gbs, pct_copy=100 * gbs / copy_gbs,
        speedup_vs_compile=(compile_us / ours_us) if compile_us else None,
        speedup_vs_eager=(eager_us / ours_us) if eager_us else None,
    )  # fmt: skip


def print_gpu_summary(rows: Sequence[dict[str, Any]]) -> None:
    """The targets of docs/PERFORMANCE.md over rows of gpu_result() (with a
    "T" key): % of copy bandwidth at >= 100 MB, time at T=1, speedup over
    torch.compile."""
def print_summary(rows: Sequence[dict[str, Any]]) -> None:
    """The acceptance figures of a GPU table: the lowest % of copy bandwidth at
    >= 100 MB moved, the slowest call at one token, the lowest speedup over
    torch.compile (rows with keys bytes, pct_copy, T, ours_us and
    speedup_vs_compile)."""
    big = [r for r in rows if r["bytes"] >= 100e6]
    if big:
        print(f"\nmin % of copy bandwidth at >= 100 MB: {min(r['pct_copy'] for r in big):.1f}%")
    t1 = [r for r in rows if r["T"] == 1]
    if t1:
        print(f"max time at T=1: {max(r['ours_us'] for r in t1):.2f} us")
    comp = [r["speedup_vs_compile"] for r in rows if r["speedup_vs_compile"]]
    if comp:
        print(f"min speedup vs torch.compile: {min(comp):.2f}x")

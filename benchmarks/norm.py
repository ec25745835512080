"""Benchmark of the RMSNorm family (stableops::rms_norm, fused_add_rms_norm,
rms_norm_weightless, fused_add_rms_norm_weightless).

GPU section (skipped, saying so, when no GPU is visible), per op, dtype and
shape [T, hidden]:
  * ours     - the stableops kernel,
  * eager    - the same math written with PyTorch ops (Hugging Face's
               LlamaRMSNorm rounding: normalise in float32, round to the
               dtype, multiply by the weight),
  * compile  - that math under torch.compile(fullgraph=True).
Every implementation is timed by bench_util's method: N calls captured in one
CUDA graph, replayed between CUDA events, median replay time / N, inputs
rotated among buffer sets larger than L2. The device-to-device copy bandwidth
(read + write) is measured in the same run; "%copy" is our bytes moved per
second against it. Bytes moved: rms_norm reads the input and writes the
result (2 * T * hidden elements), the fused ops read input and residual and
write both (4 * T * hidden), plus the weight once.

CPU section: the CPU kernel against the eager composition of torch ops at
--cpu_shape (4096 x 4096 by default) for each of --cpu_dtypes, median wall
time over repeated calls with torch's default thread count.

Run: ./tools/bazel run //benchmarks:norm -- [--json=PATH] [--nogpu|--nocpu]
(or python benchmarks/norm.py with the stableops wheel installed).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from absl import app, flags

from bench_util import copy_bandwidth_gbs, cpu_time_ms, fmt, gpu_result, graph_time_us, plan, print_gpu_summary

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_list(
    "ops",
    ["rms_norm", "fused_add_rms_norm", "rms_norm_weightless", "fused_add_rms_norm_weightless"],
    "Ops to benchmark.",
)
flags.DEFINE_list("tokens", ["1", "16", "256", "4096", "16384"], "Token counts T (GPU).")
flags.DEFINE_list("hidden", ["4096", "8192"], "Hidden sizes (GPU).")
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "GPU dtypes: bf16, fp16, fp32.")
flags.DEFINE_integer("replays", 25, "Graph replays per measurement (median).")
flags.DEFINE_integer("max_sets", 32, "Max input buffer sets rotated per graph.")
flags.DEFINE_float("rotate_bytes", 256e6, "Target bytes touched by one graph pass.")
flags.DEFINE_bool("gpu", True, "Run the GPU section (when a GPU is visible).")
flags.DEFINE_bool("cpu", True, "Run the CPU section.")
flags.DEFINE_string("cpu_shape", "4096x4096", "CPU shape TxHIDDEN.")
flags.DEFINE_list("cpu_dtypes", ["bf16", "fp16", "fp32"], "CPU dtypes.")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")
flags.DEFINE_bool("skip_eager", False, "Do not benchmark eager PyTorch (GPU).")
flags.DEFINE_bool("check", True, "Check our output against eager once per shape.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
EPS = 1e-6


# ---------------------------------------------------------------------------
# The same math in PyTorch ops, with the ops' signatures (writing in place).
# ---------------------------------------------------------------------------
def _normed(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return y if weight is None else y * weight


def torch_rms_norm(result: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> None:
    result.copy_(_normed(x, weight, eps))


def torch_fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float) -> None:
    z = x + residual
    residual.copy_(z)
    x.copy_(_normed(z, weight, eps))


def _ours(name: str) -> Callable[..., None]:
    op = getattr(torch.ops.stableops, name).default
    if name.endswith("_weightless"):
        return lambda a, b, weight, eps: op(a, b, eps)
    return op


def _torch(name: str) -> Callable[..., None]:
    return torch_fused_add_rms_norm if name.startswith("fused") else torch_rms_norm


def _make_set(name: str, t: int, h: int, dtype: torch.dtype, device: str, gen: torch.Generator) -> tuple[Any, ...]:
    """(first, second, weight, eps): rms_norm (result, input, ...), fused
    (input, residual, ...); weight None for the weightless ops."""
    x = torch.randn(t, h, device=device, dtype=dtype, generator=gen)
    weight = None
    if not name.endswith("_weightless"):
        weight = 1 + 0.1 * torch.randn(h, device=device, dtype=dtype, generator=gen)
    if name.startswith("fused"):
        return (x, torch.randn(t, h, device=device, dtype=dtype, generator=gen), weight, EPS)
    return (torch.empty_like(x), x, weight, EPS)


def _bytes(name: str, t: int, h: int, es: int) -> int:
    per_row = 4 if name.startswith("fused") else 2
    return per_row * t * h * es + (0 if name.endswith("_weightless") else h * es)


def _check(name: str, args: tuple[Any, ...]) -> None:
    a = tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in args)
    b = tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in args)
    _ours(name)(*a)
    _torch(name)(*b)
    tol = 1e-4 if a[0].dtype == torch.float32 else 2e-2
    for u, v in zip(a[:2], b[:2]):
        torch.testing.assert_close(u.float(), v.float(), atol=tol, rtol=tol)


# ---------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------
def gpu_section() -> dict[str, Any] | None:
    if not torch.cuda.is_available():
        print("GPU section: no CUDA/ROCm GPU visible, skipped\n")
        return None
    torch._dynamo.config.cache_size_limit = max(256, torch._dynamo.config.cache_size_limit)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    print(f"device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    header = (
        f"{'op':>29} {'dtype':>5} {'T':>6} {'hidden':>6} {'MB':>8} "
        f"{'ours us':>9} {'eager us':>9} {'compile us':>10} {'ours GB/s':>9} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    for name in FLAGS.ops:
        ours = _ours(name)
        ref = _torch(name)
        compiled = None if FLAGS.skip_compile else torch.compile(ref, fullgraph=True)
        for dname in FLAGS.dtypes:
            dtype = DTYPES[dname]
            es = torch.finfo(dtype).bits // 8
            for h in (int(v) for v in FLAGS.hidden):
                for t in (int(v) for v in FLAGS.tokens):
                    nbytes = _bytes(name, t, h, es)
                    n_sets, n_calls = plan(nbytes, FLAGS.rotate_bytes, FLAGS.max_sets)
                    sets = [_make_set(name, t, h, dtype, "cuda", gen) for _ in range(n_sets)]
                    if FLAGS.check:
                        _check(name, sets[0])
                    t_ours = graph_time_us(ours, sets, n_calls, FLAGS.replays)
                    t_eager = None if FLAGS.skip_eager else graph_time_us(ref, sets, n_calls, FLAGS.replays)
                    t_comp = None if compiled is None else graph_time_us(compiled, sets, n_calls, FLAGS.replays)
                    row = dict(op=name, dtype=dname, T=t, hidden=h, sets=n_sets, calls_per_graph=n_calls)
                    row.update(gpu_result(nbytes, copy_gbs, t_ours, t_eager, t_comp))
                    rows.append(row)
                    print(
                        f"{name:>29} {dname:>5} {t:>6} {h:>6} {nbytes / 1e6:>8.2f} "
                        f"{fmt(t_ours, 9, 2)} {fmt(t_eager, 9, 2)} {fmt(t_comp, 10, 2)} "
                        f"{row['ours_gbs']:>9.0f} {row['pct_copy']:>5.1f}% {fmt(row['speedup_vs_compile'], 9, 2)}x",
                        flush=True,
                    )
                    del sets
                    torch.cuda.empty_cache()
    print_gpu_summary(rows)
    print()
    return dict(device=props.name, copy_gbs=copy_gbs, results=rows)


# ---------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------
def cpu_section() -> dict[str, Any]:
    t, h = (int(v) for v in FLAGS.cpu_shape.lower().split("x"))
    print(f"CPU: {t} x {h}, {torch.get_num_threads()} threads (median wall time)")
    header = f"{'op':>29} {'dtype':>5} {'ours ms':>9} {'eager ms':>9} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    gen = torch.Generator().manual_seed(0)
    rows = []
    for name in FLAGS.ops:
        for dname in FLAGS.cpu_dtypes:
            args = _make_set(name, t, h, DTYPES[dname], "cpu", gen)
            if FLAGS.check:
                _check(name, args)
            ours, ref = _ours(name), _torch(name)
            t_ours = cpu_time_ms(lambda: ours(*args))
            t_eager = cpu_time_ms(lambda: ref(*args))
            rows.append(dict(op=name, dtype=dname, T=t, hidden=h, ours_ms=t_ours, eager_ms=t_eager,
                             speedup_vs_eager=t_eager / t_ours))
            print(f"{name:>29} {dname:>5} {t_ours:>9.2f} {t_eager:>9.2f} {t_eager / t_ours:>7.2f}x", flush=True)
    print(f"\nmin CPU speedup vs eager: {min(r['speedup_vs_eager'] for r in rows):.2f}x")
    return dict(threads=torch.get_num_threads(), results=rows)


def main(argv: list[str]) -> int:
    del argv
    import stableops  # noqa: F401  (loads the library)

    out: dict[str, Any] = dict(torch=torch.__version__)
    if FLAGS.gpu:
        out["gpu"] = gpu_section()
    if FLAGS.cpu:
        out["cpu"] = cpu_section()
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

"""Benchmark of the stableops activation ops (csrc/activation/).

GPU (skipped, saying so, where no GPU is visible): per op, shape and dtype,
  * ours     - the stableops kernel writing a preallocated output,
  * eager    - the op's native PyTorch composition (vLLM's forward_native,
               e.g. F.silu(x[..., :d]) * x[..., d:]),
  * compile  - that composition under torch.compile(fullgraph=True),
all timed the same way (bench_util): many calls captured in one CUDA graph,
inputs rotated over buffer sets so they do not sit in L2, the median replay
time per call; bandwidth against the device copy bandwidth measured in the
same run. Bytes moved: input + output (3 * T * d elements for the gated ops,
2 * T * d for gelu_new/fast/quick).

CPU: the CPU kernel against the eager composition at 4096 x 4096 (output
elements) for bf16, fp16 and fp32, median wall time (bench_util.cpu_time_ms).

Run (stableops installed or on PYTHONPATH):
    python benchmarks/activation.py [--json=results.json] [--nocpu | --nogpu]
    ./tools/bazel run //benchmarks:activation -- --nogpu
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from absl import app, flags

from bench_util import copy_bandwidth_gbs, cpu_time_ms, fmt, graph_time_us, plan

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_bool("gpu", True, "Benchmark the GPU kernels (where a GPU is visible).")
flags.DEFINE_bool("cpu", True, "Benchmark the CPU kernels at --cpu_shape.")
flags.DEFINE_list("tokens", ["1", "16", "256", "4096", "16384"], "Token counts T (GPU).")
flags.DEFINE_list("dims", ["4096", "14336"], "Output widths d (GPU).")
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "GPU dtypes: bf16, fp16, fp32.")
flags.DEFINE_list(
    "ops_every_shape",
    ["silu_and_mul", "mul_and_silu", "gelu_and_mul", "gelu_tanh_and_mul", "fatrelu_and_mul", "swigluoai_and_mul", "gelu_new"],
    "Ops timed at every GPU shape.",
)
flags.DEFINE_list(
    "ops_one_shape",
    ["silu_and_mul_with_clamp", "gelu_fast", "gelu_quick"],
    "Ops timed at --one_shape only (GPU).",
)
flags.DEFINE_string("one_shape", "4096x14336", "TxD for --ops_one_shape.")
flags.DEFINE_string("cpu_shape", "4096x4096", "TxD of the CPU benchmark.")
flags.DEFINE_list("cpu_dtypes", ["bf16", "fp16", "fp32"], "CPU dtypes.")
flags.DEFINE_list("cpu_ops", [], "CPU ops (default: all ten).")
flags.DEFINE_integer("replays", 25, "Graph replays per measurement (median).")
flags.DEFINE_integer("max_sets", 32, "Max input buffer sets rotated per graph.")
flags.DEFINE_float("rotate_bytes", 256e6, "Target bytes touched by one graph pass.")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")
flags.DEFINE_bool(
    "compile_static",
    False,
    "torch.compile(dynamic=False): a static graph per shape (slow to compile) "
    "instead of the default (static first, automatic dynamic after a recompile).",
)
flags.DEFINE_bool("skip_eager", False, "Do not benchmark eager PyTorch (GPU).")
flags.DEFINE_bool("check", True, "Check our output against the eager composition once per shape.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
GELU_TANH_C = math.sqrt(2 / math.pi)


def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


def native_swigluoai(x: torch.Tensor, alpha: float = 1.702, limit: float = 7.0) -> torch.Tensor:
    gate = x[..., ::2].clamp(max=limit)
    up = x[..., 1::2].clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


# name -> (gated, the native composition of the op, scalar arguments)
OPS: dict[str, tuple[bool, Callable[[torch.Tensor], torch.Tensor], tuple[float, ...]]] = {
    "silu_and_mul": (True, lambda x: F.silu(halves(x)[0]) * halves(x)[1], ()),
    "mul_and_silu": (True, lambda x: halves(x)[0] * F.silu(halves(x)[1]), ()),
    "silu_and_mul_with_clamp": (
        True,
        lambda x: F.silu(halves(x)[0].clamp(max=7.0)) * halves(x)[1].clamp(-7.0, 7.0),
        (7.0,),
    ),
    "gelu_and_mul": (True, lambda x: F.gelu(halves(x)[0]) * halves(x)[1], ()),
    "gelu_tanh_and_mul": (True, lambda x: F.gelu(halves(x)[0], approximate="tanh") * halves(x)[1], ()),
    "fatrelu_and_mul": (True, lambda x: F.threshold(halves(x)[0], 0.5, 0.0) * halves(x)[1], (0.5,)),
    "swigluoai_and_mul": (True, native_swigluoai, (1.702, 7.0)),
    "gelu_new": (False, lambda x: 0.5 * x * (1.0 + torch.tanh(GELU_TANH_C * (x + 0.044715 * torch.pow(x, 3.0)))), ()),
    "gelu_fast": (False, lambda x: 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))), ()),
    "gelu_quick": (False, lambda x: x * torch.sigmoid(1.702 * x), ()),
}


def ours_fn(name: str) -> Callable[[torch.Tensor, torch.Tensor], None]:
    op = getattr(torch.ops.stableops, name).default
    scalars = OPS[name][2]
    return lambda out, x: op(out, x, *scalars)


def make_set(t: int, d: int, gated: bool, dtype: torch.dtype, device: str, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(t, 2 * d if gated else d, device=device, dtype=dtype, generator=gen)
    return torch.empty(t, d, device=device, dtype=dtype), x


def check(name: str, out: torch.Tensor, x: torch.Tensor) -> None:
    ours_fn(name)(out, x)
    want = OPS[name][1](x.float()).to(out.dtype)
    tol = 2e-2 if out.dtype != torch.float32 else 1e-4
    torch.testing.assert_close(out.float(), want.float(), atol=tol, rtol=tol)


def parse_txd(s: str) -> tuple[int, int]:
    t, d = (int(v) for v in s.lower().split("x"))
    return t, d


def bench_gpu() -> dict:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    print(f"device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    dynamic = False if FLAGS.compile_static else None
    compiled = {} if FLAGS.skip_compile else {n: torch.compile(OPS[n][1], fullgraph=True, dynamic=dynamic) for n in OPS}
    gen = torch.Generator(device="cuda").manual_seed(0)

    all_shapes = [(int(t), int(d)) for d in FLAGS.dims for t in FLAGS.tokens]
    plan_rows = [(n, s) for n in FLAGS.ops_every_shape for s in all_shapes]
    plan_rows += [(n, parse_txd(FLAGS.one_shape)) for n in FLAGS.ops_one_shape]
    header = (
        f"{'op':>23} {'T':>6} {'d':>6} {'dtype':>5} {'MB':>8} {'ours us':>9} {'eager us':>9} "
        f"{'compile us':>10} {'GB/s':>6} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for dname in FLAGS.dtypes:
        dtype = DTYPES[dname]
        es = torch.finfo(dtype).bits // 8
        for name, (t, d) in plan_rows:
            gated = OPS[name][0]
            nbytes = (3 if gated else 2) * t * d * es
            n_sets, n_calls = plan(nbytes, FLAGS.rotate_bytes, FLAGS.max_sets)
            sets = [make_set(t, d, gated, dtype, "cuda", gen) for _ in range(n_sets)]
            if FLAGS.check:
                check(name, sets[0][0], sets[0][1])
            native = OPS[name][1]
            t_ours = graph_time_us(ours_fn(name), sets, n_calls, FLAGS.replays)
            t_eager = None if FLAGS.skip_eager else graph_time_us(lambda out, x: native(x), sets, n_calls, FLAGS.replays)
            t_comp = None
            if compiled:
                fn = compiled[name]
                t_comp = graph_time_us(lambda out, x: fn(x), sets, n_calls, FLAGS.replays)
            gbs = nbytes / (t_ours * 1e-6) / 1e9
            row = dict(
                op=name, T=t, d=d, dtype=dname, bytes=nbytes, sets=n_sets, calls_per_graph=n_calls,
                ours_us=t_ours, eager_us=t_eager, compile_us=t_comp, ours_gbs=gbs,
                pct_copy=100 * gbs / copy_gbs, speedup_vs_compile=(t_comp / t_ours) if t_comp else None,
            )
            rows.append(row)
            print(
                f"{name:>23} {t:>6} {d:>6} {dname:>5} {nbytes / 1e6:>8.1f} {fmt(t_ours, 9, 2)} "
                f"{fmt(t_eager, 9, 2)} {fmt(t_comp, 10, 2)} {gbs:>6.0f} {row['pct_copy']:>5.1f}% "
                f"{fmt(row['speedup_vs_compile'], 9, 2)}x",
                flush=True,
            )
            del sets
            torch.cuda.empty_cache()

    big = [r for r in rows if r["bytes"] >= 100e6]
    if big:
        worst = min(big, key=lambda r: r["pct_copy"])
        print(f"\nmin % of copy bandwidth at >= 100 MB: {worst['pct_copy']:.1f}% ({worst['op']} T={worst['T']} d={worst['d']} {worst['dtype']})")
    t1 = [r for r in rows if r["T"] == 1]
    if t1:
        print(f"max time at T=1: {max(r['ours_us'] for r in t1):.2f} us")
    comp = [r for r in rows if r["speedup_vs_compile"]]
    if comp:
        worst = min(comp, key=lambda r: r["speedup_vs_compile"])
        print(f"min speedup vs torch.compile: {worst['speedup_vs_compile']:.2f}x ({worst['op']} T={worst['T']} d={worst['d']} {worst['dtype']})")
    return dict(device=props.name, copy_gbs=copy_gbs, results=rows)


def bench_cpu() -> dict:
    t, d = parse_txd(FLAGS.cpu_shape)
    names = FLAGS.cpu_ops or list(OPS)
    print(f"\nCPU: {t} x {d} output elements, {torch.get_num_threads()} threads, median wall time")
    header = f"{'op':>23} {'dtype':>5} {'ours ms':>9} {'eager ms':>9} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    gen = torch.Generator().manual_seed(0)
    rows = []
    for dname in FLAGS.cpu_dtypes:
        dtype = DTYPES[dname]
        for name in names:
            gated, native, _ = OPS[name]
            out, x = make_set(t, d, gated, dtype, "cpu", gen)
            if FLAGS.check:
                check(name, out, x)
            ours = ours_fn(name)
            t_ours = cpu_time_ms(lambda: ours(out, x))
            t_eager = cpu_time_ms(lambda: native(x))
            rows.append(dict(op=name, T=t, d=d, dtype=dname, ours_ms=t_ours, eager_ms=t_eager, speedup=t_eager / t_ours))
            print(f"{name:>23} {dname:>5} {t_ours:>9.2f} {t_eager:>9.2f} {t_eager / t_ours:>7.2f}x", flush=True)
    worst = min(rows, key=lambda r: r["speedup"])
    print(f"\nmin CPU speedup vs eager: {worst['speedup']:.2f}x ({worst['op']} {worst['dtype']})")
    return dict(threads=torch.get_num_threads(), results=rows)


def main(argv: list[str]) -> int:
    del argv
    import stableops  # noqa: F401  (loads the library)

    result: dict = dict(torch=torch.__version__)
    if FLAGS.gpu:
        if torch.cuda.is_available():
            result["gpu"] = bench_gpu()
        else:
            print("GPU: no CUDA/ROCm GPU visible: GPU benchmark skipped")
    if FLAGS.cpu:
        result["cpu"] = bench_cpu()
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

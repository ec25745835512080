"""Benchmark of the stableops quantization ops (FP8 and INT8).

GPU (CUDA): per op, shape and input dtype,
  * ours     - the stableops kernel, into preallocated outputs,
  * eager    - the same math written with PyTorch ops (eager mode),
  * compile  - that math under torch.compile(fullgraph=True) (static shapes
               unless --compile_dynamic),
all timed the bench_util way: N calls captured in one CUDA graph, median
replay time / N, inputs rotated so a call does not find them in L2. Bytes
moved = input read once + result written + scales (and zero points); the
dynamic per-tensor op reads its input twice (amax pass, quantise pass) but
is credited with one read. The ceiling is the device-to-device copy
bandwidth measured in the same run.

CPU (always, unless --skip_cpu): each op's CPU kernel against the eager
composition of torch ops at --cpu_shape for bf16/fp16/fp32 (median wall
time; the machine's other load shows up here).

Run:  ./tools/bazel run //benchmarks:quantization -- [--json=PATH] [--cpu_only]
 or:  python benchmarks/quantization.py   (stableops installed)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from absl import app, flags

from bench_util import FP8, FP8_MAX, copy_bandwidth_gbs, cpu_time_ms, fmt, graph_time_us, plan, to_fp8

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_list("tokens", ["1", "256", "4096", "16384"], "GPU token counts T.")
flags.DEFINE_list("hidden", ["4096", "8192"], "GPU hidden sizes H.")
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "GPU input dtypes: bf16, fp16, fp32.")
flags.DEFINE_list(
    "ops",
    ["static_fp8", "dynamic_fp8", "per_token_fp8", "static_int8", "dynamic_int8"],
    "Ops to benchmark.",
)
flags.DEFINE_integer("replays", 20, "Graph replays per measurement (median).")
flags.DEFINE_integer("max_sets", 32, "Max input buffer sets rotated per graph.")
flags.DEFINE_float("rotate_bytes", 256e6, "Target bytes touched by one graph pass.")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")
flags.DEFINE_bool("skip_eager", False, "Do not benchmark eager PyTorch.")
flags.DEFINE_bool("compile_dynamic", False, "torch.compile with dynamic shapes (one graph for all T).")
flags.DEFINE_bool("check", True, "Check our results against eager once per shape.")
flags.DEFINE_bool("cpu_only", False, "Only the CPU section.")
flags.DEFINE_bool("skip_cpu", False, "Skip the CPU section.")
flags.DEFINE_list("cpu_shape", ["4096", "4096"], "CPU shape T,H.")
flags.DEFINE_list("cpu_dtypes", ["bf16", "fp16", "fp32"], "CPU input dtypes.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
FP8_MIN_SCALE = 1.0 / (FP8_MAX * 512.0)


# --------------------------------------------------------------------------
# The math in PyTorch ops (eager and torch.compile): what a user would write.
# --------------------------------------------------------------------------
def t_static_fp8(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return to_fp8(x.float() / s)


def t_dynamic_fp8(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.clamp(x.float().abs().amax() / FP8_MAX, min=FP8_MIN_SCALE)
    return to_fp8(x.float() / scale), scale


def t_per_token_fp8(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.clamp(x.float().abs().amax(dim=-1, keepdim=True) / FP8_MAX, min=FP8_MIN_SCALE)
    return to_fp8(x.float() / scale), scale


def t_static_int8(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.round(x.float() / s).clamp(-128, 127).to(torch.int8)


def t_dynamic_int8(x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = x.float().abs().amax(dim=-1, keepdim=True) / 127.0
    q = torch.where(scale == 0, 0.0, torch.round(x.float() / scale))
    return q.clamp(-128, 127).to(torch.int8), scale


TORCH_MATH: dict[str, Callable[..., Any]] = {
    "static_fp8": t_static_fp8,
    "dynamic_fp8": t_dynamic_fp8,
    "per_token_fp8": t_per_token_fp8,
    "static_int8": t_static_int8,
    "dynamic_int8": t_dynamic_int8,
}


# --------------------------------------------------------------------------
# Ours: (op, preallocated outputs) per input set.
# --------------------------------------------------------------------------
def our_args(op: str, x: torch.Tensor, s: torch.Tensor) -> tuple[Callable[..., None], tuple[Any, ...]]:
    t = x.numel() // x.shape[-1]
    dev = x.device
    so = torch.ops.stableops
    if op == "static_fp8":
        return so.static_scaled_fp8_quant.default, (torch.empty(x.shape, dtype=FP8, device=dev), x, s, None)
    if op == "dynamic_fp8":
        return so.dynamic_scaled_fp8_quant.default, (
            torch.empty(x.shape, dtype=FP8, device=dev), x, torch.empty(1, device=dev))
    if op == "per_token_fp8":
        return so.dynamic_per_token_scaled_fp8_quant.default, (
            torch.empty(x.shape, dtype=FP8, device=dev), x, torch.empty(t, 1, device=dev), None)
    if op == "static_int8":
        return so.static_scaled_int8_quant.default, (
            torch.empty(x.shape, dtype=torch.int8, device=dev), x, s, None)
    return so.dynamic_scaled_int8_quant.default, (
        torch.empty(x.shape, dtype=torch.int8, device=dev), x, torch.empty(t, 1, device=dev), None)


def bytes_moved(op: str, t: int, h: int, elem: int) -> int:
    """Input read once + 1-byte result + scales."""
    base = t * h * elem + t * h
    return base + (4 * t if op in ("per_token_fp8", "dynamic_int8") else 4)


def check_against_eager(op: str, fn: Callable[..., None], args: tuple[Any, ...], x: torch.Tensor, s: torch.Tensor) -> None:
    """Our codes equal eager torch's quantisation with our scale (a CUDA
    tensor / tensor division is IEEE, like ours); a dynamic op's scale is the
    eager one within an ulp (eager divides by a Python number through its
    reciprocal)."""
    fn(*args)
    scale = s
    if not op.startswith("static"):
        scale = args[2]
        want_scale = TORCH_MATH[op](x, s)[1]
        torch.testing.assert_close(scale.reshape(want_scale.shape), want_scale, rtol=2.5e-7, atol=0)
    v = x.float() / scale
    if op.endswith("fp8"):
        want = to_fp8(v)
    else:
        want = torch.where(scale == 0, 0.0, torch.round(v)).clamp(-128, 127).to(torch.int8)
    if not torch.equal(args[0].view(torch.uint8), want.view(torch.uint8)):
        raise AssertionError(f"{op}: result differs from the eager torch math")


def gpu_section(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import stableops  # noqa: F401  (loads the library)

    torch._dynamo.config.cache_size_limit = max(256, torch._dynamo.config.cache_size_limit)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    print(f"device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")
    header = (
        f"{'op':>13} {'T':>6} {'H':>5} {'dtype':>5} {'MB':>8} {'ours us':>9} {'eager us':>9} "
        f"{'compile us':>10} {'ours GB/s':>9} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    gen = torch.Generator(device="cuda").manual_seed(0)
    for op in FLAGS.ops:
        compiled = None
        if not FLAGS.skip_compile:
            compiled = torch.compile(TORCH_MATH[op], fullgraph=True, dynamic=True if FLAGS.compile_dynamic else False)
        for dname in FLAGS.dtypes:
            dtype = DTYPES[dname]
            es = torch.finfo(dtype).bits // 8
            for h in (int(v) for v in FLAGS.hidden):
                for t in (int(v) for v in FLAGS.tokens):
                    nbytes = bytes_moved(op, t, h, es)
                    n_sets, n_calls = plan(nbytes, FLAGS.rotate_bytes, FLAGS.max_sets)
                    xs = [torch.randn(t, h, device="cuda", generator=gen).to(dtype) * 4 for _ in range(n_sets)]
                    s = torch.tensor([0.05], device="cuda")
                    ours = [our_args(op, x, s) for x in xs]
                    fn = ours[0][0]
                    if FLAGS.check:
                        check_against_eager(op, fn, ours[0][1], xs[0], s)
                    t_ours = graph_time_us(fn, [a for _, a in ours], n_calls, FLAGS.replays)
                    torch_sets = [(x, s) for x in xs]
                    t_eager = None if FLAGS.skip_eager else graph_time_us(TORCH_MATH[op], torch_sets, n_calls, FLAGS.replays)
                    t_comp = None if compiled is None else graph_time_us(compiled, torch_sets, n_calls, FLAGS.replays)
                    gbs = nbytes / (t_ours * 1e-6) / 1e9
                    row = dict(
                        section="gpu", op=op, T=t, H=h, dtype=dname, bytes=nbytes, sets=n_sets,
                        calls_per_graph=n_calls, ours_us=t_ours, eager_us=t_eager, compile_us=t_comp,
                        ours_gbs=gbs, pct_copy=100 * gbs / copy_gbs,
                        speedup_vs_compile=(t_comp / t_ours) if t_comp else None,
                        speedup_vs_eager=(t_eager / t_ours) if t_eager else None,
                    )
                    rows.append(row)
                    print(
                        f"{op:>13} {t:>6} {h:>5} {dname:>5} {nbytes / 1e6:>8.2f} {fmt(t_ours, 9, 2)} "
                        f"{fmt(t_eager, 9, 2)} {fmt(t_comp, 10, 2)} {gbs:>9.0f} {100 * gbs / copy_gbs:>5.1f}% "
                        f"{fmt(row['speedup_vs_compile'], 9, 2)}x",
                        flush=True,
                    )
                    del xs, ours, torch_sets
                    torch.cuda.empty_cache()
    gpu = [r for r in rows if r["section"] == "gpu"]
    for op in FLAGS.ops:
        mine = [r for r in gpu if r["op"] == op]
        big = [r for r in mine if r["bytes"] >= 100e6]
        comp = [r["speedup_vs_compile"] for r in mine if r["speedup_vs_compile"]]
        t1 = [r["ours_us"] for r in mine if r["T"] == 1]
        print(
            f"{op}: min %copy at >= 100 MB: {min((r['pct_copy'] for r in big), default=float('nan')):.1f}%, "
            f"max us at T=1: {max(t1, default=float('nan')):.2f}, "
            f"min speedup vs compile: {min(comp, default=float('nan')):.2f}x"
        )
    return dict(device=props.name, copy_gbs=copy_gbs)


def cpu_section(rows: list[dict[str, Any]]) -> None:
    import stableops  # noqa: F401

    t, h = (int(v) for v in FLAGS.cpu_shape)
    print(f"\nCPU: {t} x {h}, {torch.get_num_threads()} threads (median wall time; shared machines are noisy)")
    header = f"{'op':>13} {'dtype':>5} {'ours ms':>9} {'eager ms':>9} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    for op in FLAGS.ops:
        for dname in FLAGS.cpu_dtypes:
            x = (torch.randn(t, h) * 4).to(DTYPES[dname])
            s = torch.tensor([0.05])
            fn, args = our_args(op, x, s)
            t_ours = cpu_time_ms(lambda: fn(*args))
            t_eager = cpu_time_ms(lambda: TORCH_MATH[op](x, s))
            rows.append(dict(section="cpu", op=op, T=t, H=h, dtype=dname, ours_ms=t_ours, eager_ms=t_eager,
                             speedup_vs_eager=t_eager / t_ours, threads=torch.get_num_threads()))
            print(f"{op:>13} {dname:>5} {t_ours:>9.2f} {t_eager:>9.2f} {t_eager / t_ours:>7.2f}x", flush=True)


def main(argv: list[str]) -> int:
    del argv
    rows: list[dict[str, Any]] = []
    info: dict[str, Any] = {"torch": torch.__version__}
    if FLAGS.cpu_only:
        pass
    elif torch.cuda.is_available():
        info.update(gpu_section(rows))
    else:
        print("no CUDA GPU visible: GPU section skipped")
    if not FLAGS.skip_cpu:
        cpu_section(rows)
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(dict(info, results=rows), f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

"""Benchmark of stableops::merge_attn_states on a CUDA GPU.

Compares, per shape and dtype:
  * ours     - the stableops CUDA kernel,
  * eager    - the same math written with PyTorch ops (eager mode),
  * compile  - that math under torch.compile(fullgraph=True) (default
               settings: static first, automatic dynamic shapes afterwards).

Every implementation is timed the same way: N back-to-back calls are captured
in one CUDA graph, the graph is replayed many times between CUDA events, and
the median replay time divided by N is reported. This removes Python and
dispatcher overhead, so small shapes show kernel (+launch) latency only.

Inputs are rotated among several buffer sets within a graph so that a call
does not find its inputs in L2 left there by the previous call, as long as
the sets together exceed ~2x L2 (sets are capped by --max_sets; for tiny
shapes everything is L2-resident anyway: they are latency-bound).

--output=fp8 times the FP8-output form instead (`output_scale` given,
`output` float8_e4m3fn holding fp8(clamp(merged / scale, -448, 448))): one
byte per output value, and the kernels with the most registers.

Also measures device-to-device copy bandwidth (bytes read + written) of a
large tensor copy once, and reports our bandwidth as a % of it.

Run (stableops installed or on PYTHONPATH):
    python benchmarks/merge_attn_states.py [--json=results.json]
"""

from __future__ import annotations

import json
import sys

import torch
from absl import app, flags

from bench_util import FP8, copy_bandwidth_gbs, fmt, graph_time_us, plan, to_fp8

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_list("tokens", ["1", "64", "512", "4096", "16384"], "Token counts T.")
flags.DEFINE_list(
    "heads_dims", ["32x128", "128x128", "16x512"], "HxD pairs (num_heads x head_size)."
)
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "Value dtypes: bf16, fp16, fp32.")
flags.DEFINE_integer("replays", 25, "Graph replays per measurement (median).")
flags.DEFINE_integer("max_sets", 32, "Max input buffer sets rotated per graph.")
flags.DEFINE_float("rotate_bytes", 256e6, "Target bytes touched by one graph pass.")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")
flags.DEFINE_bool("skip_eager", False, "Do not benchmark eager PyTorch.")
flags.DEFINE_enum(
    "output", "input", ["input", "fp8"],
    "Output dtype: the input's, or float8_e4m3fn through output_scale.",
)
flags.DEFINE_bool("check", True, "Check our output against eager once per shape.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
INF = float("inf")
# Merged values are about N(0, 1): this scale spreads them over most of
# e4m3fn's range, and clamps the largest.
FP8_SCALE = 1.0 / 128


def torch_merge(out, out_lse, p, pl, s, sl, scale=None):
    """The reference math in plain PyTorch ops, writing into out/out_lse
    (with `scale`: out is FP8, fp8(clamp(merged / scale, -MAX, MAX)))."""
    pl = torch.where(pl == INF, -INF, pl)
    sl = torch.where(sl == INF, -INF, sl)
    m = torch.maximum(pl, sl)
    empty = m == -INF
    m_safe = torch.where(empty, 0.0, m)
    pe = torch.exp(pl - m_safe)
    se = torch.exp(sl - m_safe)
    tot = pe + se
    wp = torch.where(empty, 1.0, pe / tot).t().unsqueeze(-1)
    ws = torch.where(empty, 0.0, se / tot).t().unsqueeze(-1)
    merged = p.float() * wp + s.float() * ws
    if scale is None:
        out.copy_(merged)
    else:
        out.copy_(to_fp8(merged / scale))
    out_lse.copy_(torch.where(empty, -INF, m_safe + torch.log(tot)))


def ours(out, out_lse, p, pl, s, sl, scale=None):
    torch.ops.stableops.merge_attn_states.default(out, out_lse, p, pl, s, sl, None, scale)


def make_set(t, h, d, dtype, gen, fp8_out):
    p = torch.randn(t, h, d, device="cuda", dtype=dtype, generator=gen)
    s = torch.randn(t, h, d, device="cuda", dtype=dtype, generator=gen)
    pl = torch.randn(h, t, device="cuda", generator=gen) * 3
    sl = torch.randn(h, t, device="cuda", generator=gen) * 3
    out = torch.empty(t, h, d, device="cuda", dtype=FP8 if fp8_out else dtype)
    out_lse = torch.empty(h, t, device="cuda")
    if fp8_out:
        return (out, out_lse, p, pl, s, sl, torch.full((1,), FP8_SCALE, device="cuda"))
    return (out, out_lse, p, pl, s, sl)


def main(argv):
    del argv
    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing to benchmark")
        return 0
    import stableops  # noqa: F401  (loads the library)

    torch._dynamo.config.cache_size_limit = max(
        64, torch._dynamo.config.cache_size_limit
    )
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
    print(f"device: {props.name}, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    print(f"device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")

    compiled = None if FLAGS.skip_compile else torch.compile(torch_merge, fullgraph=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    fp8_out = FLAGS.output == "fp8"
    if fp8_out:
        print(f"output: {FP8} through output_scale = {FP8_SCALE}\n")
    rows = []
    header = (
        f"{'T':>6} {'H':>4} {'D':>4} {'dtype':>5} {'MB':>9} {'sets':>4} "
        f"{'ours us':>9} {'eager us':>9} {'compile us':>10} "
        f"{'ours GB/s':>9} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    for dname in FLAGS.dtypes:
        dtype = DTYPES[dname]
        es = torch.finfo(dtype).bits // 8
        for hd in FLAGS.heads_dims:
            h, d = (int(v) for v in hd.lower().split("x"))
            for t in (int(v) for v in FLAGS.tokens):
                nbytes = (2 * es + (1 if fp8_out else es)) * t * h * d + 3 * t * h * 4
                n_sets, n_calls = plan(nbytes, FLAGS.rotate_bytes, FLAGS.max_sets)
                sets = [make_set(t, h, d, dtype, gen, fp8_out) for _ in range(n_sets)]

                if FLAGS.check:
                    out, out_lse = sets[0][0].clone(), sets[0][1].clone()
                    ours(out, out_lse, *sets[0][2:])
                    torch_merge(sets[0][0], sets[0][1], *sets[0][2:])
                    # FP8: one e4m3 step (1/8 relative) where the float
                    # math of the two rounds to neighbouring codes.
                    tol = 0.13 if fp8_out else 2e-2 if dtype != torch.float32 else 1e-4
                    torch.testing.assert_close(out.float(), sets[0][0].float(), atol=tol, rtol=tol)
                    torch.testing.assert_close(out_lse, sets[0][1], atol=1e-4, rtol=1e-4)

                t_ours = graph_time_us(ours, sets, n_calls, FLAGS.replays)
                t_eager = (
                    None
                    if FLAGS.skip_eager
                    else graph_time_us(torch_merge, sets, n_calls, FLAGS.replays)
                )
                t_comp = (
                    None
                    if compiled is None
                    else graph_time_us(compiled, sets, n_calls, FLAGS.replays)
                )
                gbs = nbytes / (t_ours * 1e-6) / 1e9
                row = dict(
                    T=t, H=h, D=d, dtype=dname, output=FLAGS.output, bytes=nbytes, sets=n_sets,
                    calls_per_graph=n_calls, ours_us=t_ours, eager_us=t_eager,
                    compile_us=t_comp, ours_gbs=gbs, pct_copy=100 * gbs / copy_gbs,
                    speedup_vs_compile=(t_comp / t_ours) if t_comp else None,
                    speedup_vs_eager=(t_eager / t_ours) if t_eager else None,
                )
                rows.append(row)
                print(
                    f"{t:>6} {h:>4} {d:>4} {dname:>5} {nbytes / 1e6:>9.2f} {n_sets:>4} "
                    f"{fmt(t_ours, 9, 2)} {fmt(t_eager, 9, 2)} {fmt(t_comp, 10, 2)} "
                    f"{gbs:>9.0f} {100 * gbs / copy_gbs:>5.1f}% "
                    f"{fmt(row['speedup_vs_compile'], 9, 2)}x",
                    flush=True,
                )
                del sets
                torch.cuda.empty_cache()

    big = [r for r in rows if r["bytes"] >= 100e6]
    if big:
        print(f"\nmin % of copy bandwidth at >= 100 MB: {min(r['pct_copy'] for r in big):.1f}%")
    t1 = [r for r in rows if r["T"] == 1]
    if t1:
        print(f"max time at T=1: {max(r['ours_us'] for r in t1):.2f} us")
    comp = [r["speedup_vs_compile"] for r in rows if r["speedup_vs_compile"]]
    if comp:
        print(f"min speedup vs torch.compile: {min(comp):.2f}x")
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(
                dict(device=props.name, copy_gbs=copy_gbs, results=rows), f, indent=2
            )
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

"""Benchmark of stableops::rotary_embedding.

GPU part (skipped, saying so, where no CUDA GPU is visible), per shape, style
and dtype:
  * ours     - the stableops GPU kernel,
  * eager    - the same math written with PyTorch ops (in place, float32 math),
  * compile  - that math under torch.compile(fullgraph=True).
Each is timed by bench_util.graph_time_us: N back-to-back calls captured in
one CUDA graph, the median replay time / N, inputs rotated among buffer sets
so that a call does not find its inputs in L2. The ceiling is the
device-to-device copy bandwidth measured in the same run. Bytes counted are
the ones the op must move: the rotated part of query and key read and
written, plus one cos/sin cache row per token.

CPU part (--cpu, on by default): the CPU kernel against the eager
composition of torch ops at 4096 tokens x 4096 hidden (32 query heads and 8
key heads of 128, rot_dim 128), for bf16, fp16 and fp32, both styles.

Run (stableops installed or on PYTHONPATH):
    python benchmarks/rotary_embedding.py [--json=results.json] [--nogpu] [--nocpu]
or ./tools/bazel run //benchmarks:rotary_embedding -- --flags...
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from absl import app, flags

from bench_util import copy_bandwidth_gbs, cpu_time_ms, fmt, graph_time_us, plan, print_summary

FLAGS = flags.FLAGS
flags.DEFINE_string("json", None, "Write the results as JSON to this path.")
flags.DEFINE_bool("gpu", True, "Run the GPU part (skipped without a CUDA GPU).")
flags.DEFINE_bool("cpu", True, "Run the CPU part (4096 x 4096, bf16/fp16/fp32).")
flags.DEFINE_list("tokens", ["1", "16", "256", "4096", "16384"], "Token counts T (GPU).")
flags.DEFINE_list(
    "shapes", ["32x8x128x128", "32x8x128x64"], "GPU shapes Hq x Hk x head_size x rot_dim."
)
flags.DEFINE_list("styles", ["neox", "gptj"], "Rotation styles: neox, gptj.")
flags.DEFINE_list("dtypes", ["bf16", "fp16"], "GPU query/key dtypes (cache of the same dtype).")
flags.DEFINE_list(
    "f32_cache_tokens", ["4096"], "Token counts also run with a float32 cache (first shape, bf16)."
)
flags.DEFINE_integer("max_position", 8192, "Rows of the cos/sin cache.")
flags.DEFINE_integer("replays", 25, "Graph replays per measurement (median).")
flags.DEFINE_integer("max_sets", 32, "Max input buffer sets rotated per graph.")
flags.DEFINE_float("rotate_bytes", 256e6, "Target bytes touched by one graph pass.")
flags.DEFINE_bool("skip_compile", False, "Do not benchmark torch.compile.")
flags.DEFINE_bool("skip_eager", False, "Do not benchmark eager PyTorch.")
flags.DEFINE_bool("check", True, "Check our output against eager once per shape.")
flags.DEFINE_integer("cpu_tokens", 4096, "CPU part: tokens.")
flags.DEFINE_list("cpu_dtypes", ["bf16", "fp16", "fp32"], "CPU part: dtypes.")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
STYLES = {"neox": True, "gptj": False}


def torch_rope(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rope_dim_offset: int = 0,
    inverse: bool = False,
) -> None:
    """The op's math in plain PyTorch ops, in place, float32 math."""
    rot = cos_sin_cache.shape[1]
    half = rot // 2
    cos_sin = cos_sin_cache.index_select(0, positions).float()
    cos = cos_sin[:, None, :half]
    sin = -cos_sin[:, None, half:] if inverse else cos_sin[:, None, half:]
    for x in (query, key):
        if x is None:
            continue
        span = x.view(x.shape[0], -1, head_size)[..., rope_dim_offset : rope_dim_offset + rot]
        a, b = (span[..., :half], span[..., half:]) if is_neox else (span[..., 0::2], span[..., 1::2])
        af, bf = a.float(), b.float()
        a_new = af * cos - bf * sin
        b_new = bf * cos + af * sin
        a.copy_(a_new)
        b.copy_(b_new)


def ours(*args: Any) -> None:
    torch.ops.stableops.rotary_embedding.default(*args)


def make_cache(max_position: int, rot_dim: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim))
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype=dtype, device=device)


def make_set(
    t: int, hq: int, hk: int, d: int, cache: torch.Tensor, is_neox: bool, dtype: torch.dtype,
    device: str, gen: torch.Generator,
) -> tuple[Any, ...]:
    positions = torch.randint(0, cache.shape[0], (t,), device=device, generator=gen)
    q = torch.randn(t, hq * d, device=device, dtype=dtype, generator=gen)
    k = torch.randn(t, hk * d, device=device, dtype=dtype, generator=gen)
    return (positions, q, k, d, cache, is_neox, 0, False)


def check_once(args: tuple[Any, ...], dtype: torch.dtype) -> None:
    a = list(args)
    b = list(args)
    a[1], a[2] = args[1].clone(), args[2].clone()
    b[1], b[2] = args[1].clone(), args[2].clone()
    ours(*a)
    torch_rope(*b)
    tol = 2e-2 if dtype != torch.float32 else 1e-4
    torch.testing.assert_close(a[1].float(), b[1].float(), atol=tol, rtol=tol)
    torch.testing.assert_close(a[2].float(), b[2].float(), atol=tol, rtol=tol)


def gpu_part() -> dict[str, Any] | None:
    if not torch.cuda.is_available():
        print("GPU part: no CUDA GPU visible, skipped\n")
        return None
    torch._dynamo.config.cache_size_limit = max(256, torch._dynamo.config.cache_size_limit)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    copy_gbs = copy_bandwidth_gbs(FLAGS.replays)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {props.L2_cache_size / 2**20:.0f} MiB")
    print(f"device-to-device copy bandwidth (read+write): {copy_gbs:.0f} GB/s\n")

    compiled = None if FLAGS.skip_compile else torch.compile(torch_rope, fullgraph=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    runs = []
    for shape in FLAGS.shapes:
        for style in FLAGS.styles:
            for dname in FLAGS.dtypes:
                for t in (int(v) for v in FLAGS.tokens):
                    runs.append((shape, style, dname, dname, t))
    for style in FLAGS.styles:
        for t in (int(v) for v in FLAGS.f32_cache_tokens):
            runs.append((FLAGS.shapes[0], style, "bf16", "fp32", t))

    header = (
        f"{'T':>6} {'Hq':>3} {'Hk':>3} {'D':>4} {'R':>4} {'style':>5} {'dtype':>5} {'cache':>5} "
        f"{'MB':>8} {'sets':>4} {'ours us':>8} {'eager us':>9} {'compile us':>10} "
        f"{'GB/s':>6} {'%copy':>6} {'vs compile':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for shape, style, dname, cname, t in runs:
        hq, hk, d, r = (int(v) for v in shape.lower().split("x"))
        dtype, cdtype = DTYPES[dname], DTYPES[cname]
        es, ces = dtype.itemsize, cdtype.itemsize
        nbytes = 2 * t * (hq + hk) * r * es + t * r * ces + t * 8
        n_sets, n_calls = plan(nbytes, FLAGS.rotate_bytes, FLAGS.max_sets)
        cache = make_cache(FLAGS.max_position, r, cdtype, "cuda")
        sets = [make_set(t, hq, hk, d, cache, STYLES[style], dtype, "cuda", gen) for _ in range(n_sets)]
        if FLAGS.check:
            check_once(sets[0], dtype)
        t_ours = graph_time_us(ours, sets, n_calls, FLAGS.replays)
        t_eager = None if FLAGS.skip_eager else graph_time_us(torch_rope, sets, n_calls, FLAGS.replays)
        t_comp = None if compiled is None else graph_time_us(compiled, sets, n_calls, FLAGS.replays)
        gbs = nbytes / (t_ours * 1e-6) / 1e9
        row = dict(
            T=t, Hq=hq, Hk=hk, D=d, R=r, style=style, dtype=dname, cache_dtype=cname,
            bytes=nbytes, sets=n_sets, calls_per_graph=n_calls, ours_us=t_ours,
            eager_us=t_eager, compile_us=t_comp, ours_gbs=gbs, pct_copy=100 * gbs / copy_gbs,
            speedup_vs_compile=(t_comp / t_ours) if t_comp else None,
            speedup_vs_eager=(t_eager / t_ours) if t_eager else None,
        )
        rows.append(row)
        print(
            f"{t:>6} {hq:>3} {hk:>3} {d:>4} {r:>4} {style:>5} {dname:>5} {cname:>5} "
            f"{nbytes / 1e6:>8.2f} {n_sets:>4} {fmt(t_ours, 8, 2)} {fmt(t_eager, 9, 2)} "
            f"{fmt(t_comp, 10, 2)} {gbs:>6.0f} {100 * gbs / copy_gbs:>5.1f}% "
            f"{fmt(row['speedup_vs_compile'], 9, 2)}x",
            flush=True,
        )
        del sets, cache
        torch.cuda.empty_cache()

    print_summary(rows)
    print()
    return dict(device=props.name, copy_gbs=copy_gbs, results=rows)


def cpu_part() -> dict[str, Any]:
    t, hq, hk, d, r = FLAGS.cpu_tokens, 32, 8, 128, 128
    print(
        f"CPU part: {t} tokens, query {hq}x{d} (hidden {hq * d}), key {hk}x{d}, rot_dim {r}, "
        f"{torch.get_num_threads()} threads"
    )
    header = f"{'dtype':>5} {'style':>5} {'ours ms':>9} {'eager ms':>9} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    gen = torch.Generator().manual_seed(0)
    rows = []
    for dname in FLAGS.cpu_dtypes:
        dtype = DTYPES[dname]
        cache = make_cache(FLAGS.max_position, r, dtype, "cpu")
        for style in FLAGS.styles:
            args = make_set(t, hq, hk, d, cache, STYLES[style], dtype, "cpu", gen)
            if FLAGS.check:
                check_once(args, dtype)
            t_ours = cpu_time_ms(lambda: ours(*args))
            t_eager = cpu_time_ms(lambda: torch_rope(*args))
            rows.append(dict(dtype=dname, style=style, ours_ms=t_ours, eager_ms=t_eager, speedup=t_eager / t_ours))
            print(f"{dname:>5} {style:>5} {t_ours:>9.3f} {t_eager:>9.3f} {t_eager / t_ours:>7.2f}x", flush=True)
    print(f"min CPU speedup vs eager: {min(r['speedup'] for r in rows):.2f}x\n")
    return dict(tokens=t, q_heads=hq, k_heads=hk, head_size=d, rot_dim=r, threads=torch.get_num_threads(), results=rows)


def main(argv: list[str]) -> int:
    del argv
    import stableops  # noqa: F401  (loads the library)

    out: dict[str, Any] = {"torch": torch.__version__}
    if FLAGS.gpu:
        out["gpu"] = gpu_part()
    if FLAGS.cpu:
        out["cpu"] = cpu_part()
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {FLAGS.json}")
    return 0


if __name__ == "__main__":
    sys.exit(app.run(main))

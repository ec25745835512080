"""GPU tests of stableops: the CUDA/ROCm merge_attn_states kernel, the UVA view
of pinned host memory (get_cuda_view_from_cpu_tensor) and the device-attribute
queries.

Every test that needs a GPU is skipped with an explicit reason when none is
visible. The "no GPU visible" subprocess test runs everywhere the library was
built with GPU support (detected by the op being registered).

Run: python tests/test_cuda_ops.py   (or pytest tests/test_cuda_ops.py -rs)
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import stableops  # noqa: F401  (loads the library, registers fakes)
from stableops import ops

from merge_reference import FP8_MAX, fp8_bits, reference

INF = float("inf")
HAS_CUDA = torch.cuda.is_available()
IS_ROCM = torch.version.hip is not None
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU visible")


HAS_GPU_OPS = ops.has_op("stableops_cuda_utils", "get_device_attribute")
requires_gpu_build = pytest.mark.skipif(
    not HAS_GPU_OPS, reason="stableops was built without GPU support"
)


# --------------------------------------------------------------------------
# Thin accessors: prefer the stableops.ops wrappers, fall back to torch.ops.
# --------------------------------------------------------------------------
def merge_attn_states(out, out_lse, p, pl, s, sl, **kwargs):
    if hasattr(ops, "merge_attn_states"):
        return ops.merge_attn_states(out, out_lse, p, pl, s, sl, **kwargs)
    return torch.ops.stableops.merge_attn_states(out, out_lse, p, pl, s, sl, **kwargs)


def cuda_view(t):
    if hasattr(ops, "get_cuda_view_from_cpu_tensor"):
        return ops.get_cuda_view_from_cpu_tensor(t)
    return torch.ops.stableops.get_cuda_view_from_cpu_tensor(t)


def device_attribute(attr, dev):
    if hasattr(ops, "get_device_attribute"):
        return ops.get_device_attribute(attr, dev)
    return torch.ops.stableops_cuda_utils.get_device_attribute(attr, dev)


def max_shared_optin(dev):
    if hasattr(ops, "get_max_shared_memory_per_block_device_attribute"):
        return ops.get_max_shared_memory_per_block_device_attribute(dev)
    return torch.ops.stableops_cuda_utils.get_max_shared_memory_per_block_device_attribute(
        dev
    )


# ==========================================================================
# merge_attn_states (CUDA kernel)
# ==========================================================================
TOL = {  # (atol, rtol) of the values
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
}
LSE_TOL = (1e-5, 1e-5)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
PACK = {torch.float32: 4, torch.float16: 8, torch.bfloat16: 8}



def make_inputs(t, h, d, dtype, seed=0, special=True, device="cuda"):
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(t, h, d, generator=g).to(dtype)
    s = torch.randn(t, h, d, generator=g).to(dtype)
    pl = torch.randn(h, t, generator=g) * 4
    sl = torch.randn(h, t, generator=g) * 4
    if special and t * h > 0:
        flat_p, flat_s = pl.view(-1), sl.view(-1)
        n = flat_p.numel()
        idx = torch.randperm(n, generator=g)
        k = max(1, n // 10)
        flat_p[idx[:k]] = -INF  # prefix empty
        flat_s[idx[k : 2 * k]] = -INF  # suffix empty
        flat_p[idx[2 * k : 3 * k]] = INF  # +inf counts as -inf
        flat_s[idx[3 * k : 4 * k]] = INF
        both = idx[4 * k : 5 * k]
        flat_p[both] = -INF  # both empty -> prefix passes through
        flat_s[both] = -INF
        if n > 5 * k:
            i = idx[5 * k]
            flat_p[i], flat_s[i] = INF, -INF  # both "empty" via +inf
        # large magnitudes / large differences
        if n > 5 * k + 2:
            flat_p[idx[5 * k + 1]], flat_s[idx[5 * k + 1]] = 1.0e4, 1.0e4 + 1.0
            flat_p[idx[5 * k + 2]], flat_s[idx[5 * k + 2]] = 80.0, -80.0
    return {k: v.to(device) for k, v in dict(p=p, s=s, pl=pl, sl=sl).items()}


def check_result(out, out_lse, x, dtype):
    ref_out, ref_lse = reference(x["p"], x["pl"], x["s"], x["sl"])
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=rtol)
    # Rows where both LSEs are empty pass the prefix through bit-exactly.
    pl, sl = x["pl"].clone(), x["sl"].clone()
    pl[pl == INF] = -INF
    sl[sl == INF] = -INF
    both = ((pl == -INF) & (sl == -INF)).t()  # [T, H]
    if both.any():
        assert torch.equal(out[both], x["p"][both])
    if out_lse is not None:
        torch.testing.assert_close(
            out_lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1]
        )


SHAPES = [
    (0, 4, 128),
    (1, 1, 8),
    (1, 32, 128),
    (3, 5, 40),  # 5 packs per row for 16-bit types: rows straddle warps
    (7, 3, 64),
    (64, 8, 256),
    (33, 16, 512),
    (5, 2, 2048),  # 256-512 packs per row: the in-row loop
    (2, 3, 4096),
]


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("with_lse", [True, False], ids=["lse", "nolse"])
def test_merge_matches_reference(dtype, shape, with_lse):
    t, h, d = shape
    x = make_inputs(t, h, d, dtype, seed=t * 131 + h * 7 + d)
    out = torch.full((t, h, d), float("nan"), dtype=dtype, device="cuda")
    out_lse = (
        torch.full((h, t), float("nan"), device="cuda") if with_lse else None
    )
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    torch.cuda.synchronize()
    check_result(out, out_lse, x, dtype)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_merge_smallest_head_size(dtype):
    d = PACK[dtype]  # the smallest legal head size: one pack per row
    x = make_inputs(17, 3, d, dtype)
    out = torch.empty(17, 3, d, dtype=dtype, device="cuda")
    out_lse = torch.empty(3, 17, device="cuda")
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    check_result(out, out_lse, x, dtype)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_merge_large_with_partial_last_block(dtype):
    # A large problem where T*H is not a multiple of the rows per block, so
    # the last block is partial.
    t, h, d = 4099, 33, 128
    x = make_inputs(t, h, d, dtype, seed=3)
    out = torch.full((t, h, d), float("nan"), dtype=dtype, device="cuda")
    out_lse = torch.full((h, t), float("nan"), device="cuda")
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    check_result(out, out_lse, x, dtype)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_merge_noncontiguous_lse_and_values(dtype):
    t, h, d = 37, 6, 128
    x = make_inputs(t, h, d, dtype, seed=11)
    # LSEs: transposes of [T, H] buffers (strides (1, H)) and a strided slice.
    pl = x["pl"].t().contiguous().t()
    sl_big = torch.empty(h, 2 * t, device="cuda")
    sl_big[:, ::2] = x["sl"]
    sl = sl_big[:, ::2]
    assert not pl.is_contiguous() and not sl.is_contiguous()
    out_lse_big = torch.full((t, h), float("nan"), device="cuda")
    out_lse = out_lse_big.t()  # [H, T] with strides (1, H)
    # Values: last dim contiguous, padded head and token strides.
    p_big = torch.zeros(t, h, 2 * d, dtype=dtype, device="cuda")
    p_big[..., :d] = x["p"]
    p = p_big[..., :d]
    s_big = torch.zeros(t, h + 2, d, dtype=dtype, device="cuda")
    s_big[:, 1 : h + 1] = x["s"]
    s = s_big[:, 1 : h + 1]
    out_big = torch.full((t, h, 3 * d), float("nan"), dtype=dtype, device="cuda")
    out = out_big[..., d : 2 * d]
    merge_attn_states(out, out_lse, p, pl, s, sl)
    check_result(out, out_lse, {**x, "pl": pl, "sl": sl}, dtype)
    # Nothing outside the views was written.
    assert torch.isnan(out_big[..., :d]).all() and torch.isnan(out_big[..., 2 * d :]).all()


@requires_cuda
def test_merge_poisoned_outputs_fully_overwritten():
    t, h, d = 129, 7, 64
    x = make_inputs(t, h, d, torch.bfloat16, seed=5, special=False)
    out = torch.full((t, h, d), float("nan"), dtype=torch.bfloat16, device="cuda")
    out_lse = torch.full((h, t), float("nan"), device="cuda")
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    assert not torch.isnan(out).any()
    assert not torch.isnan(out_lse).any()
    check_result(out, out_lse, x, torch.bfloat16)


@requires_cuda
def test_merge_empty_tokens_launches_nothing():
    x = make_inputs(0, 8, 128, torch.float16)
    out = torch.empty(0, 8, 128, dtype=torch.float16, device="cuda")
    out_lse = torch.empty(8, 0, device="cuda")
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    torch.cuda.synchronize()
    assert out.shape == (0, 8, 128)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_merge_head_size_not_multiple_of_vector_width(dtype):
    d = PACK[dtype] + PACK[dtype] // 2  # 12 for 16-bit, 6 for fp32
    x = make_inputs(4, 2, d, dtype)
    out = torch.empty(4, 2, d, dtype=dtype, device="cuda")
    with pytest.raises(RuntimeError, match="head_size"):
        merge_attn_states(out, None, x["p"], x["pl"], x["s"], x["sl"])


@requires_cuda
def test_merge_misaligned_pointer_rejected():
    t, h, d = 4, 2, 64
    x = make_inputs(t, h, d, torch.float16)
    flat = torch.zeros(t * h * d + 1, dtype=torch.float16, device="cuda")
    p = flat[1:].view(t, h, d)  # 2-byte aligned only
    p.copy_(x["p"])
    out = torch.empty(t, h, d, dtype=torch.float16, device="cuda")
    with pytest.raises(RuntimeError, match="aligned"):
        merge_attn_states(out, None, p, x["pl"], x["s"], x["sl"])


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("prefill", [0, 1, 17, 40], ids=lambda n: f"prefill{n}")
def test_merge_prefill_tokens_with_context(dtype, prefill):
    """Tokens past prefill_tokens_with_context take the suffix and its LSE
    unchanged (bit for bit); the rest merge."""
    t, h, d = 37, 5, 128
    x = make_inputs(t, h, d, dtype, seed=prefill + 1)
    out = torch.full((t, h, d), float("nan"), dtype=dtype, device="cuda")
    out_lse = torch.full((h, t), float("nan"), device="cuda")
    merge_attn_states(out, out_lse, x["p"], x["pl"], x["s"], x["sl"], prefill_tokens_with_context=prefill)
    n = min(prefill, t)
    assert torch.equal(out[n:], x["s"][n:])
    assert torch.equal(out_lse[:, n:], x["sl"][:, n:])
    ref_out, ref_lse = reference(x["p"], x["pl"], x["s"], x["sl"], prefill_tokens_with_context=prefill)
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=rtol)
    torch.testing.assert_close(out_lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1])


@requires_cuda
@pytest.mark.parametrize("fp8", list(FP8_MAX), ids=["e4m3fn", "e4m3fnuz"])
@pytest.mark.parametrize("prefill", [None, 9], ids=["all", "prefill9"])
# 0.37: the kernel's ScaleDivisor path. The others lie outside its range
# (csrc/core/scale_div.h), so the kernel takes the plain division there:
# 2^-90 and 2^101 saturate or flush every value of these inputs, which either
# path gets right (a kernel forced onto ScaleDivisor at every scale passes
# them; checked on an H100), while at 2^-130 (subnormal: 1 / s overflows) the
# ScaleDivisor quotient of a zero is 0 * inf = NaN, so the zero rows below
# fail unless the kernel divides.
@pytest.mark.parametrize("scale", [0.37, 2.0**-90, 2.0**101, 2.0**-130], ids=["divisor", "tiny", "huge", "subnormal"])
def test_merge_fp8_output_bit_exact(fp8, prefill, scale):
    """FP8 output = torch's conversion of clamp(merged / scale), bit-exact
    against the float32 merge of the same inputs on the same GPU."""
    t, h, d = 33, 6, 128
    x = make_inputs(t, h, d, torch.float32, seed=21)
    x["p"] *= 300  # past the format's MAX: saturates
    for k, zero in ((0, 0.0), (1, -0.0), (12, 0.0)):  # tokens whose merge is a (signed) zero
        x["p"][k] = zero
        x["s"][k] = zero
    merged = torch.empty(t, h, d, device="cuda")
    merge_attn_states(merged, None, x["p"], x["pl"], x["s"], x["sl"], prefill_tokens_with_context=prefill)
    out = torch.empty(t, h, d, dtype=fp8, device="cuda")
    lse = torch.empty(h, t, device="cuda")
    merge_attn_states(out, lse, x["p"], x["pl"], x["s"], x["sl"], prefill_tokens_with_context=prefill,
                      output_scale=torch.tensor([scale], device="cuda"))
    assert torch.equal(out.view(torch.uint8).cpu(), fp8_bits(merged.cpu(), scale, fp8))
    ref_lse = reference(x["p"], x["pl"], x["s"], x["sl"], prefill_tokens_with_context=prefill)[1]
    torch.testing.assert_close(lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1])


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_merge_fp8_output_half_inputs_in_a_graph(dtype):
    """FP8 output from half-precision inputs, captured in a CUDA graph: within
    one FP8 step of the float64 reference."""
    t, h, d = 64, 8, 128
    x = make_inputs(t, h, d, dtype, seed=4)
    out = torch.empty(t, h, d, dtype=torch.float8_e4m3fn, device="cuda")
    scale = torch.tensor([0.5], device="cuda")
    merge_attn_states(out, None, x["p"], x["pl"], x["s"], x["sl"], output_scale=scale)  # warm-up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        merge_attn_states(out, None, x["p"], x["pl"], x["s"], x["sl"], output_scale=scale)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    ref = (reference(x["p"], x["pl"], x["s"], x["sl"])[0] / 0.5).clamp(-448, 448)
    got = out.double()
    assert ((got - ref).abs() <= ref.abs() * 2**-3 + 2**-9).all()


@requires_cuda
def test_merge_matches_cpu_kernel():
    t, h, d = 19, 4, 64
    x = make_inputs(t, h, d, torch.float32, seed=9, device="cpu")
    out_cpu = torch.empty(t, h, d)
    lse_cpu = torch.empty(h, t)
    merge_attn_states(out_cpu, lse_cpu, x["p"], x["pl"], x["s"], x["sl"])
    xg = {k: v.cuda() for k, v in x.items()}
    out = torch.empty(t, h, d, device="cuda")
    lse = torch.empty(h, t, device="cuda")
    merge_attn_states(out, lse, xg["p"], xg["pl"], xg["s"], xg["sl"])
    torch.testing.assert_close(out.cpu(), out_cpu, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse.cpu(), lse_cpu, atol=1e-5, rtol=1e-5)


@requires_cuda
def test_merge_runs_on_current_stream():
    """Inputs are produced on a side stream after a long sleep; if the kernel
    ran on any other stream it would read the stale inputs."""
    t, h, d = 256, 8, 128
    dtype = torch.bfloat16
    x = make_inputs(t, h, d, dtype, seed=21)
    stale = {k: torch.zeros_like(v) for k, v in x.items()}
    out = torch.zeros(t, h, d, dtype=dtype, device="cuda")
    out_lse = torch.zeros(h, t, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time on this stream
        for k in x:
            stale[k].copy_(x[k])
        merge_attn_states(
            out, out_lse, stale["p"], stale["pl"], stale["s"], stale["sl"]
        )
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    check_result(out, out_lse, x, dtype)


@requires_cuda
def test_merge_cuda_graph_capture_and_replay():
    t, h, d = 48, 8, 128
    dtype = torch.float16
    x = make_inputs(t, h, d, dtype, seed=1)
    out = torch.empty(t, h, d, dtype=dtype, device="cuda")
    out_lse = torch.empty(h, t, device="cuda")
    args = (out, out_lse, x["p"], x["pl"], x["s"], x["sl"])
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture
        merge_attn_states(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        merge_attn_states(*args)
    # New data in the same buffers, then replay.
    y = make_inputs(t, h, d, dtype, seed=2)
    for k in x:
        x[k].copy_(y[k])
    out.fill_(float("nan"))
    out_lse.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check_result(out, out_lse, y, dtype)


@requires_cuda
@pytest.mark.parametrize("with_lse", [True, False], ids=["lse", "nolse"])
def test_merge_opcheck(with_lse):
    t, h, d = 9, 4, 64
    x = make_inputs(t, h, d, torch.bfloat16, seed=4)
    out = torch.empty(t, h, d, dtype=torch.bfloat16, device="cuda")
    out_lse = torch.empty(h, t, device="cuda") if with_lse else None
    torch.library.opcheck(
        torch.ops.stableops.merge_attn_states.default,
        (out, out_lse, x["p"], x["pl"], x["s"], x["sl"]),
    )


@requires_cuda
def test_merge_torch_compile_fullgraph():
    t, h, d = 33, 4, 128
    dtype = torch.bfloat16
    x = make_inputs(t, h, d, dtype, seed=8)

    def fn(p, pl, s, sl):
        out = torch.empty_like(p)
        out_lse = torch.empty_like(pl)
        torch.ops.stableops.merge_attn_states(out, out_lse, p, pl, s, sl)
        return out * 1, out_lse + 0  # something for inductor to fuse around

    compiled = torch.compile(fn, fullgraph=True)
    out, out_lse = compiled(x["p"], x["pl"], x["s"], x["sl"])
    check_result(out, out_lse, x, dtype)


# ==========================================================================
# get_cuda_view_from_cpu_tensor (UVA)
# ==========================================================================
@requires_cuda
def test_uva_view_basic_and_device_index():
    cpu = torch.arange(1000, dtype=torch.float32).pin_memory()
    view = cuda_view(cpu)
    assert view.device.type == "cuda"
    assert view.device.index is not None
    assert view.device.index == torch.cuda.current_device()
    assert view.shape == cpu.shape and view.stride() == cpu.stride()
    assert view.dtype == cpu.dtype
    assert torch.equal(view.cpu(), cpu)


@requires_cuda
def test_uva_gpu_write_seen_on_cpu_and_cpu_write_seen_on_gpu():
    cpu = torch.zeros(4096, dtype=torch.int64).pin_memory()
    view = cuda_view(cpu)
    view.add_(torch.arange(4096, device="cuda"))  # GPU kernel writes host memory
    torch.cuda.synchronize()
    assert torch.equal(cpu, torch.arange(4096))
    cpu[17] = -5  # CPU write, then a GPU read
    cpu[4095] = 123
    assert view[17].item() == -5
    assert view[4095].item() == 123
    assert view.sum().item() == torch.arange(4096).sum().item() - 17 - 5 - 4095 + 123


@requires_cuda
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.uint8, torch.int64], ids=str
)
def test_uva_strided_offset_view_preserves_layout(dtype):
    base = torch.arange(10 * 8).reshape(10, 8).to(dtype).pin_memory()
    sl = base[3:, ::2]
    assert sl.storage_offset() == 24
    view = cuda_view(sl)
    assert view.shape == sl.shape
    assert view.stride() == sl.stride()
    assert view.storage_offset() == sl.storage_offset()
    assert torch.equal(view.cpu(), sl)
    view.fill_(7)  # writes only the viewed elements
    torch.cuda.synchronize()
    expected = torch.arange(10 * 8).reshape(10, 8).to(dtype)
    expected[3:, ::2] = 7
    assert torch.equal(base, expected)


@requires_cuda
def test_uva_view_keeps_host_memory_alive():
    n = 1 << 20
    pattern = torch.randint(-(2**30), 2**30, (n,), dtype=torch.int32)
    cpu = pattern.clone().pin_memory()
    view = cuda_view(cpu[16:])  # an offset view into the pinned block
    del cpu
    gc.collect()
    torch.cuda.empty_cache()
    # Churn the pinned allocator: reuse of the freed block would clobber it.
    churn = [torch.full((n,), 99, dtype=torch.int32).pin_memory() for _ in range(4)]
    assert torch.equal(view.cpu(), pattern[16:])
    assert view[0].item() == pattern[16].item()
    del churn, view
    gc.collect()


@requires_cuda
def test_uva_pageable_memory_raises():
    cpu = torch.ones(1024)
    assert not cpu.is_pinned()
    with pytest.raises(RuntimeError, match="pinned"):
        cuda_view(cpu)
    # The failure left no sticky CUDA error behind.
    torch.cuda.synchronize()
    assert torch.ones(4, device="cuda").sum().item() == 4


@requires_cuda
@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "pageable"])
def test_uva_empty_tensor(pinned):
    cpu = torch.empty(0, 5, dtype=torch.float16)
    if pinned:
        cpu = cpu.pin_memory()
    view = cuda_view(cpu)
    assert view.device.type == "cuda" and view.device.index is not None
    assert view.device.index == torch.cuda.current_device()
    assert view.shape == (0, 5) and view.stride() == cpu.stride()
    assert view.dtype == torch.float16


@requires_gpu_build
def test_uva_fake_rejects_gpu_input_with_the_kernels_message():
    """Traced with a GPU tensor, the fake raises what the kernel raises, at
    trace time. Needs no GPU: the tensor is a fake one."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, device="cuda")
        with pytest.raises(RuntimeError, match="expected a CPU tensor, got a tensor on cuda:0"):
            torch.ops.stableops.get_cuda_view_from_cpu_tensor(x)


@requires_cuda
def test_uva_rejects_cuda_input():
    # Registered under CUDA too, so the kernel's check answers, not the
    # dispatcher's "could not run ... from the 'CUDA' backend".
    with pytest.raises(RuntimeError, match="expected a CPU tensor, got a tensor on cuda:0"):
        cuda_view(torch.ones(4, device="cuda"))


# ==========================================================================
# Device attributes
# ==========================================================================
CUDA_DEV_ATTR_MULTIPROCESSOR_COUNT = 16  # cudaDevAttrMultiProcessorCount


@requires_cuda
@pytest.mark.skipif(IS_ROCM, reason="attribute 16 is a CUDA enum value; HIP numbers differ")
def test_device_attribute_sm_count():
    for dev in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(dev)
        assert (
            device_attribute(CUDA_DEV_ATTR_MULTIPROCESSOR_COUNT, dev)
            == props.multi_processor_count
        )
    cur = torch.cuda.current_device()
    assert device_attribute(CUDA_DEV_ATTR_MULTIPROCESSOR_COUNT, -1) == (
        torch.cuda.get_device_properties(cur).multi_processor_count
    )


@requires_cuda
def test_max_shared_memory_optin():
    for dev in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(dev)
        assert max_shared_optin(dev) == props.shared_memory_per_block_optin
        assert max_shared_optin(dev) >= props.shared_memory_per_block
    cur = torch.cuda.current_device()
    assert max_shared_optin(-1) == (
        torch.cuda.get_device_properties(cur).shared_memory_per_block_optin
    )


@requires_cuda
def test_device_attribute_bad_device_id():
    with pytest.raises(RuntimeError, match="1000"):
        device_attribute(CUDA_DEV_ATTR_MULTIPROCESSOR_COUNT, 1000)
    with pytest.raises(RuntimeError, match="1000"):
        max_shared_optin(1000)
    n = torch.cuda.device_count()
    with pytest.raises(RuntimeError, match=str(n)):
        device_attribute(CUDA_DEV_ATTR_MULTIPROCESSOR_COUNT, n)


@requires_cuda
def test_device_attribute_bad_attribute():
    with pytest.raises(RuntimeError, match="100000"):
        device_attribute(100000, 0)
    # No sticky error left behind.
    assert torch.ones(4, device="cuda").sum().item() == 4


@requires_cuda
def test_device_attribute_cache_thread_safe():
    expected = max_shared_optin(0)
    results, errors = [], []

    def worker():
        try:
            for _ in range(200):
                results.append(max_shared_optin(0))
                results.append(max_shared_optin(-1))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    if torch.cuda.current_device() == 0:
        assert set(results) == {expected}


@requires_gpu_build
def test_no_visible_gpu_raises_clear_error():
    """With CUDA_VISIBLE_DEVICES="" the GPU ops raise RuntimeError, no crash.
    Runs on CPU-only machines too, as long as the library has the GPU ops."""
    code = textwrap.dedent(
        """
        import torch, stableops
        results = []
        calls = [
            lambda: torch.ops.stableops_cuda_utils.get_device_attribute(16, 0),
            lambda: torch.ops.stableops_cuda_utils.get_device_attribute(16, -1),
            lambda: torch.ops.stableops_cuda_utils.get_max_shared_memory_per_block_device_attribute(0),
            lambda: torch.ops.stableops.get_cuda_view_from_cpu_tensor(torch.ones(4)),
        ]
        for call in calls:
            try:
                call()
                results.append("NO-ERROR")
            except RuntimeError as e:
                results.append("RuntimeError:" + str(e).replace("\\n", " "))
        print("RESULTS=" + repr(results))
        """
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HIP_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"subprocess crashed: {proc.returncode}\n{proc.stderr}"
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULTS=")]
    assert line, proc.stdout + proc.stderr
    results = eval(line[0][len("RESULTS=") :])  # noqa: S307 - our own output
    for r in results:
        assert r.startswith("RuntimeError:"), r
        assert "GPU" in r, r


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

"""Tests of the quantization ops (stableops::static_scaled_fp8_quant,
dynamic_scaled_fp8_quant, dynamic_per_token_scaled_fp8_quant,
static_scaled_int8_quant, dynamic_scaled_int8_quant) on the CPU and, where a
GPU is visible, on CUDA/ROCm.

Every result is compared bit for bit with a reference written with torch ops
(below): quotients x / s are IEEE float32 divisions, computed here as a
float64 division rounded to float32 (exact: 53 >= 2 * 24 + 2 bits makes the
double rounding innocuous), so the reference does not depend on how torch
implements float32 division.
"""

from __future__ import annotations

import os
import sys
import tempfile

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=os.environ["TEST_TMPDIR"])

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stableops
from stableops import ops

from fake_parity import assert_same_decision

HAS_GPU = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(
    not HAS_GPU, reason="no CUDA/ROCm GPU visible: the GPU kernels run only on a GPU machine"
)
DEVICES = ["cpu", pytest.param("cuda", marks=requires_gpu)]

IN_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FP8 = {"e4m3fn": torch.float8_e4m3fn, "e4m3fnuz": torch.float8_e4m3fnuz}
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}
NAN = float("nan")
INF = float("inf")


# ==========================================================================
# Reference (float32 semantics of the contract, written with torch ops).
# ==========================================================================
def div32(x: torch.Tensor, s: torch.Tensor | float) -> torch.Tensor:
    """The IEEE float32 quotient x / s (both float32-valued)."""
    s64 = s.double() if isinstance(s, torch.Tensor) else float(s)
    return (x.double() / s64).float()


def min_scale(dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(1.0 / (FP8_MAX[dtype] * 512.0), dtype=torch.float32)


def ref_fp8(x: torch.Tensor, s: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    m = FP8_MAX[dtype]
    return div32(x.float().cpu(), s.float().cpu()).clamp(-m, m).to(dtype)


def ref_fp8_dynamic_scale(amax: torch.Tensor, dtype: torch.dtype, ub: torch.Tensor | None = None) -> torch.Tensor:
    """max(min(amax, ub) / MAX, 1 / (MAX * 512)), NaN propagating."""
    if ub is not None:
        amax = torch.clamp(amax, max=ub.float().cpu().reshape(()))
    return torch.clamp(div32(amax, FP8_MAX[dtype]), min=min_scale(dtype))


def rows2d(x: torch.Tensor) -> torch.Tensor:
    return x.float().cpu().reshape(-1, x.shape[-1])


def ref_dynamic_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    amax = x.float().cpu().abs().amax() if x.numel() else torch.tensor(0.0)
    s = ref_fp8_dynamic_scale(amax, dtype)
    return ref_fp8(x, s, dtype), s.reshape(1)


def ref_per_token_fp8(
    x: torch.Tensor, dtype: torch.dtype, ub: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    x2 = rows2d(x)
    amax = x2.abs().amax(dim=1, keepdim=True) if x2.shape[1] else torch.zeros(x2.shape[0], 1)
    s = ref_fp8_dynamic_scale(amax, dtype, ub)
    return ref_fp8(x2, s, dtype).reshape(x.shape), s


def sat8(v: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(v, nan=0.0).clamp(-128, 127).to(torch.int8)


def sat32(v: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(v, nan=0.0).clamp(-(2.0**31), 2147483520.0)


def ref_static_int8(x: torch.Tensor, s: torch.Tensor, azp: torch.Tensor | None) -> torch.Tensor:
    v = torch.round(div32(x.float().cpu(), s.float().cpu()))
    if azp is not None:
        v = v + azp.cpu().float()
    return sat8(v)


def ref_dynamic_int8(
    x: torch.Tensor, symmetric: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    x2 = rows2d(x)
    t, h = x2.shape
    if h == 0:
        z = torch.zeros(t, 1)
        return torch.zeros(x.shape, dtype=torch.int8), z, None if symmetric else z.int()
    if symmetric:
        s = div32(x2.abs().amax(dim=1, keepdim=True), 127.0)
        azp = torch.zeros_like(s)
    else:
        mx = x2.amax(dim=1, keepdim=True)
        mn = x2.amin(dim=1, keepdim=True)
        s = div32(mx - mn, 255.0)
        azp = sat32(torch.round(-128.0 - div32(mn, s)))
    zero = s == 0
    azp = torch.where(zero, 0.0, azp)
    q = torch.where(zero, 0.0, torch.round(div32(x2, s)) + azp)
    return sat8(q).reshape(x.shape), s, None if symmetric else azp.to(torch.int32)


# ==========================================================================
# Comparison helpers.
# ==========================================================================
def assert_codes_equal(got: torch.Tensor, want: torch.Tensor, what: str = "result") -> None:
    """Same 8-bit codes. A GPU's float32 NaN has no defined sign (NVIDIA's is
    always positive, x86's default NaN negative), so on a GPU an e4m3fn NaN
    may differ from the reference in its sign bit only."""
    assert got.shape == want.shape, (got.shape, want.shape)
    g = got.cpu().contiguous().view(torch.uint8).to(torch.int32)
    w = want.cpu().contiguous().view(torch.uint8).to(torch.int32)
    if got.device.type != "cpu" and got.dtype == torch.float8_e4m3fn:
        nan_w = (w & 0x7F) == 0x7F
        g = torch.where(nan_w & ((g & 0x7F) == 0x7F), w, g)
    bad = (g != w).nonzero()
    assert bad.numel() == 0, (
        f"{what}: {bad.shape[0]} of {w.numel()} codes differ; first at {bad[0].tolist()}: "
        f"got {g[tuple(bad[0])].item():#04x}, want {w[tuple(bad[0])].item():#04x}"
    )


def assert_float_equal(got: torch.Tensor, want: torch.Tensor, what: str = "scale") -> None:
    torch.testing.assert_close(got.cpu(), want.cpu().reshape(got.shape), rtol=0, atol=0, equal_nan=True, msg=what)


# ==========================================================================
# Inputs.
# ==========================================================================
def make_x(
    shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0, device: str = "cpu", special: bool = True
) -> torch.Tensor:
    """Values over many magnitudes (quotients cover the FP8 range, its
    subnormals and saturation), zeros of both signs and infinities."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.pow(10.0, torch.empty(shape).uniform_(-5, 3, generator=g))
    flat = x.view(-1)
    if special and flat.numel() >= 8:
        idx = torch.randperm(flat.numel(), generator=g)[:4]
        flat[idx] = torch.tensor([0.0, -0.0, INF, -INF])
    return x.to(dtype).to(device)


def strided_rows(x: torch.Tensor, pad: int = 24, offset: int = 8) -> torch.Tensor:
    """The same values as a view whose rows are padded (row stride H + pad)
    and whose data starts `offset` elements into its storage."""
    h = x.shape[-1]
    big = torch.zeros(*x.shape[:-1], h + pad, dtype=x.dtype, device=x.device)
    view = big[..., offset : offset + h]
    view.copy_(x)
    return view


def empty_like_result(x: torch.Tensor, dtype: torch.dtype, strided: bool = False) -> torch.Tensor:
    """A result buffer filled with a sentinel code (so unwritten elements show)."""
    shape = list(x.shape)
    if strided:
        big = torch.empty(*shape[:-1], shape[-1] + 40, dtype=dtype, device=x.device)
        big.view(torch.uint8).fill_(0x55)
        return big[..., 16 : 16 + shape[-1]]
    r = torch.empty(shape, dtype=dtype, device=x.device)
    r.view(torch.uint8).fill_(0x55)
    return r


CPU_SHAPES = [(1, 1), (3, 7), (4, 64), (17, 100), (2, 3, 40), (9, 520)]


# ==========================================================================
# static_scaled_fp8_quant
# ==========================================================================
def static_scales(kind: str, t: int, h: int, seed: int) -> tuple[torch.Tensor, list[int] | None]:
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=g) * 3 + 0.01

    if kind == "tensor":
        return rand(1), None
    if kind == "token":
        return rand(t, 1), None
    if kind == "channel":
        return rand(1, h), None
    gm, gn = 2, 3
    return rand(-(-t // gm), -(-h // gn)), [gm, gn]


def expand_static_scale(s: torch.Tensor, group: list[int] | None, t: int, h: int) -> torch.Tensor:
    """The [t, h] scale of every element."""
    if s.numel() == 1:
        return s.reshape(1, 1).expand(t, h)
    if group is None:
        return s.expand(t, h)
    gm, gn = group
    return s.repeat_interleave(gm, 0)[:t].repeat_interleave(gn, 1)[:, :h]


@pytest.mark.parametrize("fmt", list(FP8))
@pytest.mark.parametrize("kind", ["tensor", "token", "channel", "group"])
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", CPU_SHAPES, ids=str)
def test_static_fp8_cpu(shape: tuple[int, ...], dt: str, kind: str, fmt: str) -> None:
    run_static_fp8(shape, IN_DTYPES[dt], kind, FP8[fmt], "cpu", strided=sum(shape) % 2 == 0)


def run_static_fp8(
    shape: tuple[int, ...], dtype: torch.dtype, kind: str, fp8: torch.dtype, device: str, strided: bool
) -> None:
    x = make_x(shape, dtype, seed=sum(shape), device=device)
    t, h = x.numel() // x.shape[-1], x.shape[-1]
    s, group = static_scales(kind, t, h, seed=len(shape))
    if strided:
        x = strided_rows(x)
    out = empty_like_result(x, fp8, strided=strided)
    ops.static_scaled_fp8_quant(out, x, s.to(device), group)
    want = ref_fp8(rows2d(x), expand_static_scale(s, group, t, h), fp8).reshape(x.shape)
    assert_codes_equal(out, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fmt", list(FP8))
def test_static_fp8_every_code_and_midpoint(fmt: str, device: str) -> None:
    """Every finite FP8 value, the midpoints between neighbours (ties go to
    even) and their float32 neighbours, scaled by s and divided back: only
    an exact division and conversion give torch's codes for all of them."""
    fp8 = FP8[fmt]
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8).float()
    v = codes[codes.isfinite()].unique()
    mids = (v[1:] + v[:-1]) / 2
    near = torch.cat([mids, torch.nextafter(mids, mids + 1), torch.nextafter(mids, mids - 1)])
    base = torch.cat([v, near, torch.tensor([FP8_MAX[fp8] * 1.5, -1e30, 3e-10])])
    for s in [1.0, 0.7431, 3.0e-3]:
        x = (base.double() * s).float().reshape(1, -1)
        scale = torch.tensor([s])
        for dtype in IN_DTYPES.values():  # 16-bit inputs: the values they hold
            xd = x.to(dtype).to(device)
            out = torch.empty(x.shape, dtype=fp8, device=device)
            ops.static_scaled_fp8_quant(out, xd, scale.to(device))
            assert_codes_equal(out, ref_fp8(xd, scale, fp8))


def test_static_fp8_group_minus_one_is_whole_dim() -> None:
    x = make_x((6, 10), torch.float32, seed=1)
    s = torch.rand(3, 1) + 0.5
    a = torch.empty(6, 10, dtype=torch.float8_e4m3fn)
    b = torch.empty_like(a)
    ops.static_scaled_fp8_quant(a, x, s, [2, -1])
    ops.static_scaled_fp8_quant(b, x, s, [2, 10])
    assert_codes_equal(a, b)
    assert_codes_equal(a, ref_fp8(x, s.repeat_interleave(2, 0), torch.float8_e4m3fn))


def test_static_fp8_zero_scale_and_nan() -> None:
    x = torch.tensor([[1.0, -2.0, 0.0, NAN, INF]])
    for s in [0.0, NAN, INF]:
        scale = torch.tensor([s])
        out = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
        ops.static_scaled_fp8_quant(out, x, scale)
        assert_codes_equal(out, ref_fp8(x, scale, torch.float8_e4m3fn))


# ==========================================================================
# dynamic_scaled_fp8_quant
# ==========================================================================
@pytest.mark.parametrize("fmt", list(FP8))
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", CPU_SHAPES + [(0, 16)], ids=str)
def test_dynamic_fp8_cpu(shape: tuple[int, ...], dt: str, fmt: str) -> None:
    run_dynamic_fp8(shape, IN_DTYPES[dt], FP8[fmt], "cpu", strided=sum(shape) % 2 == 1, special=False)


def run_dynamic_fp8(
    shape: tuple[int, ...], dtype: torch.dtype, fp8: torch.dtype, device: str, strided: bool, special: bool
) -> None:
    x = make_x(shape, dtype, seed=sum(shape) + 1, device=device, special=special)
    if strided:
        x = strided_rows(x)
    out = empty_like_result(x, fp8, strided=strided)
    scale = torch.full((1,), -7.0, device=device)  # the kernel must not rely on it
    ops.dynamic_scaled_fp8_quant(out, x, scale)
    want, want_scale = ref_dynamic_fp8(x, fp8)
    assert_float_equal(scale, want_scale)
    assert_codes_equal(out, want)


@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_fp8_special_values(device: str) -> None:
    """NaN anywhere makes the scale NaN and every code NaN (torch.amax
    semantics); an infinity makes the scale inf; all zeros give the minimum
    scale; no element gives the minimum scale."""
    fp8 = torch.float8_e4m3fn
    for values in ([0.5, NAN, -3.0], [1.0, -INF, 2.0], [0.0, -0.0, 0.0], []):
        x = torch.tensor(values, dtype=torch.float32).reshape(1, -1).to(device)
        out = torch.empty(x.shape, dtype=fp8, device=device)
        scale = torch.empty(1, device=device)
        ops.dynamic_scaled_fp8_quant(out, x, scale)
        want, want_scale = ref_dynamic_fp8(x, fp8)
        assert_float_equal(scale, want_scale)
        assert_codes_equal(out, want)
    assert scale.item() == pytest.approx(1 / (448 * 512))


def test_dynamic_fp8_threads_do_not_change_result() -> None:
    x = make_x((257, 300), torch.bfloat16, seed=3)
    x[100, 7] = 12345.0  # the maximum sits in one row only
    old = torch.get_num_threads()
    results = []
    try:
        for n in (1, max(2, old)):
            torch.set_num_threads(n)
            out = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
            scale = torch.empty(1)
            ops.dynamic_scaled_fp8_quant(out, x, scale)
            results.append((out.view(torch.uint8).clone(), scale.clone()))
    finally:
        torch.set_num_threads(old)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    assert_float_equal(results[0][1], ref_dynamic_fp8(x, torch.float8_e4m3fn)[1])


# ==========================================================================
# dynamic_per_token_scaled_fp8_quant
# ==========================================================================
@pytest.mark.parametrize("ub", [None, 5.0])
@pytest.mark.parametrize("fmt", list(FP8))
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", CPU_SHAPES + [(0, 16)], ids=str)
def test_per_token_fp8_cpu(shape: tuple[int, ...], dt: str, fmt: str, ub: float | None) -> None:
    run_per_token_fp8(shape, IN_DTYPES[dt], FP8[fmt], ub, "cpu", strided=sum(shape) % 2 == 1)


def run_per_token_fp8(
    shape: tuple[int, ...], dtype: torch.dtype, fp8: torch.dtype, ub: float | None, device: str, strided: bool
) -> None:
    x = make_x(shape, dtype, seed=sum(shape) + 2, device=device)
    if strided:
        x = strided_rows(x)
    t = int(torch.tensor(x.shape[:-1]).prod().item())
    out = empty_like_result(x, fp8, strided=strided)
    scale = torch.full((t, 1), -7.0, device=device)
    ub_t = None if ub is None else torch.tensor([ub], device=device)
    ops.dynamic_per_token_scaled_fp8_quant(out, x, scale, ub_t)
    want, want_scale = ref_per_token_fp8(x, fp8, ub_t)
    assert_float_equal(scale, want_scale)
    assert_codes_equal(out, want)


@pytest.mark.parametrize("device", DEVICES)
def test_per_token_fp8_special_rows(device: str) -> None:
    """A NaN row gets a NaN scale and NaN codes, other rows are unaffected; a
    zero row gets the minimum scale; an infinite row the scale inf (or
    scale_ub); a strided [T, 1] scale view is written in place."""
    x = torch.tensor(
        [[1.0, NAN, 2.0, 3.0], [0.0, 0.0, -0.0, 0.0], [1.0, -INF, 0.5, 2.0], [-600.0, 0.25, 1.0, 2.0]]
    ).to(device)
    for ub in (None, torch.tensor([100.0], device=device)):
        out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=device)
        scale_buf = torch.full((4, 3), -1.0, device=device)
        scale = scale_buf[:, 1:2]  # row stride 3
        ops.dynamic_per_token_scaled_fp8_quant(out, x, scale, ub)
        want, want_scale = ref_per_token_fp8(x, torch.float8_e4m3fn, ub)
        assert_float_equal(scale, want_scale)
        assert_codes_equal(out, want)
        assert (scale_buf[:, 0] == -1).all() and (scale_buf[:, 2] == -1).all()


# ==========================================================================
# static_scaled_int8_quant
# ==========================================================================
@pytest.mark.parametrize("azp", [None, -7, 100])
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", CPU_SHAPES + [(0, 16)], ids=str)
def test_static_int8_cpu(shape: tuple[int, ...], dt: str, azp: int | None) -> None:
    run_static_int8(shape, IN_DTYPES[dt], azp, "cpu", strided=sum(shape) % 2 == 0)


def run_static_int8(shape: tuple[int, ...], dtype: torch.dtype, azp: int | None, device: str, strided: bool) -> None:
    x = make_x(shape, dtype, seed=sum(shape) + 3, device=device)
    if strided:
        x = strided_rows(x)
    scale = torch.tensor([0.0371], device=device)
    azp_t = None if azp is None else torch.tensor([azp], dtype=torch.int32, device=device)
    out = empty_like_result(x, torch.int8, strided=strided)
    ops.static_scaled_int8_quant(out, x, scale, azp_t)
    assert_codes_equal(out, ref_static_int8(x, scale, azp_t))


@pytest.mark.parametrize("device", DEVICES)
def test_static_int8_ties_round_to_even(device: str) -> None:
    """Quotients k + 0.5 and their float32 neighbours, for scales that are not
    powers of two: only an exact division rounds all of them like torch."""
    k = torch.arange(-140, 140, dtype=torch.float64) + 0.5
    for s in [1.0, 0.1, 0.0371, 3.7]:
        x = (k * s).float()
        x = torch.cat([x, torch.nextafter(x, x + 1), torch.nextafter(x, x - 1)]).reshape(3, -1).to(device)
        scale = torch.tensor([s], dtype=torch.float32, device=device)
        for azp in (None, torch.tensor([3], dtype=torch.int32, device=device)):
            out = torch.empty(x.shape, dtype=torch.int8, device=device)
            ops.static_scaled_int8_quant(out, x, scale, azp)
            assert_codes_equal(out, ref_static_int8(x, scale, azp))


def test_static_int8_nan_and_saturation() -> None:
    x = torch.tensor([[NAN, INF, -INF, 1e30, -1e30, 0.0, 126.5, -128.5]])
    for s, azp in [(1.0, None), (1.0, 2**31 - 1), (0.0, -5), (1e-30, 7)]:
        scale = torch.tensor([s])
        azp_t = None if azp is None else torch.tensor([azp], dtype=torch.int32)
        out = torch.empty(x.shape, dtype=torch.int8)
        ops.static_scaled_int8_quant(out, x, scale, azp_t)
        assert_codes_equal(out, ref_static_int8(x, scale, azp_t))
    out = torch.empty(x.shape, dtype=torch.int8)
    ops.static_scaled_int8_quant(out, x, torch.tensor([1.0]), None)
    assert out[0, 0].item() == 0, "NaN quantises to 0"


# ==========================================================================
# dynamic_scaled_int8_quant
# ==========================================================================
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", CPU_SHAPES + [(0, 16)], ids=str)
def test_dynamic_int8_cpu(shape: tuple[int, ...], dt: str, symmetric: bool) -> None:
    run_dynamic_int8(shape, IN_DTYPES[dt], symmetric, "cpu", strided=sum(shape) % 2 == 1)


def run_dynamic_int8(
    shape: tuple[int, ...], dtype: torch.dtype, symmetric: bool, device: str, strided: bool, x: torch.Tensor | None = None
) -> None:
    if x is None:
        x = make_x(shape, dtype, seed=sum(shape) + 4, device=device, special=False)
    if strided:
        x = strided_rows(x)
    t = int(torch.tensor(x.shape[:-1]).prod().item())
    out = empty_like_result(x, torch.int8, strided=strided)
    scale = torch.full((t, 1), -7.0, device=device)
    azp = None if symmetric else torch.full((t, 1), 99, dtype=torch.int32, device=device)
    ops.dynamic_scaled_int8_quant(out, x, scale, azp)
    want, want_scale, want_azp = ref_dynamic_int8(x, symmetric)
    assert_float_equal(scale, want_scale)
    if azp is not None:
        assert want_azp is not None
        assert torch.equal(azp.cpu(), want_azp), (azp, want_azp)
    assert_codes_equal(out, want)


def special_int8_rows(device: str) -> torch.Tensor:
    """Rows: zeros, a constant, a NaN, an infinity, a tiny range far from 0
    (huge zero point, saturated), ties, and an ordinary row."""
    return torch.tensor(
        [
            [0.0, 0.0, -0.0, 0.0, 0.0],
            [3.5, 3.5, 3.5, 3.5, 3.5],
            [1.0, NAN, -2.0, 0.5, 0.25],
            [1.0, INF, -2.0, 0.5, 0.25],
            [1000.0, 1000.0001, 1000.0002, 1000.0, 1000.0001],
            [-127.0, 127.0, 0.5, 1.5, -2.5],
            [0.3, -1.7, 2.9, 0.01, -0.02],
        ],
        device=device,
    )


@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("device", DEVICES)
def test_dynamic_int8_special_rows(device: str, symmetric: bool) -> None:
    x = special_int8_rows(device)
    run_dynamic_int8(tuple(x.shape), x.dtype, symmetric, device, strided=False, x=x)
    out, scale, azp = stableops.dynamic_scaled_int8_quant(x, symmetric)
    assert (out[0] == 0).all() and scale[0].item() == 0.0, "a zero row gives zeros and scale 0"
    assert scale[0].isfinite() and not scale[[0, 1, 4, 5, 6]].isnan().any()
    if azp is not None:
        assert azp[0].item() == 0 and azp[1].item() == 0 and (out[1] == 0).all()


# ==========================================================================
# Functional forms, zero tokens, meta.
# ==========================================================================
def test_functional_forms_allocate_and_leave_inputs_alone() -> None:
    x = make_x((5, 24), torch.bfloat16, seed=9)
    x0 = x.clone()
    s = torch.tensor([0.5])
    assert_codes_equal(stableops.static_scaled_fp8_quant(x, s), ref_fp8(x, s, torch.float8_e4m3fn))
    q, sc = stableops.dynamic_scaled_fp8_quant(x, dtype=torch.float8_e4m3fnuz)
    assert_codes_equal(q, ref_dynamic_fp8(x, torch.float8_e4m3fnuz)[0])
    q, sc = stableops.dynamic_per_token_scaled_fp8_quant(x, torch.tensor([3.0]))
    assert sc.shape == (5, 1)
    assert_codes_equal(q, ref_per_token_fp8(x, torch.float8_e4m3fn, torch.tensor([3.0]))[0])
    assert_codes_equal(stableops.static_scaled_int8_quant(x, s, torch.tensor([1], dtype=torch.int32)),
                       ref_static_int8(x, s, torch.tensor([1])))
    q, sc, azp = stableops.dynamic_scaled_int8_quant(x, symmetric=False)
    assert azp is not None and azp.dtype == torch.int32 and q.dtype == torch.int8
    assert_codes_equal(q, ref_dynamic_int8(x, False)[0])
    assert torch.equal(x, x0)
    for name in ("static_scaled_fp8_quant", "dynamic_scaled_fp8_quant", "dynamic_per_token_scaled_fp8_quant",
                 "static_scaled_int8_quant", "dynamic_scaled_int8_quant"):
        assert name in stableops.functional.__all__ and name in stableops.ops.__all__


def test_zero_tokens_write_nothing() -> None:
    x = torch.empty(0, 32, dtype=torch.float16)
    out8 = torch.empty(0, 32, dtype=torch.float8_e4m3fn)
    ops.static_scaled_fp8_quant(out8, x, torch.tensor([1.0]))
    scale = torch.empty(0, 1)
    ops.dynamic_per_token_scaled_fp8_quant(out8, x, scale, None)
    ops.dynamic_scaled_int8_quant(torch.empty(0, 32, dtype=torch.int8), x, scale, torch.empty(0, 1, dtype=torch.int32))
    one = torch.full((1,), -1.0)
    ops.dynamic_scaled_fp8_quant(out8, x, one)
    assert one.item() == torch.tensor(1 / (448 * 512), dtype=torch.float32).item()


def test_meta_tensors_validate_only() -> None:
    x = torch.empty(4, 16, dtype=torch.bfloat16, device="meta")
    out = torch.empty(4, 16, dtype=torch.float8_e4m3fn, device="meta")
    ops.static_scaled_fp8_quant(out, x, torch.empty(4, 1, device="meta"))
    ops.dynamic_per_token_scaled_fp8_quant(out, x, torch.empty(4, 1, device="meta"), None)
    with pytest.raises(RuntimeError, match="scale must have shape"):
        ops.dynamic_per_token_scaled_fp8_quant(out, x, torch.empty(4, device="meta"), None)


# ==========================================================================
# Bad inputs: the same decision and message from the kernel and the fake,
# and nothing written.
# ==========================================================================
T, H = 4, 16


def _x(dtype: torch.dtype = torch.float32, shape: tuple[int, ...] = (T, H)) -> torch.Tensor:
    return torch.randn(shape).to(dtype)


def _r(dtype: torch.dtype = torch.float8_e4m3fn, shape: tuple[int, ...] = (T, H)) -> torch.Tensor:
    r = torch.empty(shape, dtype=dtype)
    r.view(torch.uint8).fill_(0x55)
    return r


def _good(op: str) -> dict[str, Any]:
    if op == "static_fp8":
        return {"result": _r(), "input": _x(), "scale": torch.tensor([1.0]), "group_shape": None}
    if op == "dynamic_fp8":
        return {"result": _r(), "input": _x(), "scale": torch.empty(1)}
    if op == "per_token_fp8":
        return {"result": _r(), "input": _x(), "scale": torch.empty(T, 1), "scale_ub": None}
    if op == "static_int8":
        return {"result": _r(torch.int8), "input": _x(), "scale": torch.tensor([1.0]), "azp": None}
    return {"result": _r(torch.int8), "input": _x(), "scale": torch.empty(T, 1), "azp": None}


OPS: dict[str, Callable[..., None]] = {
    "static_fp8": ops.static_scaled_fp8_quant,
    "dynamic_fp8": ops.dynamic_scaled_fp8_quant,
    "per_token_fp8": ops.dynamic_per_token_scaled_fp8_quant,
    "static_int8": ops.static_scaled_int8_quant,
    "dynamic_int8": ops.dynamic_scaled_int8_quant,
}


def _transposed() -> torch.Tensor:
    return torch.randn(H, T).t()


def _unviewable_rows() -> torch.Tensor:
    return torch.randn(3, 5, H)[:, :2]  # dims 0 and 1 cannot merge: strides (80, 16)


# (op, changes to the good arguments, expected substrings of the message)
BAD: dict[str, tuple[str, Callable[[], dict[str, Any]], list[str]]] = {
    "fp8_result_int8": ("static_fp8", lambda: {"result": _r(torch.int8)},
                        ["static_scaled_fp8_quant: result must have dtype Float8_e4m3fn or Float8_e4m3fnuz", "got Char"]),
    "fp8_result_e5m2": ("dynamic_fp8", lambda: {"result": _r(torch.float8_e5m2)}, ["result must have dtype", "got Float8_e5m2"]),
    "int8_result_uint8": ("static_int8", lambda: {"result": _r(torch.uint8)}, ["result must have dtype Char (int8)", "got Byte"]),
    "int8_result_fp8": ("dynamic_int8", lambda: {"result": _r()}, ["result must have dtype Char (int8)", "got Float8_e4m3fn"]),
    "input_float64": ("static_fp8", lambda: {"input": _x(torch.float64)}, ["input must have dtype", "got Double"]),
    "input_int32": ("dynamic_int8", lambda: {"input": torch.ones(T, H, dtype=torch.int32)}, ["input must have dtype", "got Int"]),
    "scale_float16": ("static_fp8", lambda: {"scale": torch.tensor([1.0], dtype=torch.float16)}, ["scale must have dtype Float (float32)", "got Half"]),
    "scale_float64_per_token": ("per_token_fp8", lambda: {"scale": torch.empty(T, 1, dtype=torch.float64)}, ["scale must have dtype Float", "got Double"]),
    "int8_scale_int": ("static_int8", lambda: {"scale": torch.tensor([1], dtype=torch.int32)}, ["scale must have dtype Float", "got Int"]),
    "input_1d": ("dynamic_fp8", lambda: {"input": _x(shape=(H,)), "result": _r(shape=(H,))}, ["input must have at least 2 dims", "got 1-D", "[16]"]),
    "shape_mismatch": ("static_int8", lambda: {"result": _r(torch.int8, (T, H + 1))}, ["result shape [4, 17] does not match input shape [4, 16]"]),
    "input_last_dim_strided": ("per_token_fp8", lambda: {"input": _transposed()}, ["input must be contiguous in its last dim", "strides [1, 4]"]),
    "result_last_dim_strided": ("static_fp8", lambda: {"result": _r(shape=(H, T)).t()}, ["result must be contiguous in its last dim"]),
    "rows_not_one_stride": ("dynamic_int8", lambda: {"input": _unviewable_rows(), "result": _r(torch.int8, (3, 2, H)),
                                                      "scale": torch.empty(6, 1)},
                            ["input leading dims of shape [3, 2, 16] and strides [80, 16, 1] cannot be viewed as rows"]),
    "result_rows_overlap": ("static_fp8", lambda: {"result": _r(shape=(1, H)).expand(T, H)}, ["result rows overlap: row stride 0 is less than hidden size 16"]),
    "static_scale_bad_shape": ("static_fp8", lambda: {"scale": torch.ones(2, 2)},
                               ["scale shape [2, 2] is neither one element (per-tensor), [num_tokens, 1] = [4, 1]", "[1, 16]"]),
    "static_scale_1d_per_token": ("static_fp8", lambda: {"scale": torch.ones(T)}, ["scale shape [4] is neither"]),
    "group_shape_three": ("static_fp8", lambda: {"group_shape": [1, 2, 3]}, ["group_shape must have 2 entries", "[1, 2, 3]"]),
    "group_shape_zero": ("static_fp8", lambda: {"group_shape": [0, 4]}, ["group_shape entries must be positive", "[0, 4]"]),
    "group_shape_mismatch": ("static_fp8", lambda: {"scale": torch.ones(2, 3), "group_shape": [2, 8]},
                             ["scale shape [2, 3] does not match group_shape [2, 8]", "expected [2, 2]"]),
    "group_shape_one_scale_not_whole": ("static_fp8", lambda: {"group_shape": [1, 16]},
                                        ["scale shape [1] does not match group_shape [1, 16]", "expected [4, 1]"]),
    "dynamic_scale_two": ("dynamic_fp8", lambda: {"scale": torch.empty(2)}, ["scale must have one element, got shape [2]"]),
    "per_token_scale_flat": ("per_token_fp8", lambda: {"scale": torch.empty(T)}, ["scale must have shape [num_tokens, 1] = [4, 1], got [4]"]),
    "per_token_scale_rows": ("per_token_fp8", lambda: {"scale": torch.empty(T + 1, 1)}, ["got [5, 1]"]),
    "per_token_scale_broadcast": ("per_token_fp8", lambda: {"scale": torch.empty(1, 1).expand(T, 1)}, ["scale rows overlap (row stride 0"]),
    "scale_ub_two": ("per_token_fp8", lambda: {"scale_ub": torch.ones(2)}, ["scale_ub must have one element, got shape [2]"]),
    "scale_ub_float64": ("per_token_fp8", lambda: {"scale_ub": torch.ones(1, dtype=torch.float64)}, ["scale_ub must have dtype Float", "got Double"]),
    "static_int8_scale_two": ("static_int8", lambda: {"scale": torch.ones(2)}, ["scale must have one element, got shape [2]"]),
    "static_azp_int64": ("static_int8", lambda: {"azp": torch.zeros(1, dtype=torch.int64)}, ["azp must have dtype Int (int32)", "got Long"]),
    "static_azp_two": ("static_int8", lambda: {"azp": torch.zeros(2, dtype=torch.int32)}, ["azp must have one element, got shape [2]"]),
    "dynamic_azp_float": ("dynamic_int8", lambda: {"azp": torch.zeros(T, 1)}, ["azp must have dtype Int (int32)", "got Float"]),
    "dynamic_azp_shape": ("dynamic_int8", lambda: {"azp": torch.zeros(1, T, dtype=torch.int32)},
                          ["azp must have shape [num_tokens, 1] = [4, 1], got [1, 4]"]),
    "dynamic_int8_scale_shape": ("dynamic_int8", lambda: {"scale": torch.empty(T, 2)}, ["scale must have shape [num_tokens, 1]", "got [4, 2]"]),
    "scale_on_meta": ("static_fp8", lambda: {"scale": torch.ones(1, device="meta")},
                      ["scale must be on the same device as result (cpu), got meta"]),
    "input_on_meta": ("per_token_fp8", lambda: {"input": torch.empty(T, H, device="meta")},
                      ["input must be on the same device as result (cpu), got meta"]),
    "azp_on_meta": ("dynamic_int8", lambda: {"azp": torch.zeros(T, 1, dtype=torch.int32, device="meta")},
                    ["azp must be on the same device as result (cpu), got meta"]),
}


def _bad_args(case: str) -> tuple[str, dict[str, Any]]:
    op, changes, _ = BAD[case]
    args = _good(op)
    args.update(changes())
    return op, args


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_same_decision_as_fake_and_nothing_written(case: str) -> None:
    op, args = _bad_args(case)
    msg = assert_same_decision(OPS[op], expect_ok=False, **args)
    assert msg is not None
    qualname = OPS[op].__name__
    assert f"{qualname}: " in msg, msg
    for s in BAD[case][2]:
        assert s in msg, f"expected {s!r} in {msg!r}"
    # The rejected call wrote nothing.
    op, args = _bad_args(case)
    before = {k: raw_bytes(v) for k, v in args.items() if isinstance(v, torch.Tensor) and v.device.type == "cpu"}
    with pytest.raises(RuntimeError):
        OPS[op](**args)
    for k, v in before.items():
        assert torch.equal(raw_bytes(args[k]), v), f"{k} was modified by a rejected call"


def test_group_shape_entries_are_not_rounded() -> None:
    """A non-integer group_shape entry raises and writes nothing: rounded to
    [1, H], the call would quantise per token, which was not asked for."""
    result = _r()
    before = raw_bytes(result)
    with pytest.raises((TypeError, RuntimeError)):
        ops.static_scaled_fp8_quant(result, _x(), torch.ones(T, 1), group_shape=[1.5, H])  # type: ignore[list-item]
    assert torch.equal(raw_bytes(result), before)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).clone()


@pytest.mark.parametrize("op", sorted(OPS))
def test_good_inputs_same_decision_as_fake(op: str) -> None:
    assert_same_decision(OPS[op], expect_ok=True, **_good(op))


# ==========================================================================
# opcheck and torch.compile.
# ==========================================================================
def _opcheck_samples(device: str) -> list[tuple[Any, tuple[Any, ...]]]:
    x = make_x((5, 24), torch.bfloat16, seed=11, device=device, special=False)
    xs = strided_rows(make_x((3, 40), torch.float16, seed=12, device=device, special=False))
    f8 = torch.float8_e4m3fn

    def r(like: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
        return torch.empty(like.shape, dtype=dt, device=device)

    def f(*shape: int) -> torch.Tensor:
        return torch.rand(shape, device=device) + 0.5

    i32 = torch.int32
    return [
        (torch.ops.stableops.static_scaled_fp8_quant.default, (r(x, f8), x, f(1), None)),
        (torch.ops.stableops.static_scaled_fp8_quant.default, (r(x, f8), x, f(3, 8), [2, 3])),
        (torch.ops.stableops.dynamic_scaled_fp8_quant.default, (r(xs, torch.float8_e4m3fnuz), xs, f(1))),
        (torch.ops.stableops.dynamic_per_token_scaled_fp8_quant.default, (r(x, f8), x, f(5, 1), f(1))),
        (torch.ops.stableops.dynamic_per_token_scaled_fp8_quant.default, (r(xs, f8), xs, f(3, 1), None)),
        (torch.ops.stableops.static_scaled_int8_quant.default,
         (r(x, torch.int8), x, f(1), torch.tensor([3], dtype=i32, device=device))),
        (torch.ops.stableops.dynamic_scaled_int8_quant.default, (r(xs, torch.int8), xs, f(3, 1), None)),
        (torch.ops.stableops.dynamic_scaled_int8_quant.default,
         (r(x, torch.int8), x, f(5, 1), torch.zeros(5, 1, dtype=i32, device=device))),
    ]


def opcheck(op: Any, args: tuple[Any, ...]) -> None:
    """torch.library.opcheck; without test_schema for FP8 results: its
    mutation check compares tensors with torch.allclose, which torch does not
    implement for float8 (NotImplementedError), whatever the op."""
    utils = ["test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    if args[0].dtype in FP8_MAX:
        utils.remove("test_schema")
    torch.library.opcheck(op, args, test_utils=tuple(utils))


@pytest.mark.parametrize("idx", range(8))
def test_opcheck_cpu(idx: int) -> None:
    opcheck(*_opcheck_samples("cpu")[idx])


def _all_ops(x: torch.Tensor, s: torch.Tensor, ub: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every op in one graph, with work around them for inductor to fuse."""
    x = x * 1.0
    t = x.shape[0]
    a = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    torch.ops.stableops.static_scaled_fp8_quant(a, x, s, None)
    b = torch.empty(x.shape, dtype=torch.float8_e4m3fnuz, device=x.device)
    bs = torch.empty(1, device=x.device)
    torch.ops.stableops.dynamic_scaled_fp8_quant(b, x, bs)
    c = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    cs = torch.empty(t, 1, device=x.device)
    torch.ops.stableops.dynamic_per_token_scaled_fp8_quant(c, x, cs, ub)
    d = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    torch.ops.stableops.static_scaled_int8_quant(d, x, s, None)
    e = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    es = torch.empty(t, 1, device=x.device)
    ez = torch.empty(t, 1, dtype=torch.int32, device=x.device)
    torch.ops.stableops.dynamic_scaled_int8_quant(e, x, es, ez)
    return a, b, bs, c, cs, d, e, es, ez


def check_compiled(device: str, dynamic: bool) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(_all_ops, fullgraph=True, dynamic=dynamic)
    for t, h in ([7, 48], [12, 48], [3, 40]) if dynamic else ([7, 48],):
        x = make_x((t, h), torch.bfloat16, seed=t + h, device=device, special=False)
        s = torch.tensor([0.25], device=device)
        ub = torch.tensor([2.0], device=device)
        got = compiled(x, s, ub)
        want = _all_ops(x, s, ub)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert torch.equal(raw_bytes(g), raw_bytes(w))
        assert_codes_equal(got[0], ref_fp8(x, s, torch.float8_e4m3fn))
        assert_codes_equal(got[6], ref_dynamic_int8(x, False)[0])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph_cpu(dynamic: bool) -> None:
    check_compiled("cpu", dynamic)


# ==========================================================================
# GPU (CUDA, or ROCm's HIP under the same torch.cuda API).
# ==========================================================================
GPU_SHAPES = [
    (1, 4096),  # one token: latency path (static: the small-tensor kernel)
    (37, 4096),  # vector path, several rows per block
    (300, 4096),  # static: past the small-tensor kernel (2400 blocks of 64 units)
    (5, 8192),  # a row resident in registers: 256 threads x 4 units
    (3, 12296),  # per-token rows too long for registers: two passes
    (9, 136),  # short rows: many rows per block
    (6, 101),  # H not a multiple of 8: scalar path
    (2, 3, 200),  # 3-D input
]


@requires_gpu
@pytest.mark.parametrize("strided", [False, True], ids=["dense", "strided"])
@pytest.mark.parametrize("fmt", list(FP8))
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_fp8_gpu(shape: tuple[int, ...], dt: str, fmt: str, strided: bool) -> None:
    for kind in ("tensor", "token", "channel", "group"):
        run_static_fp8(shape, IN_DTYPES[dt], kind, FP8[fmt], "cuda", strided)
    run_dynamic_fp8(shape, IN_DTYPES[dt], FP8[fmt], "cuda", strided, special=False)
    run_per_token_fp8(shape, IN_DTYPES[dt], FP8[fmt], None, "cuda", strided)
    run_per_token_fp8(shape, IN_DTYPES[dt], FP8[fmt], 3.0, "cuda", strided)


@requires_gpu
@pytest.mark.parametrize("strided", [False, True], ids=["dense", "strided"])
@pytest.mark.parametrize("dt", list(IN_DTYPES))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_int8_gpu(shape: tuple[int, ...], dt: str, strided: bool) -> None:
    run_static_int8(shape, IN_DTYPES[dt], None, "cuda", strided)
    run_static_int8(shape, IN_DTYPES[dt], -3, "cuda", strided)
    run_dynamic_int8(shape, IN_DTYPES[dt], True, "cuda", strided)
    run_dynamic_int8(shape, IN_DTYPES[dt], False, "cuda", strided)


@requires_gpu
@pytest.mark.parametrize("dt", list(IN_DTYPES))
def test_gpu_misaligned_rows_take_the_scalar_path(dt: str) -> None:
    """A data pointer 1 element past 16-byte alignment and an odd row stride:
    correct results (the scalar path), never an error."""
    dtype = IN_DTYPES[dt]
    base = make_x((64, 1031), dtype, seed=5, device="cuda", special=False)
    x = base[:, 1:1025]
    assert x.data_ptr() % 16 != 0 and x.stride(0) % 8 != 0
    f8 = torch.float8_e4m3fn
    s = torch.tensor([0.3], device="cuda")
    out = torch.empty(x.shape, dtype=f8, device="cuda")
    ops.static_scaled_fp8_quant(out, x, s)
    assert_codes_equal(out, ref_fp8(x, s, f8))
    scale = torch.empty(1, device="cuda")
    ops.dynamic_scaled_fp8_quant(out, x, scale)  # strided: the three-launch path
    want, want_scale = ref_dynamic_fp8(x, f8)
    assert_float_equal(scale, want_scale)
    assert_codes_equal(out, want)
    scale = torch.empty(64, 1, device="cuda")
    ops.dynamic_per_token_scaled_fp8_quant(out, x, scale, None)
    want, want_scale = ref_per_token_fp8(x, f8, None)
    assert_float_equal(scale, want_scale)
    assert_codes_equal(out, want)
    out8 = torch.empty(x.shape, dtype=torch.int8, device="cuda")
    ops.static_scaled_int8_quant(out8, x, s, None)
    assert_codes_equal(out8, ref_static_int8(x, s, None))
    run_dynamic_int8((64, 1024), dtype, False, "cuda", strided=False, x=x)


@requires_gpu
@pytest.mark.parametrize(
    "shape", [(1, 8), (3, 4096), (2048, 4096), (300, 1000), (8192, 4096), (8192, 1023)], ids=str
)
def test_dynamic_fp8_gpu_paths(shape: tuple[int, int]) -> None:
    """One-block path (small dense), three-launch path (large or strided), a
    NaN, and a stale scale buffer. The amax pass launches one wave of blocks
    and strides over the rest; the maximum sits in the last element, so a
    stride that skips blocks shows. (8192, 4096) (vector path) and
    (8192, 1023) (scalar path) have 4096 and 8192 row blocks: several waves
    on any GPU of today (an H200 holds 528-792 of these blocks at once, a
    B200 at most 1184); (2048, 4096)'s 1024 are more than one wave on an
    H100/H200, not on a B200."""
    for strided in (False, True):
        x = make_x(shape, torch.bfloat16, seed=shape[0], device="cuda", special=False)
        x[-1, -1] = -3.0e4  # the maximum in the last element
        if strided:
            x = strided_rows(x)
        for fp8 in FP8.values():
            out = torch.empty(x.shape, dtype=fp8, device="cuda")
            scale = torch.full((1,), 1e30, device="cuda")
            ops.dynamic_scaled_fp8_quant(out, x, scale)
            want, want_scale = ref_dynamic_fp8(x, fp8)
            assert_float_equal(scale, want_scale)
            assert_codes_equal(out, want)
        x[0, 0] = NAN
        out = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device="cuda")
        ops.dynamic_scaled_fp8_quant(out, x, scale)
        assert scale.isnan().all()
        assert_codes_equal(out, ref_dynamic_fp8(x, torch.float8_e4m3fn)[0])


@requires_gpu
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
def test_dynamic_int8_gpu_special_rows_long(symmetric: bool) -> None:
    """The special rows repeated to 8192 elements (vector path, row resident
    in registers), 8200 (vector, two passes) and 12301 (scalar, two passes)."""
    rows = special_int8_rows("cuda")
    for h in (8192, 8200, 12301):
        x = rows.repeat(1, -(-h // rows.shape[1]))[:, :h].contiguous()
        run_dynamic_int8(tuple(x.shape), x.dtype, symmetric, "cuda", strided=False, x=x)


@requires_gpu
def test_gpu_matches_cpu_kernel() -> None:
    x = make_x((33, 520), torch.float16, seed=21, special=False)
    xg = x.cuda()
    for op in ("dynamic_fp8", "per_token_fp8", "dynamic_int8"):
        cpu_args = _good(op) | {"input": x, "result": _r(_good(op)["result"].dtype, x.shape)}
        if op != "dynamic_fp8":
            cpu_args["scale"] = torch.empty(33, 1)
        gpu_args = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in cpu_args.items()}
        gpu_args["input"] = xg
        OPS[op](**cpu_args)
        OPS[op](**gpu_args)
        assert_codes_equal(gpu_args["result"], cpu_args["result"])
        assert_float_equal(gpu_args["scale"], cpu_args["scale"])


@requires_gpu
def test_gpu_64bit_offsets() -> None:
    """More than 2^31 elements: rows past the 32-bit offset limit are right."""
    free, _ = torch.cuda.mem_get_info()
    t, h = (1 << 31) // 4096 + 3, 4096
    if free < 3 * t * h * 2:
        pytest.skip(f"needs {3 * t * h * 2 / 2**30:.0f} GiB of free GPU memory, {free / 2**30:.0f} GiB free")
    x = torch.empty(t, h, dtype=torch.bfloat16, device="cuda")
    x[:-4].fill_(0.5)
    tail = make_x((4, h), torch.bfloat16, seed=31, device="cuda", special=False)
    x[-4:] = tail
    out = torch.empty(t, h, dtype=torch.float8_e4m3fn, device="cuda")
    s = torch.tensor([0.05], device="cuda")
    ops.static_scaled_fp8_quant(out, x, s)
    assert_codes_equal(out[-4:], ref_fp8(tail, s, torch.float8_e4m3fn))
    scale = torch.empty(t, 1, device="cuda")
    ops.dynamic_per_token_scaled_fp8_quant(out, x, scale, None)
    want, want_scale = ref_per_token_fp8(tail, torch.float8_e4m3fn, None)
    assert_codes_equal(out[-4:], want)
    assert_float_equal(scale[-4:], want_scale)
    del x, out


@requires_gpu
def test_gpu_cuda_graph_capture_and_replay() -> None:
    """Every op captured in one graph, replayed on new data in the same
    buffers (the dynamic per-tensor op's scale reset and atomics included)."""
    shapes = [(3, 256), (600, 1024)]  # one-block and three-launch per-tensor paths
    for t, h in shapes:
        x = make_x((t, h), torch.bfloat16, seed=1, device="cuda", special=False)
        s = torch.tensor([0.2], device="cuda")
        bufs = {
            "a": torch.empty(t, h, dtype=torch.float8_e4m3fn, device="cuda"),
            "b": torch.empty(t, h, dtype=torch.float8_e4m3fn, device="cuda"),
            "bs": torch.empty(1, device="cuda"),
            "c": torch.empty(t, h, dtype=torch.float8_e4m3fn, device="cuda"),
            "cs": torch.empty(t, 1, device="cuda"),
            "d": torch.empty(t, h, dtype=torch.int8, device="cuda"),
            "e": torch.empty(t, h, dtype=torch.int8, device="cuda"),
            "es": torch.empty(t, 1, device="cuda"),
            "ez": torch.empty(t, 1, dtype=torch.int32, device="cuda"),
        }

        def run() -> None:
            ops.static_scaled_fp8_quant(bufs["a"], x, s)
            ops.dynamic_scaled_fp8_quant(bufs["b"], x, bufs["bs"])
            ops.dynamic_per_token_scaled_fp8_quant(bufs["c"], x, bufs["cs"], None)
            ops.static_scaled_int8_quant(bufs["d"], x, s, None)
            ops.dynamic_scaled_int8_quant(bufs["e"], x, bufs["es"], bufs["ez"])

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        x.copy_(make_x((t, h), torch.bfloat16, seed=2, device="cuda", special=False) * 3)
        for v in bufs.values():
            v.view(torch.uint8).fill_(0x55)
        graph.replay()
        torch.cuda.synchronize()
        f8 = torch.float8_e4m3fn
        assert_codes_equal(bufs["a"], ref_fp8(x, s, f8))
        want, want_s = ref_dynamic_fp8(x, f8)
        assert_codes_equal(bufs["b"], want)
        assert_float_equal(bufs["bs"], want_s)
        want, want_s = ref_per_token_fp8(x, f8, None)
        assert_codes_equal(bufs["c"], want)
        assert_float_equal(bufs["cs"], want_s)
        assert_codes_equal(bufs["d"], ref_static_int8(x, s, None))
        want, want_s, want_z = ref_dynamic_int8(x, False)
        assert_codes_equal(bufs["e"], want)
        assert_float_equal(bufs["es"], want_s)
        assert want_z is not None and torch.equal(bufs["ez"].cpu(), want_z)


@requires_gpu
def test_gpu_runs_on_current_stream() -> None:
    """The input is produced on a side stream after a long sleep; a kernel on
    any other stream would read stale data."""
    t, h = 512, 4096
    x = make_x((t, h), torch.bfloat16, seed=4, device="cuda", special=False)
    stale = torch.zeros_like(x)
    out = torch.empty(t, h, dtype=torch.float8_e4m3fn, device="cuda")
    scale = torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        stale.copy_(x)
        ops.dynamic_scaled_fp8_quant(out, stale, scale)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    want, want_s = ref_dynamic_fp8(x, torch.float8_e4m3fn)
    assert_float_equal(scale, want_s)
    assert_codes_equal(out, want)


GPU_BAD: dict[str, tuple[str, Callable[[], dict[str, Any]], str]] = {
    "scale_on_cpu": ("static_fp8", lambda: {"scale": torch.tensor([1.0])}, "scale must be on the same device as result (cuda:0), got cpu"),
    "input_on_cpu": ("per_token_fp8", lambda: {"input": _x()}, "input must be on the same device as result (cuda:0), got cpu"),
    "azp_on_cpu": ("dynamic_int8", lambda: {"azp": torch.zeros(T, 1, dtype=torch.int32)}, "azp must be on the same device as result (cuda:0), got cpu"),
    "ub_on_cpu": ("per_token_fp8", lambda: {"scale_ub": torch.ones(1)}, "scale_ub must be on the same device as result (cuda:0), got cpu"),
    "bad_group": ("static_fp8", lambda: {"scale": torch.ones(2, 3, device="cuda"), "group_shape": [2, 8]}, "does not match group_shape"),
    "int8_result_fp8": ("static_int8", lambda: {"result": _r().cuda()}, "result must have dtype Char (int8)"),
}


@requires_gpu
@pytest.mark.parametrize("case", sorted(GPU_BAD))
def test_gpu_bad_inputs(case: str) -> None:
    op, changes, substring = GPU_BAD[case]
    args = {k: (v.to("cuda:0") if isinstance(v, torch.Tensor) else v) for k, v in _good(op).items()}
    args.update(changes())
    msg = assert_same_decision(OPS[op], expect_ok=False, **args)
    assert msg is not None and substring in msg, msg


@requires_gpu
@pytest.mark.parametrize("idx", range(8))
def test_opcheck_gpu(idx: int) -> None:
    opcheck(*_opcheck_samples("cuda")[idx])


@requires_gpu
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph_gpu(dynamic: bool) -> None:
    check_compiled("cuda", dynamic)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

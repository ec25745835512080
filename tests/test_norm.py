"""Tests of the RMSNorm family: stableops::rms_norm, fused_add_rms_norm,
rms_norm_weightless and fused_add_rms_norm_weightless.

CPU (everywhere) and GPU (CUDA or ROCm; skipped, with the reason, where no
GPU is visible): a float64 reference with vLLM / Hugging Face rounding over
odd sizes and strided rows, zero tokens, special values, every bad input
through the kernel and the fake (fake_parity), opcheck, torch.compile
(fullgraph, static and dynamic shapes), and on the GPU CUDA-graph capture and
replay, the current stream, and the vector / register / streaming paths of
the kernel.

Run: python tests/test_norm.py   (or pytest tests/test_norm.py -rs)
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=os.environ["TEST_TMPDIR"])

import pytest
import torch

import stableops
from stableops import ops

from fake_parity import assert_same_decision

OPS = ["rms_norm", "fused_add_rms_norm", "rms_norm_weightless", "fused_add_rms_norm_weightless"]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
EPS = 1e-5
HAS_GPU = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(
    not HAS_GPU, reason="no CUDA/ROCm GPU visible to torch: the GPU kernels are not exercised here"
)


def fused(name: str) -> bool:
    return name.startswith("fused")


def weighted(name: str) -> bool:
    return not name.endswith("_weightless")


def call(name: str, a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor | None, eps: float = EPS) -> None:
    """The op through its typed wrapper, schema order: (result, input) or
    (input, residual), then weight for the weighted ops, then epsilon."""
    fn = getattr(ops, name)
    fn(a, b, weight, eps) if weighted(name) else fn(a, b, eps)


# ---------------------------------------------------------------------------
# The float64 reference.
# ---------------------------------------------------------------------------
def reference(
    name: str, x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor | None, eps: float = EPS
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(normalised output, new residual or None) in the dtype of x.

    Statistics in float64; the normalised value is rounded to the dtype, then
    multiplied by the weight and rounded again (vLLM / HF). The fused ops
    normalise the stored (rounded) sum input + residual."""
    dtype = x.dtype
    new_residual = None
    if fused(name):
        assert residual is not None
        new_residual = (x.double() + residual.double()).to(dtype)
        x = new_residual
    xd = x.double()
    y = (xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
    if weighted(name):
        assert weight is not None
        y = (y.double() * weight.double()).to(dtype)
    return y, new_residual


# (rtol, atol) of the output: float32 statistics against float64 ones can
# move a value across a rounding boundary (of the intermediate and of the
# final rounding): at most about 2 units in the last place.
TOL = {
    torch.float32: (1e-5, 1e-6),
    torch.float16: (2 * 2.0**-10, 1e-5),
    torch.bfloat16: (2 * 2.0**-7, 1e-5),
}


def assert_matches(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype
    assert not got.isnan().any(), "NaN in the output (an unwritten, NaN-poisoned element?)"
    rtol, atol = TOL[got.dtype]
    torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol)
    if got.dtype != torch.float32 and got.numel() >= 64:
        # The rounding steps themselves: without the intermediate rounding
        # (or with float16/bfloat16 statistics) far more elements differ.
        exact = (got == want).double().mean().item()
        assert exact >= 0.98, f"only {exact:.1%} of the elements match the reference exactly"


def make(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: str = "cpu"
) -> dict[str, torch.Tensor | None]:
    """Random operands: x, residual (fused ops), weight (weighted ops)."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 2).to(dtype)
    residual = torch.randn(shape, generator=g).to(dtype) if fused(name) else None
    weight = (1 + 0.5 * torch.randn(shape[-1], generator=g)).to(dtype) if weighted(name) else None
    return {
        k: (v.to(device) if v is not None else None) for k, v in dict(x=x, residual=residual, weight=weight).items()
    }


def run_and_check(
    name: str,
    v: dict[str, torch.Tensor | None],
    first: torch.Tensor | None = None,
    second: torch.Tensor | None = None,
) -> None:
    """Runs the op on `v` (or on the given first/second operands, which hold
    v's values in another layout) and compares with the reference."""
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None
    want, want_res = reference(name, x, residual, weight)
    if fused(name):
        assert residual is not None
        a = x.clone() if first is None else first
        b = residual.clone() if second is None else second
        call(name, a, b, weight)
        assert torch.equal(b, want_res), "residual is not the rounded sum input + residual"
        assert_matches(a, want)
    else:
        out = torch.full_like(x, float("nan")) if first is None else first
        call(name, out, x if second is None else second, weight)
        assert_matches(out, want)


# ===========================================================================
# CPU: numerics
# ===========================================================================
SHAPES = [
    (1, 8),
    (5, 17),  # odd hidden size
    (3, 4, 96),  # 3-D
    (33, 1000),
    (4, 4096),
    (2, 3, 1, 8192),
]


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", OPS)
def test_cpu_matches_reference(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    run_and_check(name, make(name, shape, dtype, seed=sum(shape)))


@pytest.mark.parametrize("name", OPS)
def test_cpu_hidden_65536(name: str) -> None:
    run_and_check(name, make(name, (2, 65536), torch.bfloat16, seed=1))


def strided_layout(
    name: str, v: dict[str, torch.Tensor | None], offset: int
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """The op's two row operands as row slices of wider NaN-padded buffers
    (like a slice of a fused QKV tensor), starting `offset` elements into each
    row, and the padded buffers (to check that nothing outside the rows is
    written). The second operand's buffer is wider than the first's, so the
    two have different row strides."""
    x, residual = v["x"], v["residual"]
    assert x is not None
    h = x.shape[-1]

    def padded(values: torch.Tensor | None, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
        buf = torch.full((*x.shape[:-1], h + pad), float("nan"), dtype=x.dtype, device=x.device)
        view = buf[..., offset : offset + h]
        if values is not None:
            view.copy_(values)
        return buf, view

    if fused(name):
        buf_a, a = padded(x, offset + 8)
        buf_b, b = padded(residual, offset + 24)
    else:
        buf_a, a = padded(None, offset + 8)  # result
        buf_b, b = padded(x, offset + 24)  # input
    assert a.stride(-2) != b.stride(-2) and a.stride(-2) > h
    return a, b, [buf_a, buf_b]


def assert_padding_untouched(bufs: list[torch.Tensor], offset: int, h: int) -> None:
    for buf in bufs:
        assert buf[..., :offset].isnan().all() and buf[..., offset + h :].isnan().all(), "wrote outside the rows"


@pytest.mark.parametrize("offset", [0, 3], ids=["aligned", "offset3"])
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("name", OPS)
def test_cpu_strided_rows(name: str, dtype: torch.dtype, offset: int) -> None:
    v = make(name, (3, 5, 64), dtype, seed=7)
    a, b, bufs = strided_layout(name, v, offset)
    run_and_check(name, v, a, b)
    assert_padding_untouched(bufs, offset, 64)


@pytest.mark.parametrize("name", [n for n in OPS if not fused(n)])
def test_cpu_broadcast_rows_of_a_read_only_input(name: str) -> None:
    """rms_norm's input may repeat one row (row stride 0): it is only read.
    (Both row tensors of the fused ops are written: rows_overlap cases.)"""
    v = make(name, (1, 40), torch.float16, seed=3)
    x = v["x"]
    assert x is not None
    expanded = x.expand(6, 40)
    out = torch.full((6, 40), float("nan"), dtype=torch.float16)
    call(name, out, expanded, v["weight"])
    want, _ = reference(name, expanded.contiguous(), None, v["weight"])
    assert_matches(out, want)


@pytest.mark.parametrize("shape", [(0, 64), (2, 0, 16), (3, 0)], ids=["0x64", "2x0x16", "3x0"])
@pytest.mark.parametrize("name", OPS)
def test_cpu_zero_elements_is_a_no_op(name: str, shape: tuple[int, ...]) -> None:
    v = make(name, shape, torch.bfloat16, seed=0)
    x, residual = v["x"], v["residual"]
    assert x is not None
    if fused(name):
        assert residual is not None
        call(name, x, residual, v["weight"])
    else:
        call(name, torch.empty_like(x), x, v["weight"])
    assert x.shape == shape


@pytest.mark.parametrize("name", OPS)
def test_cpu_special_values_stay_in_their_row(name: str) -> None:
    """NaN / inf stay in their row; a zero row normalises to zeros; a row whose
    float32 sum of squares overflows normalises to zeros (statistics in
    float32, as vLLM and HF compute them); the other rows are exact."""
    check_special_values(name, "cpu")


def check_special_values(name: str, device: str) -> None:
    dtype = torch.bfloat16
    v = make(name, (6, 256), dtype, seed=5, device=device)
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None
    x[1, 7] = float("nan")
    x[2, 9] = float("inf")
    x[3] = 0
    x[4] = 3e30  # x^2 overflows float32
    if residual is not None:
        residual[3] = 0
        residual[4] = 0
    want, _ = reference(name, x, residual, weight)
    if fused(name):
        assert residual is not None
        out, res = x.clone(), residual.clone()
        call(name, out, res, weight)
    else:
        out = torch.full_like(x, float("nan"))
        call(name, out, x, weight)
    assert out[1].isnan().all() and out[2].isnan().any()
    assert (out[3] == 0).all()
    assert (out[4] == 0).all()
    for r in (0, 5):
        assert_matches(out[r], want[r])


def test_cpu_multithreaded_equals_single_threaded() -> None:
    v = make("fused_add_rms_norm", (512, 640), torch.bfloat16, seed=11)
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None and residual is not None and weight is not None
    old = torch.get_num_threads()
    results = []
    try:
        for threads in (1, max(2, old)):
            torch.set_num_threads(threads)
            a, b = x.clone(), residual.clone()
            ops.fused_add_rms_norm(a, b, weight, EPS)
            results.append((a, b))
    finally:
        torch.set_num_threads(old)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


@pytest.mark.parametrize("name", OPS)
def test_functional_forms_leave_inputs_alone(name: str) -> None:
    v = make(name, (7, 48), torch.float16, seed=2)
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None
    before = {k: t.clone() for k, t in v.items() if t is not None}
    fn = getattr(stableops, name)
    if fused(name):
        args: tuple[Any, ...] = (x, residual) + ((weight,) if weighted(name) else ()) + (EPS,)
        out, new_res = fn(*args)
        want, want_res = reference(name, x, residual, weight)
        assert torch.equal(new_res, want_res)
    else:
        out = fn(*((x,) + ((weight,) if weighted(name) else ()) + (EPS,)))
        want, _ = reference(name, x, None, weight)
    assert_matches(out, want)
    for k, t in before.items():
        assert torch.equal(v[k], t), f"the functional form modified {k}"
    assert name in stableops.functional.__all__ and name in stableops.__all__


# ===========================================================================
# Bad inputs: the kernel and the fake decide alike, with the same message
# ===========================================================================
H = 16
Args = dict[str, Any]


def good(name: str, dtype: torch.dtype = torch.float32) -> Args:
    """Valid keyword arguments of the op (schema names)."""
    v = make(name, (4, H), dtype, seed=0)
    args: Args = (
        {"input": v["x"], "residual": v["residual"]}
        if fused(name)
        else {"result": torch.empty(4, H, dtype=dtype), "input": v["x"]}
    )
    if weighted(name):
        args["weight"] = v["weight"]
    args["epsilon"] = EPS
    return args


def first(name: str) -> str:
    return "input" if fused(name) else "result"


def second(name: str) -> str:
    return "residual" if fused(name) else "input"


def bad_cases(name: str) -> dict[str, tuple[Args, list[str]]]:
    """case -> (keyword arguments, substrings of the message)."""
    a, b = first(name), second(name)
    cases: dict[str, tuple[Args, list[str]]] = {}

    def case(key: str, substrings: list[str], **changes: Any) -> None:
        args = good(name)
        args.update(changes)
        cases[key] = (args, substrings)

    def both(dtype: torch.dtype) -> Args:
        g = good(name, torch.float32)
        out: Args = {a: g[a].to(dtype), b: g[b].to(dtype)}
        if weighted(name):
            out["weight"] = g["weight"].to(dtype)
        return out

    case("int32", [f"{a} must have dtype", "got Int"], **both(torch.int32))
    case("float64", [f"{a} must have dtype", "got Double"], **both(torch.float64))
    case(f"{b}_dtype", [f"{b} must have the same dtype as {a} (Float), got Half"], **{b: torch.randn(4, H).half()})
    case(f"{b}_shape", [f"{b} shape [4, 17] does not match {a} shape [4, 16]"], **{b: torch.randn(4, H + 1)})
    case(f"{b}_rank", [f"{b} shape [2, 2, 16] does not match {a} shape [4, 16]"], **{b: torch.randn(2, 2, H)})
    case("zero_dim", [f"{a} must have at least 1 dims, got 0-D"], **{a: torch.tensor(1.0), b: torch.tensor(1.0)})
    case(
        f"{a}_last_dim_strided",
        [f"{a} must be contiguous in its last dim, got strides [1, 4]"],
        **{a: torch.empty(H, 4).t()},
    )
    case(
        f"{b}_last_dim_strided",
        [f"{b} must be contiguous in its last dim, got strides [32, 2]"],
        **{b: torch.randn(4, 2 * H)[:, ::2]},
    )
    case(
        f"{b}_leading_dims_not_one_stride",
        [f"{b}'s leading dims cannot be viewed as rows of one stride: shape [2, 2, 16], strides [16, 32, 1]"],
        **{a: torch.empty(2, 2, H), b: torch.randn(2, 2, H).transpose(0, 1)},
    )
    case(
        f"{a}_rows_overlap",
        [f"{a} is written, so its rows must not overlap: row stride 0 < hidden_size 16"],
        **{a: torch.empty(1, H).expand(4, H)},
    )
    case(
        f"{b}_on_meta",
        [f"{b} must be on the same device as {a} (cpu), got meta"],
        **{b: torch.empty(4, H, device="meta")},
    )
    case(
        f"{a}_on_meta",
        [f"must be on the same device as {a} (meta), got cpu"],
        **{a: torch.empty(4, H, device="meta")},
    )
    case("epsilon_negative", ["epsilon must be a finite number >= 0, got -0.001"], epsilon=-1e-3)
    case("epsilon_nan", ["epsilon must be a finite number >= 0, got nan"], epsilon=float("nan"))
    case("epsilon_inf", ["epsilon must be a finite number >= 0, got inf"], epsilon=float("inf"))
    if fused(name):
        case(
            "residual_rows_overlap",
            ["residual is written, so its rows must not overlap: row stride 8 < hidden_size 16"],
            residual=torch.randn(40).as_strided((4, H), (8, 1)),
        )
    if weighted(name):
        case("weight_dtype", [f"weight must have the same dtype as {a} (Float), got BFloat16"], weight=torch.ones(H).bfloat16())
        case("weight_size", ["weight must be 1-D [hidden_size] = [16], got shape [15]"], weight=torch.ones(H - 1))
        case("weight_2d", ["weight must be 1-D [hidden_size] = [16], got shape [1, 16]"], weight=torch.ones(1, H))
        case("weight_strided", ["weight must be contiguous in its last dim, got strides [2]"], weight=torch.ones(2 * H)[::2])
        case("weight_on_meta", [f"weight must be on the same device as {a} (cpu), got meta"], weight=torch.ones(H, device="meta"))
    return cases


def assert_names_op(name: str, msg: str | None) -> None:
    """The message is "<op>: ..." (after the "function, file:line, " prefix
    that torch >= 2.13's STD_TORCH_CHECK adds)."""
    assert msg is not None and re.search(rf"(^|, ){name}: ", msg), msg


BAD = [(name, key) for name in OPS for key in sorted(bad_cases(name))]


@pytest.mark.parametrize("name,case", BAD, ids=[f"{n}-{k}" for n, k in BAD])
def test_bad_input_kernel_and_fake_agree(name: str, case: str) -> None:
    args, substrings = bad_cases(name)[case]
    msg = assert_same_decision(getattr(ops, name), expect_ok=False, **args)
    assert_names_op(name, msg)
    for s in substrings:
        assert s in msg, f"expected {s!r} in {msg!r}"


@pytest.mark.parametrize("name", OPS)
def test_good_input_kernel_and_fake_agree(name: str) -> None:
    assert assert_same_decision(getattr(ops, name), expect_ok=True, **good(name)) is None
    # A row slice of a wider tensor and collapsible 3-D leading dims are fine.
    args = good(name)
    args[second(name)] = torch.randn(2, 2, 3 * H)[:, :, H : 2 * H]
    args[first(name)] = torch.empty(2, 2, 2 * H)[..., :H]
    assert assert_same_decision(getattr(ops, name), expect_ok=True, **args) is None


@pytest.mark.parametrize("name", OPS)
def test_still_works_after_errors(name: str) -> None:
    for args, _ in bad_cases(name).values():
        with pytest.raises(RuntimeError):
            getattr(ops, name)(**args)
    run_and_check(name, make(name, (3, 24), torch.float32, seed=9))


# ===========================================================================
# opcheck and torch.compile
# ===========================================================================
def op_args(name: str, v: dict[str, torch.Tensor | None], out: torch.Tensor | None = None) -> tuple[Any, ...]:
    x = v["x"]
    assert x is not None
    pair = (x, v["residual"]) if fused(name) else (torch.empty_like(x) if out is None else out, x)
    return pair + ((v["weight"],) if weighted(name) else ()) + (EPS,)


@pytest.mark.parametrize("name", OPS)
def test_opcheck(name: str) -> None:
    op = getattr(torch.ops.stableops, name).default
    for shape, dtype in [((3, 40), torch.float32), ((2, 3, 16), torch.bfloat16), ((0, 8), torch.float16)]:
        torch.library.opcheck(op, op_args(name, make(name, shape, dtype, seed=4)))
    # Row-strided operands.
    v = make(name, (4, 32), torch.float16, seed=5)
    a, b, _ = strided_layout(name, v, 0)
    torch.library.opcheck(op, (a, b) + ((v["weight"],) if weighted(name) else ()) + (EPS,))


def all_four(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every op of the family, through the functional forms (allocating) and
    the in-place wrappers (mutating graph inputs and intermediates)."""
    a = stableops.rms_norm(x * 1, weight, EPS)
    b = stableops.rms_norm_weightless(x, EPS)
    c, d = stableops.fused_add_rms_norm(x, residual, weight, EPS)
    e = x + 1
    f = residual * 2
    ops.fused_add_rms_norm_weightless(e, f, EPS)
    ops.rms_norm(residual, a, weight, EPS)  # mutates a graph input
    return a.float() * 2, b, c, d, e, f


def check_compiled(device: str, dynamic: bool) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(all_four, fullgraph=True, dynamic=dynamic)
    for i, (t, h) in enumerate([(5, 64), (9, 48)] if dynamic else [(5, 64)]):
        v = make("fused_add_rms_norm", (t, h), torch.bfloat16, seed=20 + i, device=device)
        x, residual, weight = v["x"], v["residual"], v["weight"]
        assert x is not None and residual is not None and weight is not None
        res_eager, res_comp = residual.clone(), residual.clone()
        eager = all_four(x, res_eager, weight)
        got = compiled(x, res_comp, weight)
        for u, w in zip(got, eager):
            assert torch.equal(u, w)
        assert torch.equal(res_comp, res_eager)
        want, _ = reference("rms_norm", x, None, weight)
        assert_matches(got[0].to(torch.bfloat16) / 2, want)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph_cpu(dynamic: bool) -> None:
    check_compiled("cpu", dynamic)


def test_meta_tensors_validate_only() -> None:
    x = torch.empty(3, 2, 64, dtype=torch.float16, device="meta")
    ops.rms_norm(torch.empty_like(x), x, torch.empty(64, dtype=torch.float16, device="meta"), EPS)
    ops.fused_add_rms_norm_weightless(x, torch.empty_like(x), EPS)
    with pytest.raises(RuntimeError, match="weight must be 1-D"):
        ops.rms_norm(torch.empty_like(x), x, torch.empty(63, dtype=torch.float16, device="meta"), EPS)


# ===========================================================================
# GPU
# ===========================================================================
# Shapes chosen for the kernel's paths (16-bit: 8 elements a pack, fp32: 4).
GPU_SHAPES = [
    (1, 8),  # one pack: several rows per block
    (7, 40),  # 5 (16-bit) / 10 (fp32) packs per row
    (1000, 64),  # several rows per block, partial last block
    (33, 1000),  # one row per block, K = 2
    (5, 4096),
    (3, 8192),  # K = 4 (16-bit), K = 8 (fp32)
    (2, 16384),  # K = 8 (16-bit), streaming packs (fp32)
    (2, 65536),  # streaming packs
    (3, 4095),  # odd: streaming elements
    (4, 2, 127),  # odd, 3-D
    # Grids of thousands of blocks, several times what a GPU keeps resident
    # (each launch shape of the vector path):
    (100000, 256),  # several rows per block
    (6000, 1024),  # K = 2, 64-thread blocks (16-bit)
    (2500, 8192),  # K = 4 (16-bit), K = 8 (fp32)
    (1200, 16384),  # K = 8 (16-bit)
]


@requires_gpu
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", OPS)
def test_gpu_matches_reference(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> None:
    run_and_check(name, make(name, shape, dtype, seed=sum(shape), device="cuda"))
    torch.cuda.synchronize()


@requires_gpu
@pytest.mark.parametrize("offset", [0, 8, 3], ids=["aligned", "offset8", "offset3"])
@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("name", OPS)
def test_gpu_strided_rows(name: str, dtype: torch.dtype, offset: int) -> None:
    """Row slices of wider buffers, each with its own row stride: offsets 0
    and 8 keep rows 16-byte aligned (vector path), offset 3 does not (element
    path); nothing outside the rows is written."""
    for shape in [(3, 5, 64), (9, 2048)]:
        v = make(name, shape, dtype, seed=7, device="cuda")
        a, b, bufs = strided_layout(name, v, offset)
        run_and_check(name, v, a, b)
        assert_padding_untouched(bufs, offset, shape[-1])


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_matches_cpu_kernel(name: str) -> None:
    v = make(name, (37, 4096), torch.float32, seed=12)
    outs = []
    for device in ("cpu", "cuda"):
        x, residual, weight = (t.to(device) if t is not None else None for t in (v["x"], v["residual"], v["weight"]))
        assert x is not None
        a, b = (x.clone(), residual.clone()) if residual is not None else (torch.empty_like(x), x)
        call(name, a, b, weight)
        outs.append((a.cpu(), b.cpu()))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(outs[1][1], outs[0][1], rtol=0, atol=0)


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_zero_tokens_launches_nothing(name: str) -> None:
    v = make(name, (0, 4096), torch.float16, seed=0, device="cuda")
    x = v["x"]
    assert x is not None
    call(name, *((x, v["residual"]) if fused(name) else (torch.empty_like(x), x)), v["weight"])
    torch.cuda.synchronize()


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_special_values_stay_in_their_row(name: str) -> None:
    check_special_values(name, "cuda")


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_cuda_graph_capture_and_replay(name: str) -> None:
    shape, dtype = (48, 4096), torch.bfloat16
    v = make(name, shape, dtype, seed=1, device="cuda")
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None
    if fused(name):
        assert residual is not None
        a, b = x.clone(), residual.clone()
    else:
        a, b = torch.empty_like(x), x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture
        call(name, a, b, weight)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call(name, a, b, weight)
    # New data in the same buffers, then replay.
    w = make(name, shape, dtype, seed=2, device="cuda")
    assert w["x"] is not None
    if fused(name):
        assert w["residual"] is not None
        a.copy_(w["x"])
        b.copy_(w["residual"])
    else:
        a.fill_(float("nan"))
        b.copy_(w["x"])
    graph.replay()
    torch.cuda.synchronize()
    want, want_res = reference(name, w["x"], w["residual"], weight)
    assert_matches(a, want)
    if want_res is not None:
        assert torch.equal(b, want_res)


@requires_gpu
def test_gpu_runs_on_current_stream() -> None:
    """Inputs are produced on a side stream after a long sleep; if the kernel
    ran on any other stream it would read the stale (zero) inputs."""
    v = make("fused_add_rms_norm", (256, 4096), torch.bfloat16, seed=21, device="cuda")
    x, residual, weight = v["x"], v["residual"], v["weight"]
    assert x is not None and residual is not None and weight is not None
    a, b = torch.zeros_like(x), torch.zeros_like(residual)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        a.copy_(x)
        b.copy_(residual)
        ops.fused_add_rms_norm(a, b, weight, EPS)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    want, want_res = reference("fused_add_rms_norm", x, residual, weight)
    assert torch.equal(b, want_res)
    assert_matches(a, want)


def _cuda_bad_cases(name: str) -> dict[str, tuple[Args, list[str]]]:
    a, b = first(name), second(name)
    cuda = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in good(name).items()}
    cases = {
        f"{b}_on_cpu": ({**cuda, b: torch.randn(4, H)}, [f"{b} must be on the same device as {a} (cuda:0), got cpu"]),
        "float64": (
            {k: (v.double() if isinstance(v, torch.Tensor) else v) for k, v in cuda.items()},
            [f"{a} must have dtype", "got Double"],
        ),
        "epsilon_negative": ({**cuda, "epsilon": -1.0}, ["epsilon must be a finite number >= 0, got -1"]),
    }
    if weighted(name):
        cases["weight_on_cpu"] = ({**cuda, "weight": torch.ones(H)}, [f"weight must be on the same device as {a} (cuda:0), got cpu"])
        cases["weight_size"] = ({**cuda, "weight": torch.ones(H + 1, device="cuda")}, ["weight must be 1-D [hidden_size] = [16], got shape [17]"])
    return cases


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_bad_inputs_kernel_and_fake_agree(name: str) -> None:
    torch.cuda.set_device(0)
    for key, (args, substrings) in _cuda_bad_cases(name).items():
        msg = assert_same_decision(getattr(ops, name), expect_ok=False, **args)
        assert_names_op(name, msg)
        for s in substrings:
            assert s in msg, f"{key}: expected {s!r} in {msg!r}"
    # No sticky GPU error left behind.
    assert torch.ones(4, device="cuda").sum().item() == 4


@requires_gpu
@pytest.mark.parametrize("name", OPS)
def test_gpu_opcheck(name: str) -> None:
    op = getattr(torch.ops.stableops, name).default
    torch.library.opcheck(op, op_args(name, make(name, (9, 512), torch.bfloat16, seed=4, device="cuda")))


@requires_gpu
def test_torch_compile_fullgraph_gpu() -> None:
    check_compiled("cuda", dynamic=False)
    check_compiled("cuda", dynamic=True)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

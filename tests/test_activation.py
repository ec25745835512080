"""Tests of the activation ops (csrc/activation/): silu_and_mul, mul_and_silu,
silu_and_mul_with_clamp, gelu_and_mul, gelu_tanh_and_mul, fatrelu_and_mul,
swigluoai_and_mul, gelu_new, gelu_fast, gelu_quick.

Every op and dtype against a float64 reference of the op's formula on the CPU
and (where one is visible) the GPU: odd sizes, strided and broadcast rows,
leading dims, zero tokens, special values (inf, NaN, huge); nothing written
outside the output view; every bad input through the kernel and the fake
(same decision, same message); opcheck; torch.compile(fullgraph=True), static
and dynamic; the functional forms; CUDA-graph capture and replay and 64-bit
offsets on the GPU. GPU tests skip, saying why, where no GPU is visible.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=os.environ["TEST_TMPDIR"])

import pytest
import torch

import stableops
from stableops import ops

from fake_parity import assert_same_decision

Tensor = torch.Tensor
HAS_GPU = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(
    not HAS_GPU, reason="no CUDA/ROCm GPU visible: the GPU kernels run only on a GPU machine"
)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (atol, rtol) of the output against the float64 reference rounded to the
# output dtype: float32 math is a few ulp; 16-bit outputs may round the other
# way (1 ulp: 2^-10 for float16, 2^-7 for bfloat16); atol for results near 0.
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-5, 2**-10), torch.bfloat16: (1e-5, 2**-7)}


# ---------------------------------------------------------------------------
# float64 references: the formulas of the op contract.
# ---------------------------------------------------------------------------
def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


# 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh z) in forms that keep their
# float64 precision for x << 0, where 1 + erf and 1 + tanh cancel.
def gelu_erf(x: Tensor) -> Tensor:
    return 0.5 * x * torch.special.erfc(-x / math.sqrt(2))


def gelu_tanh(x: Tensor) -> Tensor:
    return x * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))


def halves(x: Tensor) -> tuple[Tensor, Tensor]:
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


def ref_swigluoai(x: Tensor, alpha: float, limit: float) -> Tensor:
    g = x[..., 0::2].clamp(max=limit)
    u = x[..., 1::2].clamp(-limit, limit)
    return (u + 1) * g * torch.sigmoid(alpha * g)


@dataclass(frozen=True)
class Op:
    name: str
    gated: bool
    ref: Callable[..., Tensor]  # (float64 input, **scalars) -> float64 output
    scalars: dict[str, float] = field(default_factory=dict)
    out_name: str = "out"

    def __call__(self, out: Tensor, x: Tensor, **scalars: float) -> None:
        getattr(ops, self.name)(out, x, **{**self.scalars, **scalars})

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*in_shape[:-1], in_shape[-1] // 2) if self.gated else tuple(in_shape)

    def reference(self, x: Tensor, **scalars: float) -> Tensor:
        return self.ref(x.double(), **{**self.scalars, **scalars})


OPS = [
    Op("silu_and_mul", True, lambda x: silu(halves(x)[0]) * halves(x)[1], out_name="result"),
    Op("mul_and_silu", True, lambda x: halves(x)[0] * silu(halves(x)[1])),
    Op(
        "silu_and_mul_with_clamp",
        True,
        lambda x, limit: silu(halves(x)[0].clamp(max=limit)) * halves(x)[1].clamp(-limit, limit),
        {"limit": 2.5},
        out_name="result",
    ),
    Op("gelu_and_mul", True, lambda x: gelu_erf(halves(x)[0]) * halves(x)[1]),
    Op("gelu_tanh_and_mul", True, lambda x: gelu_tanh(halves(x)[0]) * halves(x)[1]),
    Op(
        "fatrelu_and_mul",
        True,
        lambda x, threshold: torch.where(halves(x)[0] > threshold, halves(x)[0], 0.0) * halves(x)[1],
        {"threshold": 0.5},
    ),
    Op("swigluoai_and_mul", True, ref_swigluoai, {"alpha": 1.702, "limit": 3.0}),
    Op("gelu_new", False, gelu_tanh),
    Op("gelu_fast", False, lambda x: x * torch.sigmoid(2 * 0.7978845608 * x * (1 + 0.044715 * x * x))),
    Op("gelu_quick", False, lambda x: x * torch.sigmoid(1.702 * x)),
]
OP_IDS = [op.name for op in OPS]
BY_NAME = {op.name: op for op in OPS}


def make_input(shape: tuple[int, ...], dtype: torch.dtype, seed: int, device: str = "cpu") -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3).to(dtype).to(device)


def assert_matches(op: Op, out: Tensor, x: Tensor, **scalars: float) -> None:
    ref = op.reference(x.cpu(), **scalars).to(out.dtype).double()
    atol, rtol = TOL[out.dtype]
    torch.testing.assert_close(out.cpu().double(), ref, atol=atol, rtol=rtol, equal_nan=True)


def poisoned(shape: tuple[int, ...], dtype: torch.dtype, device: str = "cpu") -> Tensor:
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


def pack_pairs(op: Op, a: Tensor, b: Tensor) -> Tensor:
    """The input [R, 2C] (gated) whose x1 / gate is `a` [R, C] and x2 / up is
    `b`; `a` itself for elementwise ops."""
    if op.name == "swigluoai_and_mul":
        return torch.stack([a, b], dim=-1).reshape(a.shape[0], -1)
    return torch.cat([a, b], dim=-1) if op.gated else a


SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e30, 88.0, -88.0, 1e-30, 7.0, -7.0]


def special_input(op: Op, repeat: int = 1) -> Tensor:
    """Every (a, b) pair of special values (float64): a [12, 12] grid,
    columns repeated `repeat` times."""
    vals = torch.tensor(SPECIALS, dtype=torch.float64)
    a, b = torch.meshgrid(vals, vals, indexing="ij")
    return pack_pairs(op, a.repeat(1, repeat), b.repeat(1, repeat))


def wide_range_input(op: Op, device: str = "cpu") -> Tensor:
    """float32 x1 (or x) from -100 to 100 in 20000 steps: exp and erf saturate
    at both ends; x2 a ramp over [-3, 3]."""
    a = torch.linspace(-100, 100, 20000, device=device).reshape(250, 80)
    b = torch.linspace(-3, 3, 20000, device=device).reshape(250, 80)
    return pack_pairs(op, a, b)


def run_in_window(op: Op, x: Tensor, pad: int = 3) -> Tensor:
    """Runs the op on 2-D `x` into a view of a NaN-poisoned buffer wider by
    `pad` on both sides of every row; checks nothing outside the view was
    written."""
    rows, d = op.out_shape(tuple(x.shape))
    big = poisoned((rows, d + 2 * pad), x.dtype, str(x.device))
    out = big[:, pad : pad + d]
    op(out, x)
    assert big[:, :pad].isnan().all() and big[:, pad + d :].isnan().all(), "wrote outside the output view"
    return out


# ---------------------------------------------------------------------------
# CPU: numerics.
# ---------------------------------------------------------------------------
# Input shapes: odd last dims (the vector loops' remainders), one element,
# leading dims, rows longer than one CPU task (4096 elements).
SHAPES = [(1, 2), (3, 14), (5, 128), (17, 514), (2, 3, 40), (2, 8200), (4, 1, 6)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_cpu_matches_reference(op: Op, dtype: torch.dtype) -> None:
    for i, shape in enumerate(SHAPES):
        x = make_input(shape, dtype, seed=i)
        out = poisoned(op.out_shape(shape), dtype)
        op(out, x)
        assert_matches(op, out, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_cpu_strided_rows(op: Op, dtype: torch.dtype) -> None:
    # Input rows padded (a slice of a wider buffer), output a window of a
    # poisoned buffer; then leading dims that collapse to one row stride
    # (every other row of a 3-D buffer); then one row broadcast to all rows.
    t, n = 7, 22
    x = make_input((t, n + 5), dtype, seed=1)[:, 2 : n + 2]
    assert not x.is_contiguous()
    assert_matches(op, run_in_window(op, x), x)
    x3 = make_input((3, 8, n), dtype, seed=2)[:, ::2]
    out3 = poisoned(op.out_shape(tuple(x3.shape)), dtype)
    op(out3, x3)
    assert_matches(op, out3, x3)
    xb = make_input((1, n), dtype, seed=3).expand(t, n)
    outb = poisoned(op.out_shape((t, n)), dtype)
    op(outb, xb)
    assert_matches(op, outb, xb)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_cpu_special_values(op: Op) -> None:
    """inf, NaN, huge and tiny values give what the formula gives in float64
    (rounded to the dtype), e.g. NaN for silu(-inf) = -inf * 0."""
    for dtype in DTYPES:
        x = special_input(op).to(dtype)
        out = poisoned(op.out_shape(tuple(x.shape)), dtype)
        op(out, x)
        assert_matches(op, out, x)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_cpu_wide_range_float32(op: Op) -> None:
    """float32 over a wide range: exp and erf saturating, every branch of the
    polynomial approximations."""
    x = wide_range_input(op)
    out = poisoned(op.out_shape(tuple(x.shape)), torch.float32)
    op(out, x)
    assert_matches(op, out, x)


@pytest.mark.parametrize("op", [op for op in OPS if op.scalars], ids=lambda op: op.name)
def test_cpu_scalar_arguments(op: Op) -> None:
    x = make_input((9, 30), torch.float32, seed=4)
    variants = {
        "limit": [0.0, 0.5, 7.0, float("inf")],
        "threshold": [-1.0, 0.0, 2.0, float("inf"), float("-inf")],
        "alpha": [0.0, 1.0, -2.0],
    }
    for name in op.scalars:
        for value in variants[name]:
            out = poisoned(op.out_shape((9, 30)), torch.float32)
            op(out, x, **{name: value})
            assert_matches(op, out, x, **{name: value})


def test_swigluoai_default_arguments() -> None:
    """alpha=1.702, limit=7.0 when left out, in the wrapper and the schema."""
    x = make_input((4, 16), torch.float32, seed=5) * 4
    out = poisoned((4, 8), torch.float32)
    ops.swigluoai_and_mul(out, x)
    out_schema = poisoned((4, 8), torch.float32)
    torch.ops.stableops.swigluoai_and_mul(out_schema, x)
    torch.testing.assert_close(out.double(), ref_swigluoai(x.double(), 1.702, 7.0), atol=1e-5, rtol=1e-5)
    assert torch.equal(out, out_schema)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_cpu_zero_tokens_and_empty_rows(op: Op) -> None:
    for shape in [(0, 16), (0, 3, 16), (3, 0), (2, 0, 8)]:
        x = torch.empty(shape, dtype=torch.bfloat16)
        out = torch.empty(op.out_shape(shape), dtype=torch.bfloat16)
        op(out, x)  # a no-op, any strides
        assert out.shape == op.out_shape(shape)


def test_cpu_multithreaded_equals_single_threaded() -> None:
    x = make_input((64, 2 * 4100), torch.bfloat16, seed=6)
    old = torch.get_num_threads()
    try:
        for op in OPS:
            torch.set_num_threads(1)
            one = poisoned(op.out_shape(tuple(x.shape)), x.dtype)
            op(one, x)
            torch.set_num_threads(max(2, old))
            many = poisoned(op.out_shape(tuple(x.shape)), x.dtype)
            op(many, x)
            assert torch.equal(one, many), op.name
    finally:
        torch.set_num_threads(old)


def test_elementwise_in_place() -> None:
    """out may be input itself for the elementwise ops."""
    for name in ("gelu_new", "gelu_fast", "gelu_quick"):
        x = make_input((33, 65), torch.float32, seed=7)
        want = BY_NAME[name].reference(x).float()
        BY_NAME[name](x, x)
        torch.testing.assert_close(x, want, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------
# Bad inputs: RuntimeError naming the value; the fake decides the same.
# ---------------------------------------------------------------------------
def bad_cases(op: Op, device: str = "cpu") -> dict[str, tuple[Callable[[], tuple[Tensor, Tensor, dict]], list[str]]]:
    """name -> (make (out, input, scalars), substrings of the message)."""
    t, n = 4, 16
    o = op.out_name

    def mk(out_shape=None, in_shape=(t, n), dtype=torch.float32, in_dtype=None, **scalars):
        def make():
            x = torch.randn(in_shape).to(in_dtype or dtype).to(device)
            shape = out_shape if out_shape is not None else op.out_shape(in_shape)
            return torch.empty(shape, dtype=dtype, device=device), x, scalars

        return make

    def strided(which: str, make_view: Callable[[Tensor], Tensor]):
        """A view of out, or of input (with an out of the view's shape)."""

        def make():
            out, x, s = mk()()
            if which == "out":
                return make_view(out), x, s
            x = make_view(x)
            return torch.empty(op.out_shape(tuple(x.shape)), device=device), x, s

        return make

    dev = "cpu" if device == "cpu" else f"cuda:{torch.cuda.current_device()}"

    cases = {
        "float64": (mk(dtype=torch.float64), [f"{o} must have dtype Float (float32), Half (float16) or BFloat16", "got Double"]),
        "input_int32": (mk(in_dtype=torch.int32), ["input must have dtype", "got Int"]),
        "dtype_mismatch": (mk(in_dtype=torch.float16), [f"input must have the same dtype as {o} (Float), got Half"]),
        "input_0d": (mk(out_shape=(), in_shape=()), ["input must have at least 1 dims, got 0-D"]),
        "out_wrong_last_dim": (
            mk(out_shape=(t, n + 2)),
            [f"{o} must have shape {list(op.out_shape((t, n)))}", f"got [{t}, {n + 2}]"],
        ),
        "out_wrong_rows": (mk(out_shape=(t + 1, *op.out_shape((t, n))[1:])), [f"{o} must have shape", f"got [{t + 1}"]),
        "out_flattened": (mk(out_shape=(math.prod(op.out_shape((t, n))),)), [f"{o} must have shape", "got ["]),
        "input_last_dim_not_contiguous": (
            strided("input", lambda x: x.t().contiguous().t()),
            ["input must be contiguous in its last dim, got strides [1, 4]"],
        ),
        "out_last_dim_not_contiguous": (
            strided("out", lambda out: out.t().contiguous().t()),
            [f"{o} must be contiguous in its last dim, got strides [1, 4]"],
        ),
        "leading_dims_not_rows": (
            strided("input", lambda x: x.reshape(2, 2, n).transpose(0, 1)),
            ["input of shape [2, 2, 16] and strides [16, 32, 1] cannot be viewed as rows with one stride", "dim 0"],
        ),
        "out_rows_overlap": (
            strided("out", lambda out: out[:1].expand(out.shape)),
            [f"the rows of {o} overlap: row stride 0 is less than the row length"],
        ),
        "input_on_meta": (
            strided("input", lambda x: x.to("meta")),
            [f"input must be on the same device as {o} ({dev}), got meta"],
        ),
    }
    if op.gated:
        cases["odd_last_dim"] = (
            mk(out_shape=(t, 3), in_shape=(t, 7)),
            ["input must have an even last dim (2 * d), got 7 (shape [4, 7])"],
        )
    if "limit" in op.scalars:
        cases["limit_negative"] = (mk(limit=-1.0), ["limit must be a number >= 0, got -1"])
        cases["limit_nan"] = (mk(limit=float("nan")), ["limit must be a number >= 0, got nan"])
    if "threshold" in op.scalars:
        cases["threshold_nan"] = (mk(threshold=float("nan")), ["threshold must not be NaN, got nan"])
    if "alpha" in op.scalars:
        cases["alpha_nan"] = (mk(alpha=float("nan")), ["alpha must not be NaN, got nan"])
    return cases


BAD = [(op, case) for op in OPS for case in bad_cases(op)]


@pytest.mark.parametrize("op,case", BAD, ids=[f"{op.name}-{case}" for op, case in BAD])
def test_bad_input_same_decision_in_kernel_and_fake(op: Op, case: str) -> None:
    make, substrings = bad_cases(op)[case]
    out, x, scalars = make()
    msg = assert_same_decision(op, out, x, expect_ok=False, **scalars)
    assert msg is not None and f"{op.name}: " in msg, msg
    for s in substrings:
        assert s in msg, f"expected {s!r} in {msg!r}"


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_good_input_same_decision_in_kernel_and_fake(op: Op) -> None:
    x = make_input((5, 14), torch.float16, seed=8)[:, 1:13]
    assert_same_decision(op, torch.empty(op.out_shape(tuple(x.shape)), dtype=x.dtype), x, expect_ok=True)


# ---------------------------------------------------------------------------
# opcheck, torch.compile, functional forms.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_opcheck(op: Op) -> None:
    dtype = DTYPES[OPS.index(op) % 3]
    x = make_input((7, 30), dtype, seed=9)[:, 2:26]
    out = torch.empty(op.out_shape(tuple(x.shape)), dtype=dtype)
    torch.library.opcheck(getattr(torch.ops.stableops, op.name).default, (out, x), dict(op.scalars))


def all_ops_functional(x: Tensor) -> list[Tensor]:
    """Every op through its functional form (only our ops in the graph: on the
    CPU, Inductor then has no C++ kernel to build, which keeps the test fast)."""
    return [
        stableops.silu_and_mul(x),
        stableops.mul_and_silu(x),
        stableops.silu_and_mul_with_clamp(x, 2.5),
        stableops.gelu_and_mul(x),
        stableops.gelu_tanh_and_mul(x),
        stableops.fatrelu_and_mul(x, 0.5),
        stableops.swigluoai_and_mul(x, 1.702, 3.0),
        stableops.swigluoai_and_mul(x),
        stableops.gelu_new(x),
        stableops.gelu_fast(x),
        stableops.gelu_quick(x),
    ]


def all_ops_in_place(outs: list[Tensor], x: Tensor) -> None:
    """Every op writing graph inputs in place."""
    for op, out in zip(OPS, outs):
        getattr(torch.ops.stableops, op.name)(out, x, **op.scalars)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph(dynamic: bool) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(all_ops_functional, fullgraph=True, dynamic=dynamic)
    compiled_in_place = torch.compile(all_ops_in_place, fullgraph=True, dynamic=dynamic)
    # Two shapes: dynamic=True must serve both from one graph.
    for i, shape in enumerate([(6, 40), (11, 18)]):
        x = make_input(shape, torch.bfloat16, seed=10 + i)
        for got, want in zip(compiled(x), all_ops_functional(x)):
            assert torch.equal(got, want)
        outs = [poisoned(op.out_shape(shape), x.dtype) for op in OPS]
        compiled_in_place(outs, x)
        for op, out in zip(OPS, outs):
            assert_matches(op, out, x)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_functional_form(op: Op) -> None:
    x = make_input((2, 3, 26), torch.float16, seed=11)[..., 1:25]
    before = x.clone()
    got = getattr(stableops, op.name)(x, **op.scalars)
    assert torch.equal(x, before), "the functional form modified its input"
    assert got.shape == op.out_shape(tuple(x.shape)) and got.dtype == x.dtype
    assert_matches(op, got, x)
    assert op.name in stableops.functional.__all__ and op.name in stableops.ops.__all__


# ---------------------------------------------------------------------------
# GPU.
# ---------------------------------------------------------------------------
# Input shapes on the GPU: one pack per row, short rows sharing a block, the
# two model widths, rows needing several blocks, odd last dims (scalar path).
# The vector path of up to 8192 blocks of 64 packs takes the small-tensor
# kernel; (9000, 2 * 96) (9000 blocks) the general one with short rows
# sharing a block; test_gpu_general_kernel_long_rows the general one with
# long rows.
GPU_SHAPES = [(1, 16), (3, 64), (5, 2 * 4096), (2, 2 * 14336), (4099, 2 * 96), (7, 2 * 1000), (3, 14), (9, 2 * 4097), (2, 3, 40), (9000, 2 * 96)]


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_matches_reference(op: Op, dtype: torch.dtype) -> None:
    for i, shape in enumerate(GPU_SHAPES):
        x = make_input(shape, dtype, seed=i, device="cuda")
        out = poisoned(op.out_shape(shape), dtype, "cuda")
        op(out, x)
        assert_matches(op, out, x)


@requires_gpu
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_general_kernel_long_rows(op: Op) -> None:
    # 1100 rows of 4096 outputs: 8800 blocks of 64 packs, past the
    # small-tensor kernel's 8192: the general kernel, two or four packs per
    # thread.
    shape = (1100, 2 * 4096 if op.gated else 4096)
    x = make_input(shape, torch.bfloat16, seed=9, device="cuda")
    out = poisoned(op.out_shape(shape), torch.bfloat16, "cuda")
    op(out, x)
    assert_matches(op, out, x)


@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_strided_misaligned_and_broadcast(op: Op, dtype: torch.dtype) -> None:
    t, n = 37, 2 * 256
    # Row stride a multiple of 16 bytes: the vector path on a slice.
    x = make_input((t, n + 64), dtype, seed=1, device="cuda")[:, 32 : n + 32]
    assert_matches(op, run_in_window(op, x, pad=8), x)
    # Odd padding: row starts not 16-byte aligned -> the scalar path.
    x = make_input((t, n + 3), dtype, seed=2, device="cuda")[:, 1 : n + 1]
    assert_matches(op, run_in_window(op, x, pad=3), x)
    # A misaligned base pointer, contiguous rows.
    flat = make_input((t * n + 1,), dtype, seed=3, device="cuda")
    x = flat[1:].view(t, n)
    out = poisoned(op.out_shape((t, n)), dtype, "cuda")
    op(out, x)
    assert_matches(op, out, x)
    # Leading dims collapsing to one row stride; one row broadcast to all.
    x3 = make_input((3, 8, n), dtype, seed=4, device="cuda")[:, ::2]
    out3 = poisoned(op.out_shape(tuple(x3.shape)), dtype, "cuda")
    op(out3, x3)
    assert_matches(op, out3, x3)
    xb = make_input((1, n), dtype, seed=5, device="cuda").expand(t, n)
    outb = poisoned(op.out_shape((t, n)), dtype, "cuda")
    op(outb, xb)
    assert_matches(op, outb, xb)


@requires_gpu
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_special_values_and_wide_range(op: Op) -> None:
    for repeat in (1, 8):  # d = 12: the scalar path; d = 96: the vector path
        for dtype in DTYPES:
            x = special_input(op, repeat).to(dtype).cuda()
            out = poisoned(op.out_shape(tuple(x.shape)), dtype, "cuda")
            op(out, x)
            assert_matches(op, out, x)
    x = wide_range_input(op, device="cuda")
    out = poisoned(op.out_shape(tuple(x.shape)), torch.float32, "cuda")
    op(out, x)
    assert_matches(op, out, x)


@requires_gpu
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_matches_cpu_kernel(op: Op) -> None:
    x = make_input((33, 2 * 136), torch.float32, seed=12)
    out_cpu = torch.empty(op.out_shape(tuple(x.shape)))
    op(out_cpu, x)
    out_gpu = torch.empty(op.out_shape(tuple(x.shape)), device="cuda")
    op(out_gpu, x.cuda())
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, atol=1e-5, rtol=1e-5)


@requires_gpu
def test_gpu_zero_tokens_launch_nothing() -> None:
    for op in OPS:
        for shape in [(0, 2 * 4096), (4, 0), (0, 3, 8)]:
            x = torch.empty(shape, dtype=torch.bfloat16, device="cuda")
            out = torch.empty(op.out_shape(shape), dtype=torch.bfloat16, device="cuda")
            op(out, x)
    torch.cuda.synchronize()


@requires_gpu
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_cuda_graph_capture_and_replay(op: Op) -> None:
    t, n = 48, 2 * 1024
    x = make_input((t, n), torch.bfloat16, seed=13, device="cuda")
    out = torch.empty(op.out_shape((t, n)), dtype=torch.bfloat16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture
        op(out, x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        op(out, x)
    x.copy_(make_input((t, n), torch.bfloat16, seed=14, device="cuda"))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_matches(op, out, x)


@requires_gpu
def test_gpu_runs_on_current_stream() -> None:
    """Inputs are written on a side stream after a long sleep; a kernel on any
    other stream would read stale data."""
    op = BY_NAME["silu_and_mul"]
    x = make_input((256, 2 * 2048), torch.bfloat16, seed=15, device="cuda")
    stale = torch.zeros_like(x)
    out = torch.zeros(256, 2048, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        stale.copy_(x)
        op(out, stale)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    assert_matches(op, out, x)


@requires_gpu
@pytest.mark.parametrize("name", ["silu_and_mul", "gelu_quick"])
def test_gpu_64bit_offsets(name: str) -> None:
    """More than 2^31 input elements: rows far into the tensor (gated: row
    offsets; elementwise: one collapsed row longer than 2^31) are right."""
    free, _ = torch.cuda.mem_get_info()
    if free < 16 << 30:
        pytest.skip(f"needs 16 GiB of free GPU memory, {free >> 30} GiB free")
    op = BY_NAME[name]
    rows, n = (65600, 2 * 16384) if op.gated else (131200, 16384)  # 2^31 + a little
    x = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")
    x[:, :].copy_(make_input((1, n), torch.bfloat16, seed=16, device="cuda").expand(rows, n))
    x[-3:] = make_input((3, n), torch.bfloat16, seed=17, device="cuda")
    out = torch.empty(op.out_shape((rows, n)), dtype=torch.bfloat16, device="cuda")
    out[-3:].fill_(float("nan"))
    op(out, x)
    torch.cuda.synchronize()
    for r in (0, rows // 2, rows - 4, rows - 3, rows - 2, rows - 1):
        assert_matches(op, out[r : r + 1], x[r : r + 1])
    del x, out
    torch.cuda.empty_cache()


@requires_gpu
@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_gpu_bad_inputs_same_decision(op: Op) -> None:
    for case, (make, substrings) in bad_cases(op, device="cuda").items():
        out, x, scalars = make()
        msg = assert_same_decision(op, out, x, expect_ok=False, **scalars)
        assert msg is not None and f"{op.name}: " in msg, (case, msg)
        for s in substrings:
            assert s in msg, (case, s, msg)
    # Mixed devices: the CUDA kernel is dispatched and names both devices.
    x = make_input((4, 16), torch.float32, seed=18)
    out = torch.empty(op.out_shape((4, 16)), device="cuda")
    msg = assert_same_decision(op, out, x, expect_ok=False)
    assert msg is not None and f"input must be on the same device as {op.out_name} (cuda:" in msg and "got cpu" in msg


@requires_gpu
def test_gpu_opcheck_and_compile() -> None:
    for i, op in enumerate(OPS):
        dtype = DTYPES[i % 3]
        x = make_input((9, 2 * 64), dtype, seed=19, device="cuda")
        out = torch.empty(op.out_shape(tuple(x.shape)), dtype=dtype, device="cuda")
        torch.library.opcheck(getattr(torch.ops.stableops, op.name).default, (out, x), dict(op.scalars))
    torch._dynamo.reset()
    compiled = torch.compile(all_ops_functional, fullgraph=True)
    x = make_input((33, 2 * 128), torch.bfloat16, seed=20, device="cuda")
    for got, want in zip(compiled(x), all_ops_functional(x)):
        assert torch.equal(got, want)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

"""Tests of stableops::rotary_embedding: float64 reference on the CPU and (when a
GPU is visible) the GPU, strided views, out-of-range positions, bad inputs
through the kernel and the fake, opcheck, torch.compile and CUDA graphs.

GPU tests skip, saying why, where no GPU is visible. Run directly with
``python tests/test_rotary_embedding.py`` (or pytest -rs).
"""

from __future__ import annotations

import os
import sys
import tempfile

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=os.environ["TEST_TMPDIR"])

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
import torch

import stableops
from stableops import ops

from fake_parity import assert_same_decision, decision, fake_call

HAS_GPU = torch.cuda.is_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA/ROCm GPU visible to torch")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# (atol, rtol) against the float64 reference: float32 math, one rounding to
# the output dtype (half an ulp: 2^-9 relative for bf16, 2^-11 for fp16).
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (8e-3, 8e-3)}
STYLES = {"neox": True, "gptj": False}


# --------------------------------------------------------------------------
# Inputs and the float64 reference.
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    tokens: int
    q_heads: int
    k_heads: int | None  # None: key is None
    head_size: int
    rot_dim: int
    offset: int = 0
    layout: str = "2d"  # "2d": [T, H*D]; "3d": [T, H, D]
    cache_f32: bool = False
    inverse: bool = False
    max_position: int = 64

    def id(self) -> str:
        k = "nokey" if self.k_heads is None else f"k{self.k_heads}"
        extra = "".join(
            s for s, on in (("-f32cache", self.cache_f32), ("-inv", self.inverse)) if on
        )
        return f"T{self.tokens}-q{self.q_heads}-{k}-D{self.head_size}-R{self.rot_dim}-off{self.offset}-{self.layout}{extra}"


def make_cache(max_position: int, rot_dim: int, dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """A real RoPE cache: cos of the angles in the first half, sin in the second."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim))
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).to(dtype=dtype, device=device)


def make_inputs(case: Case, dtype: torch.dtype, seed: int = 0, device: str = "cpu") -> dict[str, Any]:
    g = torch.Generator().manual_seed(seed)
    t, d = case.tokens, case.head_size

    def heads(h: int) -> torch.Tensor:
        x = (torch.randn(t, h, d, generator=g) * 2).to(dtype)
        return x.reshape(t, h * d) if case.layout == "2d" else x

    return {
        "positions": torch.randint(0, case.max_position, (t,), generator=g).to(device),
        "query": heads(case.q_heads).to(device),
        "key": None if case.k_heads is None else heads(case.k_heads).to(device),
        "head_size": d,
        "cos_sin_cache": make_cache(case.max_position, case.rot_dim, torch.float32 if case.cache_f32 else dtype, device),
        "is_neox": True,
        "rope_dim_offset": case.offset,
        "inverse": case.inverse,
    }


def rotate_ref(
    x: torch.Tensor,
    positions: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rope_dim_offset: int = 0,
    inverse: bool = False,
) -> torch.Tensor:
    """float64 result of the op's contract for one of query/key (same shape)."""
    t = x.shape[0]
    rot = cos_sin_cache.shape[1]
    half = rot // 2
    cs = cos_sin_cache.double().cpu()[positions.cpu()]
    cos, sin = cs[:, None, :half], cs[:, None, half:]
    if inverse:
        sin = -sin
    heads = x.shape[1] if x.dim() == 3 else x.shape[1] // head_size
    y = x.double().cpu().reshape(t, heads, head_size).clone()
    span = y[..., rope_dim_offset : rope_dim_offset + rot]
    a, b = (span[..., :half], span[..., half:]) if is_neox else (span[..., 0::2], span[..., 1::2])
    a_new, b_new = a * cos - b * sin, b * cos + a * sin
    a.copy_(a_new)
    b.copy_(b_new)
    return y.reshape(x.shape)


def reference(args: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    common = (
        args["positions"],
        args["head_size"],
        args["cos_sin_cache"],
        args["is_neox"],
        args["rope_dim_offset"],
        args["inverse"],
    )
    q = rotate_ref(args["query"], *common)
    k = None if args["key"] is None else rotate_ref(args["key"], *common)
    return q, k


def assert_close_ref(out: torch.Tensor, ref: torch.Tensor) -> None:
    atol, rtol = TOL[out.dtype]
    torch.testing.assert_close(out.double().cpu(), ref, atol=atol, rtol=rtol)


def run_and_check(args: dict[str, Any]) -> None:
    ref_q, ref_k = reference(args)
    ops.rotary_embedding(**args)
    assert_close_ref(args["query"], ref_q)
    if args["key"] is not None:
        assert ref_k is not None
        assert_close_ref(args["key"], ref_k)


CASES = [
    Case(0, 4, 2, 64, 64),  # zero tokens: a no-op
    Case(1, 1, None, 16, 16),
    Case(7, 3, 1, 32, 16, offset=8),  # partial rotary, offset
    Case(33, 4, 2, 128, 64, layout="3d"),
    Case(5, 2, 3, 18, 6, offset=5),  # odd head size and offset: element path on GPUs
    Case(16, 8, 8, 128, 128, cache_f32=True),
    Case(9, 3, 3, 80, 80, inverse=True, layout="3d"),
    Case(6, 5, 3, 64, 32, offset=32, max_position=7),
]


@pytest.mark.parametrize("case", CASES, ids=Case.id)
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_matches_reference_cpu(dtype: str, style: str, case: Case) -> None:
    args = make_inputs(case, DTYPES[dtype], seed=case.tokens + case.head_size)
    args["is_neox"] = STYLES[style]
    run_and_check(args)


# --------------------------------------------------------------------------
# Layouts: views of a fused QKV tensor, padded heads, strided positions/cache.
# --------------------------------------------------------------------------
def views_args(
    positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, head_size: int,
    cache: torch.Tensor, is_neox: bool, offset: int,
) -> dict[str, Any]:
    return dict(
        positions=positions, query=q, key=k, head_size=head_size, cos_sin_cache=cache,
        is_neox=is_neox, rope_dim_offset=offset, inverse=False,
    )


def fused_qkv_views(
    t: int, hq: int, hk: int, d: int, pad: int, dtype: torch.dtype, device: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(qkv, q, k): q and k are [T, H*D] views of one [T, (Hq + 2 Hk) * D + pad] tensor."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(t, (hq + 2 * hk) * d + pad, generator=g).to(dtype).to(device)
    return qkv, qkv[:, : hq * d], qkv[:, hq * d : (hq + hk) * d]


def check_fused_qkv(dtype: torch.dtype, is_neox: bool, pad: int, device: str, offset: int = 0) -> None:
    t, hq, hk, d, rot = 11, 4, 2, 64, 32
    qkv, q, k = fused_qkv_views(t, hq, hk, d, pad, dtype, device, seed=pad)
    assert not q.is_contiguous() and not k.is_contiguous()
    before = qkv.clone()
    positions = torch.randint(0, 64, (t,)).to(device)
    cache = make_cache(64, rot, dtype, device)
    run_and_check(views_args(positions, q, k, d, cache, is_neox, offset))
    # The value part and the padding are untouched, bit for bit.
    assert torch.equal(qkv[:, (hq + hk) * d :], before[:, (hq + hk) * d :])


@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fused_qkv_views_cpu(dtype: str, style: str, pad: int) -> None:
    check_fused_qkv(DTYPES[dtype], STYLES[style], pad, "cpu")


def check_padded_3d(dtype: torch.dtype, is_neox: bool, device: str) -> None:
    """3-D query/key whose heads are padded: only the span of each head moves."""
    t, hq, hk, d, rot, off = 9, 3, 2, 40, 16, 8
    q_big = torch.randn(t, hq + 1, d + 8).to(dtype).to(device)
    k_big = torch.randn(t, hk, d + 4).to(dtype).to(device)
    q, k = q_big[:, 1:, 4 : 4 + d], k_big[:, :, :d]
    q_before, k_before = q_big.clone(), k_big.clone()
    positions = torch.randint(0, 64, (2 * t,)).to(device)[::2]  # strided positions
    cache_big = make_cache(64, 2 * rot, dtype, device)
    cache = cache_big[:, :rot]  # row stride 2*rot
    run_and_check(views_args(positions, q, k, d, cache, is_neox, off))
    # Outside the rotated spans of the views nothing changed.
    q_mask = torch.ones_like(q_big, dtype=torch.bool)
    q_mask[:, 1:, 4 + off : 4 + off + rot] = False
    k_mask = torch.ones_like(k_big, dtype=torch.bool)
    k_mask[:, :, off : off + rot] = False
    assert torch.equal(q_big[q_mask], q_before[q_mask])
    assert torch.equal(k_big[k_mask], k_before[k_mask])


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_padded_3d_strided_positions_and_cache_cpu(dtype: str, style: str) -> None:
    check_padded_3d(DTYPES[dtype], STYLES[style], "cpu")


@pytest.mark.parametrize("style", list(STYLES))
def test_inverse_restores_input_cpu(style: str) -> None:
    case = Case(13, 4, 2, 64, 48, offset=8, max_position=4096)
    args = make_inputs(case, torch.float32, seed=1)
    args["positions"] = torch.randint(0, 4096, (13,))
    args["is_neox"] = STYLES[style]
    q0, k0 = args["query"].clone(), args["key"].clone()
    ops.rotary_embedding(**args)
    assert not torch.allclose(args["query"], q0)
    ops.rotary_embedding(**{**args, "inverse": True})
    torch.testing.assert_close(args["query"], q0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(args["key"], k0, atol=1e-5, rtol=1e-5)


def test_multithreaded_equals_single_threaded_cpu() -> None:
    case = Case(512, 8, 2, 128, 64)
    args = make_inputs(case, torch.bfloat16, seed=11)
    old = torch.get_num_threads()
    outs = []
    try:
        for n in (1, max(2, old)):
            torch.set_num_threads(n)
            a = {**args, "query": args["query"].clone(), "key": args["key"].clone()}
            ops.rotary_embedding(**a)
            outs.append((a["query"], a["key"]))
    finally:
        torch.set_num_threads(old)
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    ref_q, ref_k = reference(args)
    assert_close_ref(outs[1][0], ref_q)
    assert ref_k is not None
    assert_close_ref(outs[1][1], ref_k)


@pytest.mark.parametrize("bad", [-1, 64, 2**40])
def test_out_of_range_position_raises_before_writing_cpu(bad: int) -> None:
    args = make_inputs(Case(6, 2, 1, 32, 32), torch.float16, seed=2)
    args["positions"][4] = bad
    q0, k0 = args["query"].clone(), args["key"].clone()
    with pytest.raises(RuntimeError, match=rf"positions\[4\] = {bad} is out of range .*max_position 64"):
        ops.rotary_embedding(**args)
    assert torch.equal(args["query"], q0) and torch.equal(args["key"], k0), "wrote before raising"
    # The fake cannot see data: it accepts (torch.compile traces), and the
    # kernel raises at run time.
    fake_call(ops.rotary_embedding, **args)


def test_empty_cache_raises_cpu() -> None:
    args = make_inputs(Case(2, 2, None, 16, 16), torch.float32)
    args["cos_sin_cache"] = args["cos_sin_cache"][:0]  # max_position 0
    with pytest.raises(RuntimeError, match=r"positions\[0\] = \d+ is out of range .*max_position 0"):
        ops.rotary_embedding(**args)
    ops.rotary_embedding(**{**args, "positions": args["positions"][:0], "query": args["query"][:0]})


def test_functional_form_does_not_modify_inputs() -> None:
    args = make_inputs(Case(5, 3, 1, 32, 32, layout="3d"), torch.bfloat16, seed=4)
    q0, k0 = args["query"].clone(), args["key"].clone()
    q, k = stableops.rotary_embedding(**args)
    assert torch.equal(args["query"], q0) and torch.equal(args["key"], k0)
    assert k is not None and q.shape == q0.shape and k.shape == k0.shape
    ref_q, ref_k = reference(args)
    assert ref_k is not None
    assert_close_ref(q, ref_q)
    assert_close_ref(k, ref_k)
    q_only, none = stableops.rotary_embedding(**{**args, "key": None})
    assert none is None and torch.equal(q_only, q)
    assert "rotary_embedding" in stableops.functional.__all__
    assert "rotary_embedding" in ops.__all__


# --------------------------------------------------------------------------
# Bad inputs: the kernel and the fake decide alike, with the same message.
# --------------------------------------------------------------------------
T, HQ, HK, D, R, P = 5, 4, 2, 64, 32, 16


def good(dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    return {
        "positions": torch.randint(0, P, (T,)),
        "query": torch.randn(T, HQ * D).to(dtype),
        "key": torch.randn(T, HK, D).to(dtype),
        "head_size": D,
        "cos_sin_cache": make_cache(P, R, dtype),
        "is_neox": True,
        "rope_dim_offset": 0,
        "inverse": False,
    }


def with_(**changes: Any) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        args = good()
        args.update(changes)
        return args

    return make


def bf16_with_cache(cache_dtype: torch.dtype) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        args = good(torch.bfloat16)
        args["cos_sin_cache"] = make_cache(P, R, cache_dtype)
        return args

    return make


BAD: dict[str, tuple[Callable[[], dict[str, Any]], list[str]]] = {
    "positions_int32": (with_(positions=torch.zeros(T, dtype=torch.int32)), ["positions must have dtype Long (int64)", "got Int"]),
    "positions_float": (with_(positions=torch.zeros(T)), ["positions must have dtype Long", "got Float"]),
    "query_float64": (with_(query=torch.randn(T, HQ * D).double(), key=None), ["query must have dtype", "got Double"]),
    "query_int64": (with_(query=torch.zeros(T, HQ * D, dtype=torch.int64), key=None), ["query must have dtype", "got Long"]),
    "key_dtype_mismatch": (with_(key=torch.randn(T, HK, D).half()), ["key must have the same dtype as query (Float), got Half"]),
    "cache_fp16_for_bf16_query": (bf16_with_cache(torch.float16), ["cos_sin_cache must have dtype BFloat16 (bfloat16) or Float (float32), got Half"]),
    "cache_float64": (with_(cos_sin_cache=make_cache(P, R, torch.float64)), ["cos_sin_cache must have dtype Float (float32), got Double"]),
    "head_size_zero": (with_(head_size=0), ["head_size must be positive, got 0"]),
    "head_size_negative": (with_(head_size=-64), ["head_size must be positive, got -64"]),
    "rope_dim_offset_negative": (with_(rope_dim_offset=-2), ["rope_dim_offset must be >= 0, got -2"]),
    "span_exceeds_head": (with_(rope_dim_offset=40), ["rope_dim_offset (40) + rot_dim (32) must not exceed head_size (64)"]),
    "rot_dim_larger_than_head": (with_(cos_sin_cache=make_cache(P, 2 * D + 2, torch.float32)), ["rot_dim (130) must not exceed head_size (64)"]),
    "rot_dim_odd": (with_(cos_sin_cache=torch.randn(P, 7)), ["rot_dim (cos_sin_cache.size(1) = 7) must be positive and even"]),
    "rot_dim_zero": (with_(cos_sin_cache=torch.randn(P, 0)), ["rot_dim (cos_sin_cache.size(1) = 0)"]),
    "cache_1d": (with_(cos_sin_cache=torch.randn(P * R)), ["cos_sin_cache must be 2-D [max_position, rot_dim], got 1-D", "[512]"]),
    "cache_last_dim_strided": (with_(cos_sin_cache=torch.randn(R, P).t()), ["cos_sin_cache must be contiguous in its last dim, got strides [1, 16]"]),
    "head_size_not_dividing_query": (with_(query=torch.randn(T, 100)), ["head_size (64) must divide the last dim of query (100), shape [5, 100]"]),
    "head_size_not_dividing_key": (with_(key=torch.randn(T, 96)), ["head_size (64) must divide the last dim of key (96)"]),
    "query_3d_last_dim": (with_(query=torch.randn(T, HQ, D // 2)), ["the last dim of the 3-D query (32) must equal head_size (64)"]),
    "query_1d": (with_(query=torch.randn(T * HQ * D)), ["query must be 2-D [num_tokens, num_heads * head_size] or 3-D", "got 1-D"]),
    "query_4d": (with_(query=torch.randn(T, 1, HQ, D)), ["query must be 2-D", "got 4-D tensor of shape [5, 1, 4, 64]"]),
    "query_last_dim_strided": (with_(query=torch.randn(HQ * D, T).t()), ["query must be contiguous in its last dim, got strides [1, 5]"]),
    "query_rows_overlap": (with_(query=torch.randn(1, HQ * D).expand(T, HQ * D)), ["rows of query overlap in memory", "strides [0, 1]"]),
    "key_heads_overlap": (with_(key=torch.randn(T, 1, D).expand(T, HK, D)), ["rows of key overlap in memory"]),
    "key_tokens_mismatch": (with_(key=torch.randn(T + 1, HK, D)), ["key has 6 tokens (shape [6, 2, 64]) but query has 5"]),
    "positions_2d": (with_(positions=torch.zeros(T, 1, dtype=torch.int64)), ["positions must be 1-D [num_tokens], got 2-D"]),
    "positions_length": (with_(positions=torch.zeros(T - 1, dtype=torch.int64)), ["positions has 4 entries but query has 5 tokens"]),
    "query_on_meta": (with_(query=torch.randn(T, HQ * D, device="meta")), ["query must be on the same device as positions (cpu), got meta"]),
    "key_on_meta": (with_(key=torch.randn(T, HK, D, device="meta")), ["key must be on the same device as positions (cpu), got meta"]),
    "cache_on_meta": (with_(cos_sin_cache=torch.randn(P, R, device="meta")), ["cos_sin_cache must be on the same device as positions (cpu), got meta"]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_kernel_and_fake_agree(case: str) -> None:
    make, substrings = BAD[case]
    msg = assert_same_decision(ops.rotary_embedding, expect_ok=False, **make())
    # STD_TORCH_CHECK prefixes "<function>, <file>:<line>, ".
    assert msg is not None and "rotary_embedding: " in msg, msg
    for s in substrings:
        assert s in msg, f"expected {s!r} in error message:\n{msg}"


@pytest.mark.parametrize(
    "variant", ["good", "no_key", "zero_tokens", "bf16_f32_cache", "3d_query_2d_key"]
)
def test_good_input_kernel_and_fake_agree(variant: str) -> None:
    args = good()
    if variant == "no_key":
        args["key"] = None
    elif variant == "zero_tokens":
        args.update(positions=torch.zeros(0, dtype=torch.int64), query=torch.randn(0, HQ * D), key=torch.randn(0, HK, D))
    elif variant == "bf16_f32_cache":
        args = bf16_with_cache(torch.float32)()
    elif variant == "3d_query_2d_key":
        args.update(query=torch.randn(T, HQ, D), key=torch.randn(T, HK * D))
    assert_same_decision(ops.rotary_embedding, expect_ok=True, **args)


def test_still_works_after_errors() -> None:
    for make, _ in BAD.values():
        with pytest.raises(RuntimeError):
            ops.rotary_embedding(**make())
    args = good()
    run_and_check(args)


# --------------------------------------------------------------------------
# opcheck, meta tensors, torch.compile.
# --------------------------------------------------------------------------
def _opcheck_samples(device: str) -> list[tuple[Any, ...]]:
    samples = []
    for dtype, case, neox in [
        (torch.float32, Case(5, 3, 1, 32, 16, offset=4), True),
        (torch.float16, Case(4, 2, None, 16, 16, layout="3d"), False),
        (torch.bfloat16, Case(3, 4, 2, 32, 32, cache_f32=True, inverse=True), True),
        (torch.float32, Case(0, 2, 2, 16, 8), False),
    ]:
        a = make_inputs(case, dtype, device=device)
        samples.append(
            (a["positions"], a["query"], a["key"], a["head_size"], a["cos_sin_cache"], neox, a["rope_dim_offset"], a["inverse"])
        )
    return samples


@pytest.mark.parametrize("idx", range(4))
def test_opcheck_cpu(idx: int) -> None:
    torch.library.opcheck(torch.ops.stableops.rotary_embedding.default, _opcheck_samples("cpu")[idx])


def test_meta_tensors_validate_only() -> None:
    args = make_inputs(Case(3, 2, 1, 16, 16), torch.float16)
    meta = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    ops.rotary_embedding(**meta)  # the fake: validation only
    with pytest.raises(RuntimeError, match="head_size must be positive"):
        ops.rotary_embedding(**{**meta, "head_size": 0})


def _with_intermediates(
    positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cache: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """An intermediate rotated in place, the functional form, and graph
    inputs mutated in place (default rope_dim_offset/inverse)."""
    q2 = q * 2
    ops.rotary_embedding(positions, q2, None, 32, cache, True, 8, False)
    fq, fk = stableops.rotary_embedding(positions, q, k, 32, cache, False)
    ops.rotary_embedding(positions, q, k, 32, cache, False)
    assert fk is not None
    return q2 + 1, fq, fk


def _inputs_in_place(
    positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor, cache: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Only graph inputs mutated in place: inductor calls the op on them and
    generates no kernel of its own."""
    ops.rotary_embedding(positions, q, k, 32, cache, False)
    return ()


def _compiled_matches_eager(
    fn: Callable[..., tuple[torch.Tensor, ...]], device: str, dtype: torch.dtype, dynamic: bool,
    backend: str = "inductor",
) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, dynamic=dynamic, backend=backend)
    for tokens in (7, 13) if dynamic else (7,):
        a = make_inputs(Case(tokens, 3, 2, 32, 16), dtype, seed=tokens, device=device)
        eager_in = (a["positions"], a["query"].clone(), a["key"].clone(), a["cos_sin_cache"])
        comp_in = (a["positions"], a["query"].clone(), a["key"].clone(), a["cos_sin_cache"])
        eager = fn(*eager_in)
        got = compiled(*comp_in)
        assert len(got) == len(eager)
        for e, c in zip(eager, got):
            torch.testing.assert_close(c, e, atol=0, rtol=0)
        torch.testing.assert_close(comp_in[1], eager_in[1], atol=0, rtol=0)  # mutated inputs
        torch.testing.assert_close(comp_in[2], eager_in[2], atol=0, rtol=0)
        ref_q, ref_k = reference({**a, "is_neox": False, "rope_dim_offset": 0, "inverse": False})
        assert_close_ref(comp_in[1], ref_q)
        assert ref_k is not None
        assert_close_ref(comp_in[2], ref_k)


# On the CPU inductor's C++ kernels take long to build on a loaded 2-core
# machine: inductor compiles the graph that mutates only its inputs (no
# generated kernel), and the graph with intermediates and the functional form
# goes through aot_eager (dynamo, functionalization and the fake alike). The
# GPU test compiles both with inductor.
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph_cpu(dynamic: bool) -> None:
    _compiled_matches_eager(_inputs_in_place, "cpu", torch.float32, dynamic)
    _compiled_matches_eager(_with_intermediates, "cpu", torch.bfloat16, dynamic, backend="aot_eager")


def test_schema_arguments() -> None:
    assert ops.has_op("stableops", "rotary_embedding")
    schema = torch.ops.stableops.rotary_embedding.default._schema
    names = [a.name for a in schema.arguments]
    assert names == [
        "positions", "query", "key", "head_size", "cos_sin_cache", "is_neox", "rope_dim_offset", "inverse"
    ]
    assert [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write] == ["query", "key"]
    assert {a.name: a.default_value for a in schema.arguments if a.has_default_value()} == {
        "rope_dim_offset": 0,
        "inverse": False,
    }
    assert not schema.returns


# ==========================================================================
# GPU (CUDA, or ROCm through torch.cuda): skipped without a visible GPU.
# ==========================================================================
# Cases chosen to hit both kernel paths: 16-byte vectors (aligned spans,
# whole packs) and the element path (odd offsets/sizes), and head counts that
# leave the last head group of a thread partial.
GPU_CASES = [
    Case(1, 32, 8, 128, 128),  # decode shape: vectors
    Case(37, 32, 8, 128, 64, max_position=4096),  # partial rotary: vectors
    Case(19, 3, 2, 128, 128, offset=0, layout="3d", cache_f32=True),  # 5 heads: partial groups
    Case(23, 5, None, 64, 32, offset=16, inverse=True),  # offset of a whole pack
    Case(17, 4, 2, 64, 8),  # rot_dim 8: GPT-J vectors only for 16-bit types
    Case(13, 3, 1, 72, 24, offset=2),  # offset of one element: element path
    Case(9, 2, 3, 18, 6, offset=5),  # odd sizes: element path
    Case(4099, 8, 2, 128, 128),  # many blocks
    # NeoX spans of 12 (fp16/bf16) or 24 (fp32) packs: not a power of two,
    # so the per-pair unit kernel instead of the lanes-paired one.
    Case(11, 4, 2, 128, 96),
    # 64 packs (fp16/bf16, rot_dim 512): more lanes than a warp of 32.
    Case(5, 2, 1, 512, 512),
    # The lanes kernel's extremes for fp16/bf16: 32 packs (rot_dim 256; fp32
    # falls back at 64) and 2 packs (rot_dim 16; fp32 takes 4).
    Case(6, 3, 2, 256, 256),
    Case(7, 3, 1, 32, 16, offset=8),
]


@requires_gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=Case.id)
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_matches_reference_gpu(dtype: str, style: str, case: Case) -> None:
    args = make_inputs(case, DTYPES[dtype], seed=case.tokens, device="cuda")
    args["is_neox"] = STYLES[style]
    # Guard rows around the cache: reading outside the indexed row would
    # turn the result into NaN.
    cache = args["cos_sin_cache"]
    guarded = torch.full((cache.shape[0] + 2, cache.shape[1]), float("nan"), dtype=cache.dtype, device="cuda")
    guarded[1:-1] = cache
    args["cos_sin_cache"] = guarded[1:-1]
    run_and_check(args)
    torch.cuda.synchronize()


@requires_gpu
@pytest.mark.parametrize("pad", [0, 8, 3])  # 3: rows not 16-byte aligned (element path)
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fused_qkv_views_gpu(dtype: str, style: str, pad: int) -> None:
    check_fused_qkv(DTYPES[dtype], STYLES[style], pad, "cuda")
    check_fused_qkv(DTYPES[dtype], STYLES[style], pad, "cuda", offset=16)


@requires_gpu
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_padded_3d_strided_positions_and_cache_gpu(dtype: str, style: str) -> None:
    check_padded_3d(DTYPES[dtype], STYLES[style], "cuda")


@requires_gpu
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gpu_matches_cpu_kernel(dtype: str, style: str) -> None:
    case = Case(64, 8, 2, 128, 64, offset=32, cache_f32=True)
    args = make_inputs(case, DTYPES[dtype], seed=5)
    args["is_neox"] = STYLES[style]
    gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    ops.rotary_embedding(**args)
    ops.rotary_embedding(**gpu)
    # Same float32 math, one rounding: equal up to an ulp of the output dtype
    # (FMA contraction may differ).
    atol, rtol = TOL[DTYPES[dtype]]
    torch.testing.assert_close(gpu["query"].cpu(), args["query"], atol=atol, rtol=rtol)
    torch.testing.assert_close(gpu["key"].cpu(), args["key"], atol=atol, rtol=rtol)


@requires_gpu
@pytest.mark.parametrize("style", list(STYLES))
def test_out_of_range_positions_leave_token_unchanged_gpu(style: str) -> None:
    case = Case(8, 4, 2, 128, 64, offset=64, max_position=32)
    args = make_inputs(case, torch.bfloat16, seed=6, device="cuda")
    args["is_neox"] = STYLES[style]
    bad_tokens = [1, 4, 6]
    for tok, pos in zip(bad_tokens, [-1, 32, 2**40]):
        args["positions"][tok] = pos
    q0, k0 = args["query"].clone(), args["key"].clone()
    ops.rotary_embedding(**args)  # no error: no host sync on GPUs
    torch.cuda.synchronize()
    good_tokens = [t for t in range(8) if t not in bad_tokens]
    assert torch.equal(args["query"][bad_tokens], q0[bad_tokens])
    assert torch.equal(args["key"][bad_tokens], k0[bad_tokens])
    ok = {**args, "positions": args["positions"][good_tokens], "query": q0[good_tokens], "key": k0[good_tokens]}
    ref_q, ref_k = reference(ok)
    assert_close_ref(args["query"][good_tokens], ref_q)
    assert ref_k is not None
    assert_close_ref(args["key"][good_tokens], ref_k)


@requires_gpu
def test_empty_cache_leaves_tokens_unchanged_gpu() -> None:
    args = make_inputs(Case(3, 2, 1, 32, 32), torch.float32, device="cuda")
    args["cos_sin_cache"] = args["cos_sin_cache"][:0]  # max_position 0
    q0, k0 = args["query"].clone(), args["key"].clone()
    ops.rotary_embedding(**args)
    torch.cuda.synchronize()
    assert torch.equal(args["query"], q0) and torch.equal(args["key"], k0)
    with pytest.raises(RuntimeError, match=r"positions\[0\] = \d+ is out of range"):
        ops.rotary_embedding(**{k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in args.items()})


@requires_gpu
def test_inverse_restores_input_gpu() -> None:
    case = Case(33, 8, 2, 128, 128, max_position=4096)
    args = make_inputs(case, torch.float32, seed=7, device="cuda")
    q0, k0 = args["query"].clone(), args["key"].clone()
    ops.rotary_embedding(**args)
    ops.rotary_embedding(**{**args, "inverse": True})
    torch.testing.assert_close(args["query"], q0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(args["key"], k0, atol=1e-5, rtol=1e-5)


@requires_gpu
def test_zero_tokens_gpu() -> None:
    args = make_inputs(Case(0, 4, 2, 64, 64), torch.float16, device="cuda")
    ops.rotary_embedding(**args)
    torch.cuda.synchronize()
    assert args["query"].shape == (0, 4 * 64)


@requires_gpu
def test_cuda_graph_capture_and_replay() -> None:
    case = Case(48, 8, 2, 128, 128, max_position=512)
    args = make_inputs(case, torch.bfloat16, seed=8, device="cuda")
    positions, q, k = args["positions"], args["query"], args["key"]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture
        ops.rotary_embedding(**args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.rotary_embedding(**args)
    # New positions and data in the same buffers, then replay.
    new = make_inputs(case, torch.bfloat16, seed=9, device="cuda")
    positions.copy_(new["positions"])
    q.copy_(new["query"])
    k.copy_(new["key"])
    graph.replay()
    torch.cuda.synchronize()
    ref_q, ref_k = reference(new)
    assert_close_ref(q, ref_q)
    assert ref_k is not None
    assert_close_ref(k, ref_k)


@requires_gpu
def test_runs_on_current_stream() -> None:
    """Inputs are written on a side stream after a long sleep; a kernel on any
    other stream would rotate the stale (zero) query."""
    case = Case(256, 8, 2, 128, 128)
    args = make_inputs(case, torch.float16, seed=10, device="cuda")
    q = torch.zeros_like(args["query"])
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        q.copy_(args["query"])
        ops.rotary_embedding(**{**args, "query": q})
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    ref_q, _ = reference(args)
    assert_close_ref(q, ref_q)


GPU_BAD = {
    "positions_on_cpu": (lambda a: {**a, "positions": a["positions"].cpu()}, "query must be on the same device as positions (cpu), got cuda"),
    "cache_on_cpu": (lambda a: {**a, "cos_sin_cache": a["cos_sin_cache"].cpu()}, "cos_sin_cache must be on the same device as positions (cuda"),
    "odd_rot_dim": (lambda a: {**a, "cos_sin_cache": a["cos_sin_cache"][:, :7]}, "rot_dim (cos_sin_cache.size(1) = 7) must be positive and even"),
    "positions_int32": (lambda a: {**a, "positions": a["positions"].int()}, "positions must have dtype Long (int64), got Int"),
    "span_exceeds_head": (lambda a: {**a, "rope_dim_offset": 40}, "rope_dim_offset (40) + rot_dim (32) must not exceed head_size (64)"),
}


def _from_op_name(msg: str | None) -> str | None:
    """The message from "rotary_embedding: " on: without STD_TORCH_CHECK's
    "<function>, <file>:<line>, " prefix, which the fake's device check (in
    Python, like stableops::check_devices) does not have."""
    return msg[msg.index("rotary_embedding: ") :] if msg and "rotary_embedding: " in msg else msg


@requires_gpu
@pytest.mark.parametrize("case", sorted(GPU_BAD))
def test_bad_input_gpu(case: str) -> None:
    change, expected = GPU_BAD[case]
    args = change(make_inputs(Case(5, 4, 2, 64, 32), torch.bfloat16, device="cuda"))
    if case.endswith("_on_cpu"):
        # Mixed devices reach the CUDA kernel's C++ check_devices, while the
        # fake raises from Python: same message after the source location.
        msg = decision(lambda: ops.rotary_embedding(**args))
        fake = decision(lambda: fake_call(ops.rotary_embedding, **args))
        assert _from_op_name(fake) == _from_op_name(msg), (fake, msg)
    else:
        msg = assert_same_decision(ops.rotary_embedding, expect_ok=False, **args)
    assert msg is not None and expected in msg, msg
    assert torch.ones(4, device="cuda").sum().item() == 4  # no sticky error


@requires_gpu
@pytest.mark.parametrize("idx", range(4))
def test_opcheck_gpu(idx: int) -> None:
    torch.library.opcheck(torch.ops.stableops.rotary_embedding.default, _opcheck_samples("cuda")[idx])


@requires_gpu
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_torch_compile_fullgraph_gpu(dynamic: bool) -> None:
    _compiled_matches_eager(_inputs_in_place, "cuda", torch.float16, dynamic)
    _compiled_matches_eager(_with_intermediates, "cuda", torch.bfloat16, dynamic)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

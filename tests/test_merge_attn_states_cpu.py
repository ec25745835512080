"""Numerical tests of stableops::merge_attn_states on CPU against a float64
reference, plus opcheck and torch.compile(fullgraph=True)."""

from __future__ import annotations

import os
import sys
import tempfile

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(
        prefix="inductor_", dir=os.environ["TEST_TMPDIR"]
    )

import pytest
import torch
from absl.testing import parameterized

import stableops
from stableops import ops

from merge_reference import FP8_MAX, fp8_bits, reference

INF = float("inf")
TOL = {  # (atol, rtol) for values; LSEs are float32 everywhere
    torch.float32: (2e-6, 2e-6),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
}
LSE_TOL = (2e-6, 2e-6)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}



def make_inputs(
    t: int, h: int, d: int, dtype: torch.dtype, seed: int = 0, special: bool = False
) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randn(t, h, d, generator=g).to(dtype)
    suffix = torch.randn(t, h, d, generator=g).to(dtype)
    plse = torch.randn(h, t, generator=g) * 4
    slse = torch.randn(h, t, generator=g) * 4
    if special and t * h >= 1:
        flat_p, flat_s = plse.view(-1), slse.view(-1)
        n = flat_p.numel()
        cases = [
            (-INF, -INF),  # both empty -> prefix, -inf
            (INF, -INF),  # +inf counts as -inf -> both empty
            (INF, INF),
            (-INF, 1.5),  # only suffix
            (2.0, -INF),  # only prefix
            (INF, 0.5),  # +inf prefix ignored
            (80.0, -80.0),  # huge gap
            (-1e4, -1e4 + 3.0),
            (30.0, 30.0),
        ]
        for i, (a, b) in enumerate(cases[:n]):
            j = (i * 7919) % n
            flat_p[j], flat_s[j] = a, b
    return {
        "prefix_output": prefix,
        "prefix_lse": plse,
        "suffix_output": suffix,
        "suffix_lse": slse,
    }


def run(
    inputs: dict[str, torch.Tensor], with_lse: bool = True, lse_layout: str = "contiguous"
) -> tuple[torch.Tensor, torch.Tensor | None]:
    t, h, d = inputs["prefix_output"].shape
    out = torch.full((t, h, d), float("nan"), dtype=inputs["prefix_output"].dtype)
    out_lse: torch.Tensor | None = None
    if with_lse:
        if lse_layout == "transposed":
            out_lse = torch.full((t, h), float("nan")).t()
        else:
            out_lse = torch.full((h, t), float("nan"))
    ops.merge_attn_states(
        out,
        out_lse,
        inputs["prefix_output"],
        inputs["prefix_lse"],
        inputs["suffix_output"],
        inputs["suffix_lse"],
    )
    return out, out_lse


def assert_matches(
    inputs: dict[str, torch.Tensor], out: torch.Tensor, out_lse: torch.Tensor | None
) -> None:
    ref_out, ref_lse = reference(**inputs)
    atol, rtol = TOL[out.dtype]
    assert not out.isnan().any(), "unwritten (NaN-poisoned) output elements"
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=rtol)
    if out_lse is not None:
        assert out_lse.dtype == torch.float32
        assert not out_lse.isnan().any(), "unwritten (NaN-poisoned) output_lse elements"
        torch.testing.assert_close(
            out_lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1]
        )


SHAPES = [(0, 4, 16), (1, 1, 16), (1, 8, 64), (7, 3, 32), (33, 5, 128), (64, 16, 80), (5, 2, 256)]


class MergeAttnStatesCpuTest(parameterized.TestCase):
    @parameterized.product(dtype=list(DTYPES), shape=SHAPES, special=[False, True])
    def test_matches_reference(self, dtype: str, shape: tuple[int, int, int], special: bool) -> None:
        inputs = make_inputs(*shape, DTYPES[dtype], seed=sum(shape), special=special)
        out, out_lse = run(inputs)
        self.assertEqual(out.dtype, DTYPES[dtype])
        assert_matches(inputs, out, out_lse)

    @parameterized.product(dtype=list(DTYPES), shape=[(0, 2, 8), (1, 1, 8), (9, 4, 24)])
    def test_output_lse_none(self, dtype: str, shape: tuple[int, int, int]) -> None:
        inputs = make_inputs(*shape, DTYPES[dtype], seed=3, special=True)
        out, out_lse = run(inputs, with_lse=False)
        self.assertIsNone(out_lse)
        assert_matches(inputs, out, None)

    @parameterized.parameters(*DTYPES)
    def test_both_neg_inf_gives_prefix_and_neg_inf(self, dtype: str) -> None:
        inputs = make_inputs(4, 3, 16, DTYPES[dtype], seed=5)
        inputs["prefix_lse"][1, 2] = -INF
        inputs["suffix_lse"][1, 2] = -INF
        inputs["prefix_lse"][0, 3] = INF  # +inf counts as -inf
        inputs["suffix_lse"][0, 3] = -INF
        out, out_lse = run(inputs)
        assert out_lse is not None
        for tok, head in [(2, 1), (3, 0)]:
            self.assertTrue(torch.equal(out[tok, head], inputs["prefix_output"][tok, head]))
            self.assertEqual(out_lse[head, tok].item(), -INF)
        assert_matches(inputs, out, out_lse)

    @parameterized.parameters(*DTYPES)
    def test_non_contiguous_lse_strides(self, dtype: str) -> None:
        t, h, d = 11, 6, 32
        inputs = make_inputs(t, h, d, DTYPES[dtype], seed=7, special=True)
        # transposed view: [H, T] with strides (1, H)
        inputs["prefix_lse"] = inputs["prefix_lse"].t().contiguous().t()
        # strided view: every other column of a wider buffer
        wide = torch.randn(h, 2 * t)
        wide[:, ::2] = inputs["suffix_lse"]
        inputs["suffix_lse"] = wide[:, ::2]
        self.assertFalse(inputs["prefix_lse"].is_contiguous())
        self.assertFalse(inputs["suffix_lse"].is_contiguous())
        out, out_lse = run(inputs, lse_layout="transposed")
        assert out_lse is not None
        self.assertFalse(out_lse.is_contiguous())
        assert_matches(inputs, out, out_lse)

    @parameterized.parameters(*DTYPES)
    def test_broadcast_lse_stride_zero(self, dtype: str) -> None:
        t, h, d = 5, 3, 16
        inputs = make_inputs(t, h, d, DTYPES[dtype], seed=8)
        inputs["prefix_lse"] = torch.randn(h, 1).expand(h, t)
        out, out_lse = run(inputs)
        assert_matches(inputs, out, out_lse)

    @parameterized.parameters(*DTYPES)
    def test_strided_value_tensors(self, dtype: str) -> None:
        t, h, d = 6, 4, 32
        dt = DTYPES[dtype]
        inputs = make_inputs(t, h, d, dt, seed=9)
        big = torch.randn(t, 2 * h, d).to(dt)
        big[:, 1::2] = inputs["prefix_output"]
        inputs["prefix_output"] = big[:, 1::2]  # head stride 2*d, offset d
        self.assertFalse(inputs["prefix_output"].is_contiguous())
        out_big = torch.full((2 * t, h, d), float("nan"), dtype=dt)
        out = out_big[::2]
        out_lse = torch.full((h, t), float("nan"))
        ops.merge_attn_states(out, out_lse, **inputs)
        assert_matches(inputs, out, out_lse)
        self.assertTrue(out_big[1::2].isnan().all(), "wrote outside the output view")

    def test_multithreaded_equals_single_threaded(self) -> None:
        inputs = make_inputs(512, 8, 128, torch.bfloat16, seed=11, special=True)
        old = torch.get_num_threads()
        try:
            torch.set_num_threads(1)
            out1, lse1 = run(inputs)
            torch.set_num_threads(max(2, old))
            out2, lse2 = run(inputs)
        finally:
            torch.set_num_threads(old)
        self.assertTrue(torch.equal(out1, out2))
        assert lse1 is not None and lse2 is not None
        self.assertTrue(torch.equal(lse1, lse2))
        assert_matches(inputs, out2, lse2)

    def test_nan_lse_propagates(self) -> None:
        inputs = make_inputs(2, 2, 8, torch.float32, seed=12)
        inputs["prefix_lse"][0, 1] = float("nan")
        out, out_lse = run(inputs)
        assert out_lse is not None
        self.assertTrue(out_lse[0, 1].isnan())
        self.assertTrue(out[1, 0].isnan().all())
        self.assertFalse(out[0].isnan().any())


def _opcheck_samples() -> list[tuple[torch.Tensor | None, ...]]:
    samples = []
    for dt, (t, h, d), with_lse in [
        (torch.float32, (5, 3, 16), True),
        (torch.float16, (4, 2, 8), True),
        (torch.bfloat16, (3, 4, 32), False),
        (torch.float32, (0, 2, 8), True),
    ]:
        x = make_inputs(t, h, d, dt, seed=t + h + d, special=True)
        out = torch.empty(t, h, d, dtype=dt)
        lse = torch.empty(h, t) if with_lse else None
        samples.append(
            (out, lse, x["prefix_output"], x["prefix_lse"], x["suffix_output"], x["suffix_lse"])
        )
    return samples


@pytest.mark.parametrize("idx", range(4))
def test_opcheck(idx: int) -> None:
    args = _opcheck_samples()[idx]
    torch.library.opcheck(torch.ops.stableops.merge_attn_states.default, args)


def test_opcheck_fp8_output_and_prefill() -> None:
    x = make_inputs(6, 2, 16, torch.bfloat16, seed=5, special=True)
    out = torch.empty(6, 2, 16, dtype=torch.float8_e4m3fn)
    args = (out, torch.empty(2, 6), x["prefix_output"], x["prefix_lse"], x["suffix_output"], x["suffix_lse"])
    # Not test_schema: it compares the mutated FP8 output with torch ops
    # that have no Float8 CPU kernel ("mul_cpu_reduced_float" not implemented).
    torch.library.opcheck(
        torch.ops.stableops.merge_attn_states.default,
        args,
        {"prefill_tokens_with_context": 3, "output_scale": torch.tensor([0.25])},
        test_utils=("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"),
    )


def test_meta_tensors() -> None:
    x = make_inputs(3, 2, 16, torch.float16)
    meta = {k: v.to("meta") for k, v in x.items()}
    out = torch.empty(3, 2, 16, dtype=torch.float16, device="meta")
    lse = torch.empty(2, 3, device="meta")
    ops.merge_attn_states(out, lse, **meta)  # runs the fake: validation only


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
def test_torch_compile_fullgraph(dtype: torch.dtype) -> None:
    torch._dynamo.reset()

    def f(
        prefix_output: torch.Tensor,
        prefix_lse: torch.Tensor,
        suffix_output: torch.Tensor,
        suffix_lse: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.empty_like(prefix_output)
        lse = torch.empty_like(prefix_lse)
        ops.merge_attn_states(out, lse, prefix_output * 1, prefix_lse, suffix_output, suffix_lse)
        return out.float() * 2, lse + 1

    def g(
        out: torch.Tensor,
        prefix_output: torch.Tensor,
        prefix_lse: torch.Tensor,
        suffix_output: torch.Tensor,
        suffix_lse: torch.Tensor,
    ) -> None:  # mutates a graph input; output_lse None
        torch.ops.stableops.merge_attn_states(
            out, None, prefix_output, prefix_lse, suffix_output, suffix_lse
        )

    x = make_inputs(9, 4, 32, dtype, seed=13, special=True)
    args = (x["prefix_output"], x["prefix_lse"], x["suffix_output"], x["suffix_lse"])
    eager = f(*args)
    compiled = torch.compile(f, fullgraph=True)(*args)
    torch.testing.assert_close(compiled, eager, atol=0, rtol=0, equal_nan=True)

    out_eager = torch.full((9, 4, 32), float("nan"), dtype=dtype)
    out_comp = out_eager.clone()
    g(out_eager, *args)
    torch.compile(g, fullgraph=True)(out_comp, *args)
    assert torch.equal(out_comp, out_eager)
    assert_matches(x, out_comp, None)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("prefill", [0, 1, 5, 9, 100])
def test_prefill_tokens_with_context(dtype: torch.dtype, prefill: int) -> None:
    """Tokens past prefill_tokens_with_context take the suffix and its LSE
    unchanged (bit for bit, +inf LSE included); the rest merge."""
    x = make_inputs(9, 3, 16, dtype, seed=prefill, special=True)
    x["suffix_lse"][0, -1] = INF  # kept as is where the suffix passes through
    out = torch.full((9, 3, 16), float("nan"), dtype=dtype)
    lse = torch.full((3, 9), float("nan"))
    ops.merge_attn_states(out, lse, **x, prefill_tokens_with_context=prefill)
    n = min(prefill, 9)
    assert torch.equal(out[n:], x["suffix_output"][n:])
    assert torch.equal(lse[:, n:], x["suffix_lse"][:, n:])
    ref_out, ref_lse = reference(**x, prefill_tokens_with_context=prefill)
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(out.double(), ref_out, atol=atol, rtol=rtol)
    torch.testing.assert_close(lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1])


@pytest.mark.parametrize("fp8", list(FP8_MAX), ids=["e4m3fn", "e4m3fnuz"])
@pytest.mark.parametrize("prefill", [None, 4])
def test_fp8_output_bit_exact(fp8: torch.dtype, prefill: int | None) -> None:
    """FP8 output = torch's conversion of clamp(merged / scale): bit-exact
    against the float32 merge of the same inputs."""
    x = make_inputs(9, 4, 32, torch.float32, seed=3, special=True)
    x["prefix_output"] *= 300  # values past the format's MAX saturate
    merged = torch.empty(9, 4, 32)
    ops.merge_attn_states(merged, None, **x, prefill_tokens_with_context=prefill)
    scale = 0.37
    out = torch.empty(9, 4, 32, dtype=fp8)
    lse = torch.empty(4, 9)
    ops.merge_attn_states(out, lse, **x, prefill_tokens_with_context=prefill, output_scale=torch.tensor([scale]))
    assert torch.equal(out.view(torch.uint8), fp8_bits(merged, scale, fp8))
    ref_lse = reference(**x, prefill_tokens_with_context=prefill)[1]
    torch.testing.assert_close(lse.double(), ref_lse, atol=LSE_TOL[0], rtol=LSE_TOL[1])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_fp8_output_half_inputs(dtype: torch.dtype) -> None:
    """Half-precision inputs with an FP8 output: within one FP8 step of the
    float64 reference (the merged value is float32 before the conversion)."""
    x = make_inputs(7, 3, 64, dtype, seed=11, special=True)
    out, _ = stableops.merge_attn_states(**x, output_scale=torch.tensor([0.5]))
    assert out.dtype == torch.float8_e4m3fn
    ref = (reference(**x)[0] / 0.5).clamp(-448, 448)
    got = out.double()
    assert ((got - ref).abs() <= ref.abs() * 2**-3 + 2**-9).all()


def test_functional_form_leaves_inputs_alone() -> None:
    x = make_inputs(5, 2, 16, torch.float32, seed=2)
    before = {k: v.clone() for k, v in x.items()}
    out, lse = stableops.merge_attn_states(**x)
    for k in x:
        assert torch.equal(x[k], before[k])
    assert_matches(x, out, lse)


def test_package_exposes_ops() -> None:
    assert stableops.ops is ops
    assert ops.has_op("stableops", "merge_attn_states")
    assert not ops.has_op("stableops", "definitely_not_an_op")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

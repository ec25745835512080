"""Invalid inputs to stableops::merge_attn_states raise RuntimeError naming the
bad value and never crash; the fake (torch.compile, meta tensors) decides
exactly as the kernel does, with the same message: every case runs through
both."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
import torch

from stableops import ops

from fake_parity import assert_same_decision

T, H, D = 5, 4, 16

Args = dict[str, "torch.Tensor | int | None"]


def good(dtype: torch.dtype = torch.float32, t: int = T, h: int = H, d: int = D) -> Args:
    return {
        "output": torch.empty(t, h, d, dtype=dtype),
        "output_lse": torch.empty(h, t),
        "prefix_output": torch.randn(t, h, d).to(dtype),
        "prefix_lse": torch.randn(h, t),
        "suffix_output": torch.randn(t, h, d).to(dtype),
        "suffix_lse": torch.randn(h, t),
    }


def with_(**changes: torch.Tensor | int | None) -> Callable[[], Args]:
    def make() -> Args:
        args = good()
        args.update(changes)
        return args

    return make


def all_values(dtype: torch.dtype, d: int = D) -> Callable[[], Args]:
    def make() -> Args:
        args = good(d=d)
        for k in ("output", "prefix_output", "suffix_output"):
            args[k] = torch.ones(T, H, d).to(dtype)
        return args

    return make


def misaligned() -> Args:
    args = good()
    base = torch.randn(T, H, D + 4)
    args["prefix_output"] = base[:, :, 1 : D + 1]  # 4-byte offset, strides ok
    return args


def bad_value_strides() -> Args:
    args = good()
    base = torch.randn(T, H, D + 2)
    args["suffix_output"] = base[:, :, :D]  # head stride 18: not a multiple of 4
    return args


def last_dim_not_contiguous() -> Args:
    args = good()
    args["prefix_output"] = torch.randn(T, D, H).transpose(1, 2)
    return args


CASES: dict[str, tuple[Callable[[], Args], list[str]]] = {
    "values_int32": (all_values(torch.int32), ["output must have dtype", "got Int"]),
    "values_float64": (all_values(torch.float64), ["output must have dtype", "got Double"]),
    "prefix_dtype_mismatch": (
        with_(prefix_output=torch.randn(T, H, D).half()),
        ["prefix_output must have the same dtype as output (Float)", "got Half"],
    ),
    "prefix_lse_float16": (
        with_(prefix_lse=torch.randn(H, T).half()),
        ["prefix_lse must have dtype Float", "got Half"],
    ),
    "suffix_lse_float64": (
        with_(suffix_lse=torch.randn(H, T).double()),
        ["suffix_lse must have dtype Float", "got Double"],
    ),
    "output_lse_float16": (
        with_(output_lse=torch.empty(H, T, dtype=torch.float16)),
        ["output_lse must have dtype Float", "got Half"],
    ),
    "suffix_shape_mismatch": (
        with_(suffix_output=torch.randn(T, H, D + 4)),
        ["suffix_output shape [5, 4, 20] does not match output shape [5, 4, 16]"],
    ),
    "prefix_tokens_mismatch": (
        with_(prefix_output=torch.randn(T + 1, H, D)),
        ["prefix_output shape [6, 4, 16]", "[5, 4, 16]"],
    ),
    "output_2d": (
        with_(output=torch.empty(T, H * D)),
        ["output must be 3-D", "got 2-D", "[5, 64]"],
    ),
    "prefix_4d": (
        with_(prefix_output=torch.randn(T, H, D, 1)),
        ["prefix_output must be 3-D", "got 4-D"],
    ),
    "lse_transposed_shape": (
        with_(prefix_lse=torch.randn(T, H)),
        ["prefix_lse must have shape [num_heads, num_tokens] = [4, 5], got [5, 4]"],
    ),
    "lse_1d": (
        with_(suffix_lse=torch.randn(H * T)),
        ["suffix_lse must have shape [num_heads, num_tokens] = [4, 5], got [20]"],
    ),
    "output_lse_wrong_shape": (
        with_(output_lse=torch.empty(H, T + 1)),
        ["output_lse must have shape", "got [4, 6]"],
    ),
    "last_dim_not_contiguous": (
        last_dim_not_contiguous,
        ["prefix_output must be contiguous in its last (head_size) dim", "strides [64, 1, 4]"],
    ),
    "head_size_fp32_not_multiple_of_4": (
        all_values(torch.float32, d=6),
        ["head_size (6) must be a positive multiple of 4 for Float"],
    ),
    "head_size_fp16_not_multiple_of_8": (
        all_values(torch.float16, d=12),
        ["head_size (12) must be a positive multiple of 8 for Half"],
    ),
    "head_size_bf16_not_multiple_of_8": (
        all_values(torch.bfloat16, d=4),
        ["head_size (4) must be a positive multiple of 8 for BFloat16"],
    ),
    "head_size_zero": (all_values(torch.float32, d=0), ["head_size (0)"]),
    "misaligned_data_pointer": (misaligned, ["prefix_output data pointer must be 16-byte aligned"]),
    "value_strides_not_vector_multiple": (
        bad_value_strides,
        ["suffix_output strides [72, 18, 1] must be multiples of 4 elements"],
    ),
    "lse_on_meta": (
        with_(prefix_lse=torch.randn(H, T, device="meta")),
        ["prefix_lse must be on the same device as output (cpu), got meta"],
    ),
    "output_on_meta": (
        with_(output=torch.empty(T, H, D, device="meta")),
        ["must be on the same device as output (meta), got cpu"],
    ),
    "fp8_output_without_scale": (
        with_(output=torch.empty(T, H, D, dtype=torch.float8_e4m3fn)),
        ["output has dtype Float8_e4m3fn, which needs output_scale"],
    ),
    "scale_with_float_output": (
        with_(output_scale=torch.tensor([1.0])),
        ["output must have dtype Float8_e4m3fn or Float8_e4m3fnuz when output_scale is given", "got Float"],
    ),
    "scale_float16": (
        with_(output=torch.empty(T, H, D, dtype=torch.float8_e4m3fn), output_scale=torch.tensor([1.0]).half()),
        ["output_scale must have dtype Float (float32)", "got Half"],
    ),
    "scale_two_elements": (
        with_(output=torch.empty(T, H, D, dtype=torch.float8_e4m3fnuz), output_scale=torch.tensor([1.0, 2.0])),
        ["output_scale must have one element, got shape [2]"],
    ),
    "scale_on_meta": (
        with_(output=torch.empty(T, H, D, dtype=torch.float8_e4m3fn), output_scale=torch.ones(1, device="meta")),
        ["output_scale must be on the same device as output (cpu), got meta"],
    ),
    "fp8_inputs": (
        with_(
            output=torch.empty(T, H, D, dtype=torch.float8_e4m3fn),
            output_scale=torch.tensor([1.0]),
            prefix_output=torch.randn(T, H, D).to(torch.float8_e4m3fn),
        ),
        ["prefix_output must have dtype Float (float32), Half (float16) or BFloat16 (bfloat16)", "got Float8_e4m3fn"],
    ),
    "negative_prefill_tokens": (
        with_(prefill_tokens_with_context=-1),
        ["prefill_tokens_with_context must be >= 0 or None, got -1"],
    ),
    "output_lse_on_meta": (
        with_(output_lse=torch.empty(H, T, device="meta")),
        ["output_lse must be on the same device as output (cpu), got meta"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_runtime_error(case: str) -> None:
    make, substrings = CASES[case]
    args = make()
    with pytest.raises(RuntimeError) as info:
        ops.merge_attn_states(**args)
    msg = str(info.value)
    assert "merge_attn_states" in msg
    for s in substrings:
        assert s in msg, f"expected {s!r} in error message:\n{msg}"


@pytest.mark.parametrize("case", sorted(CASES) + ["good"])
def test_fake_decides_as_the_kernel(case: str) -> None:
    """Same accept/reject decision and message from the kernel and the fake."""
    args = good() if case == "good" else CASES[case][0]()
    assert_same_decision(ops.merge_attn_states, expect_ok=case == "good", **args)


def test_still_works_after_errors() -> None:
    for make, _ in CASES.values():
        with pytest.raises(RuntimeError):
            ops.merge_attn_states(**make())
    args = good()
    out = args["output"]
    assert out is not None
    out.fill_(float("nan"))
    ops.merge_attn_states(**args)
    assert not out.isnan().any()


def test_none_for_required_tensor_is_rejected() -> None:
    args = good()
    args["prefix_lse"] = None
    with pytest.raises((RuntimeError, TypeError)):
        ops.merge_attn_states(**args)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

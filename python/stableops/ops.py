"""Typed Python wrappers around the ``torch.ops.stableops*`` operators.

Wrappers for GPU-only operators are defined only when the loaded library
registers them (GPU builds); use :func:`has_op` to test for them.
"""

from __future__ import annotations

import torch

from ._dispatch import has_op

__all__ = ["has_op", "merge_attn_states"]


def merge_attn_states(
    output: torch.Tensor,
    output_lse: torch.Tensor | None,
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
) -> None:
    """Merge two partial attention results by their log-sum-exp (in place).

    Args:
        output: ``[num_tokens, num_heads, head_size]`` result, written in place.
        output_lse: optional float32 ``[num_heads, num_tokens]``, written in
            place with the merged LSE.
        prefix_output / suffix_output: the partial results, same shape and
            dtype (float32, float16 or bfloat16) as ``output``.
        prefix_lse / suffix_lse: float32 ``[num_heads, num_tokens]`` natural-log
            LSEs, any strides. ``+inf`` counts as ``-inf``; where both are
            ``-inf`` the prefix is passed through and the LSE is ``-inf``.

    Value tensors must be contiguous in the last dim with ``head_size`` a
    multiple of 16 bytes (4 float32 or 8 float16/bfloat16 elements).
    """
    torch.ops.stableops.merge_attn_states.default(
        output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse
    )


if has_op("stableops", "get_cuda_view_from_cpu_tensor"):
    __all__.append("get_cuda_view_from_cpu_tensor")

    def get_cuda_view_from_cpu_tensor(cpu_tensor: torch.Tensor) -> torch.Tensor:
        """A CUDA tensor aliasing the memory of a pinned CPU tensor."""
        return torch.ops.stableops.get_cuda_view_from_cpu_tensor.default(cpu_tensor)


if has_op("stableops_cuda_utils", "get_device_attribute"):
    __all__.append("get_device_attribute")

    # Device attributes are constants: torch.compile evaluates the query at
    # trace time instead of graph-breaking on an op that returns an int.
    @torch.compiler.assume_constant_result
    def get_device_attribute(attribute: int, device_id: int) -> int:
        """``cudaDeviceGetAttribute(attribute, device_id)`` (hipDeviceAttribute on ROCm)."""
        return int(
            torch.ops.stableops_cuda_utils.get_device_attribute.default(
                attribute, device_id
            )
        )


if has_op("stableops_cuda_utils", "get_max_shared_memory_per_block_device_attribute"):
    __all__.append("get_max_shared_memory_per_block_device_attribute")

    @torch.compiler.assume_constant_result
    def get_max_shared_memory_per_block_device_attribute(device_id: int) -> int:
        """Max opt-in shared memory per block (bytes) of ``device_id``."""
        return int(
            torch.ops.stableops_cuda_utils.get_max_shared_memory_per_block_device_attribute.default(
                device_id
            )
        )


# ---------------------------------------------------------------------------
# Quantization (csrc/quantization/). Input [..., H] float32/float16/bfloat16
# (rows = the leading dims with one row stride, last dim contiguous); scales
# float32; every x / scale is an IEEE float32 division. FP8 results are
# float8_e4m3fn (MAX 448) or float8_e4m3fnuz (MAX 240), their bits equal to
# torch's ``(x.float() / scale).clamp(-MAX, MAX).to(dtype)``.
# ---------------------------------------------------------------------------
__all__ += [
    "static_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "dynamic_per_token_scaled_fp8_quant",
    "static_scaled_int8_quant",
    "dynamic_scaled_int8_quant",
]


def static_scaled_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    scale: torch.Tensor,
    group_shape: list[int] | tuple[int, int] | None = None,
) -> None:
    """``result = fp8(clamp(input / scale, -MAX, MAX))`` (in place).

    ``scale`` (float32): one element (per-tensor); without ``group_shape``
    also ``[T, 1]`` (per-token) or ``[1, H]`` (per-channel); with
    ``group_shape=[gm, gn]`` (``-1``: the whole dim) ``[ceil(T/gm),
    ceil(H/gn)]``, one scale per ``gm x gn`` block. Any other shape raises.
    """
    gs = None if group_shape is None else [int(g) for g in group_shape]
    torch.ops.stableops.static_scaled_fp8_quant.default(result, input, scale, gs)


def dynamic_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    """Per-tensor dynamic FP8 quantisation (in place).

    Writes ``scale[0] = max(amax(|input|) / MAX, 1 / (MAX * 512))`` (the
    kernel initialises it: any prior content is ignored), then quantises with
    it. A NaN in the input makes the scale NaN (``torch.amax`` semantics) and
    every quantised value the format's NaN. Zero elements: the scale is
    ``1 / (MAX * 512)``.
    """
    torch.ops.stableops.dynamic_scaled_fp8_quant.default(result, input, scale)


def dynamic_per_token_scaled_fp8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, scale_ub: torch.Tensor | None
) -> None:
    """Per-token dynamic FP8 quantisation (in place).

    ``scale`` is float32 ``[T, 1]``: row ``r`` gets
    ``max(min(amax(|input[r]|), scale_ub) / MAX, 1 / (MAX * 512))``
    (``scale_ub`` a one-element float32 tensor, or None for no bound), then the
    row is quantised with it. NaN propagates as in
    :func:`dynamic_scaled_fp8_quant`, per row.
    """
    torch.ops.stableops.dynamic_per_token_scaled_fp8_quant.default(result, input, scale, scale_ub)


def static_scaled_int8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None
) -> None:
    """``result = sat(rne(input / scale) + azp)`` into int8 (in place).

    ``scale`` one float32 element, ``azp`` one int32 element or None. In
    float32: ``rne`` rounds half to even (``torch.round``), ``azp`` is added
    as a float32, ``sat`` maps NaN to 0 and clamps to ``[-128, 127]``.
    """
    torch.ops.stableops.static_scaled_int8_quant.default(result, input, scale, azp)


def dynamic_scaled_int8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None
) -> None:
    """Per-token dynamic INT8 quantisation (in place); ``scale`` float32 ``[T, 1]``.

    Symmetric (``azp`` None): ``s = amax(|row|) / 127``,
    ``q = sat(rne(row / s))``. Asymmetric (``azp`` int32 ``[T, 1]``):
    ``s = (max - min) / 255``, ``azp = sat32(rne(-128 - min / s))``,
    ``q = sat(rne(row / s) + azp)`` (``sat32`` maps NaN to 0 and clamps to
    ``[-2**31, 2**31 - 128]``). A row whose ``s`` is 0 (all zeros, or
    ``max == min``) is written as zeros with ``azp`` 0: nothing is divided by
    zero. A NaN in a row gives it a NaN scale, ``q`` 0 and ``azp`` 0.
    """
    torch.ops.stableops.dynamic_scaled_int8_quant.default(result, input, scale, azp)

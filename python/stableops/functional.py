"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

import math

import torch

from . import ops

__all__: list[str] = ["merge_attn_states"]


def merge_attn_states(
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
    prefill_tokens_with_context: int | None = None,
    output_scale: torch.Tensor | None = None,
    output_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merged ``(output, output_lse)`` of two partial attention results
    (see :func:`stableops.ops.merge_attn_states`). ``output`` has the inputs'
    dtype, or ``output_dtype`` (``torch.float8_e4m3fn`` by default) with
    ``output_scale``."""
    dtype = output_dtype or (torch.float8_e4m3fn if output_scale is not None else prefix_output.dtype)
    output = torch.empty(prefix_output.shape, dtype=dtype, device=prefix_output.device)
    output_lse = torch.empty(prefix_lse.shape, dtype=torch.float32, device=prefix_lse.device)
    ops.merge_attn_states(
        output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
        prefill_tokens_with_context, output_scale,
    )
    return output, output_lse


# ---------------------------------------------------------------------------
# RMSNorm family: outputs are fresh contiguous tensors; inputs are untouched.
__all__ += ["rms_norm", "fused_add_rms_norm", "rms_norm_weightless", "fused_add_rms_norm_weightless"]


def rms_norm(input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    """RMSNorm of the last dim of ``input`` (see :func:`stableops.ops.rms_norm`)."""
    result = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    ops.rms_norm(result, input, weight, epsilon)
    return result


def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(input + residual), input + residual)``, each rounded to the
    dtype as :func:`stableops.ops.fused_add_rms_norm` does."""
    out = input.clone(memory_format=torch.contiguous_format)
    new_residual = residual.clone(memory_format=torch.contiguous_format)
    ops.fused_add_rms_norm(out, new_residual, weight, epsilon)
    return out, new_residual


def rms_norm_weightless(input: torch.Tensor, epsilon: float) -> torch.Tensor:
    """:func:`rms_norm` with a weight of ones."""
    result = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    ops.rms_norm_weightless(result, input, epsilon)
    return result


def fused_add_rms_norm_weightless(
    input: torch.Tensor, residual: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_add_rms_norm` with a weight of ones."""
    out = input.clone(memory_format=torch.contiguous_format)
    new_residual = residual.clone(memory_format=torch.contiguous_format)
    ops.fused_add_rms_norm_weightless(out, new_residual, epsilon)
    return out, new_residual

# ---------------------------------------------------------------------------
# Activations (stableops.ops has the in-place forms and the contract).
# ---------------------------------------------------------------------------
__all__ += [
    "silu_and_mul",
    "mul_and_silu",
    "silu_and_mul_with_clamp",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "fatrelu_and_mul",
    "swigluoai_and_mul",
    "gelu_new",
    "gelu_fast",
    "gelu_quick",
]


def _gated(op: torch._ops.OpOverloadPacket, input: torch.Tensor, *scalars: float) -> torch.Tensor:
    """Runs a ``*_and_mul`` op into a new ``[..., d]`` for ``input[..., 2d]``
    (the op rejects an odd last dim)."""
    shape = (*input.shape[:-1], input.shape[-1] // 2) if input.dim() else ()
    out = torch.empty(shape, dtype=input.dtype, device=input.device)
    op.default(out, input, *scalars)
    return out


def _elementwise(op: torch._ops.OpOverloadPacket, input: torch.Tensor) -> torch.Tensor:
    """Runs an elementwise op into a new contiguous tensor of ``input``'s shape."""
    out = torch.empty_like(input, memory_format=torch.contiguous_format)
    op.default(out, input)
    return out


def silu_and_mul(input: torch.Tensor) -> torch.Tensor:
    """``silu(input[..., :d]) * input[..., d:]``."""
    return _gated(torch.ops.stableops.silu_and_mul, input)


def mul_and_silu(input: torch.Tensor) -> torch.Tensor:
    """``input[..., :d] * silu(input[..., d:])``."""
    return _gated(torch.ops.stableops.mul_and_silu, input)


def silu_and_mul_with_clamp(input: torch.Tensor, limit: float) -> torch.Tensor:
    """``silu(min(x1, limit)) * clamp(x2, -limit, limit)``."""
    return _gated(torch.ops.stableops.silu_and_mul_with_clamp, input, limit)


def gelu_and_mul(input: torch.Tensor) -> torch.Tensor:
    """``gelu(input[..., :d]) * input[..., d:]`` (exact GELU)."""
    return _gated(torch.ops.stableops.gelu_and_mul, input)


def gelu_tanh_and_mul(input: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(input[..., :d]) * input[..., d:]``."""
    return _gated(torch.ops.stableops.gelu_tanh_and_mul, input)


def fatrelu_and_mul(input: torch.Tensor, threshold: float) -> torch.Tensor:
    """``where(x1 > threshold, x1, 0) * x2``."""
    return _gated(torch.ops.stableops.fatrelu_and_mul, input, threshold)


def swigluoai_and_mul(input: torch.Tensor, alpha: float = 1.702, limit: float = 7.0) -> torch.Tensor:
    """gpt-oss SwiGLU of interleaved gate/up (see stableops.ops.swigluoai_and_mul)."""
    return _gated(torch.ops.stableops.swigluoai_and_mul, input, alpha, limit)


def gelu_new(input: torch.Tensor) -> torch.Tensor:
    """``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return _elementwise(torch.ops.stableops.gelu_new, input)


def gelu_fast(input: torch.Tensor) -> torch.Tensor:
    """``0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))``."""
    return _elementwise(torch.ops.stableops.gelu_fast, input)


def gelu_quick(input: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(1.702 x)``."""
    return _elementwise(torch.ops.stableops.gelu_quick, input)


# rotary_embedding ---------------------------------------------------------
__all__.append("rotary_embedding")


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rope_dim_offset: int = 0,
    inverse: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rotated copies of ``query`` and ``key`` (None when ``key`` is None);
    the inputs are not modified. Arguments as :func:`stableops.ops.rotary_embedding`."""
    q = query.clone()
    k = key.clone() if key is not None else None
    torch.ops.stableops.rotary_embedding.default(
        positions, q, k, head_size, cos_sin_cache, is_neox, rope_dim_offset, inverse
    )
    return q, k


# ---------------------------------------------------------------------------
# Quantization: the outputs are allocated on the input's device; the inputs
# are never modified (see stableops.ops for the contracts).
# ---------------------------------------------------------------------------
__all__ += [
    "static_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "dynamic_per_token_scaled_fp8_quant",
    "static_scaled_int8_quant",
    "dynamic_scaled_int8_quant",
]


def _rows(input: torch.Tensor) -> int:
    return math.prod(input.shape[:-1])


def static_scaled_fp8_quant(
    input: torch.Tensor,
    scale: torch.Tensor,
    group_shape: list[int] | tuple[int, int] | None = None,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
) -> torch.Tensor:
    """FP8 ``dtype`` quantisation of ``input`` with the given ``scale``."""
    result = torch.empty(input.shape, dtype=dtype, device=input.device)
    ops.static_scaled_fp8_quant(result, input, scale, group_shape)
    return result


def dynamic_scaled_fp8_quant(
    input: torch.Tensor, *, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(result, scale)``: per-tensor dynamic FP8 quantisation; scale ``[1]``."""
    result = torch.empty(input.shape, dtype=dtype, device=input.device)
    scale = torch.empty(1, dtype=torch.float32, device=input.device)
    ops.dynamic_scaled_fp8_quant(result, input, scale)
    return result, scale


def dynamic_per_token_scaled_fp8_quant(
    input: torch.Tensor,
    scale_ub: torch.Tensor | None = None,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(result, scale)``: per-token dynamic FP8 quantisation; scale ``[T, 1]``."""
    result = torch.empty(input.shape, dtype=dtype, device=input.device)
    scale = torch.empty(_rows(input), 1, dtype=torch.float32, device=input.device)
    ops.dynamic_per_token_scaled_fp8_quant(result, input, scale, scale_ub)
    return result, scale


def static_scaled_int8_quant(
    input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None = None
) -> torch.Tensor:
    """INT8 quantisation of ``input`` with the given ``scale`` (and ``azp``)."""
    result = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    ops.static_scaled_int8_quant(result, input, scale, azp)
    return result


def dynamic_scaled_int8_quant(
    input: torch.Tensor, symmetric: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(result, scale [T, 1], azp [T, 1] int32 or None)``: per-token dynamic
    INT8 quantisation, symmetric or asymmetric."""
    result = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    scale = torch.empty(_rows(input), 1, dtype=torch.float32, device=input.device)
    azp = None if symmetric else torch.empty(_rows(input), 1, dtype=torch.int32, device=input.device)
    ops.dynamic_scaled_int8_quant(result, input, scale, azp)
    return result, scale, azp

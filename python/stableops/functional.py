"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

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

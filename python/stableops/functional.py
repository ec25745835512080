"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

__all__: list[str] = []

# ---------------------------------------------------------------------------
# RMSNorm family: outputs are fresh contiguous tensors; inputs are untouched.
# (Imports kept inside the block so each family's block merges on its own.)
import torch  # noqa: E402

from . import ops  # noqa: E402

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

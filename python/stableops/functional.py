"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

__all__: list[str] = []

# ---------------------------------------------------------------------------
# Quantization: the outputs are allocated on the input's device; the inputs
# are never modified (see stableops.ops for the contracts).
# ---------------------------------------------------------------------------
import math  # noqa: E402

import torch  # noqa: E402

from . import ops as _ops  # noqa: E402

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
    _ops.static_scaled_fp8_quant(result, input, scale, group_shape)
    return result


def dynamic_scaled_fp8_quant(
    input: torch.Tensor, *, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(result, scale)``: per-tensor dynamic FP8 quantisation; scale ``[1]``."""
    result = torch.empty(input.shape, dtype=dtype, device=input.device)
    scale = torch.empty(1, dtype=torch.float32, device=input.device)
    _ops.dynamic_scaled_fp8_quant(result, input, scale)
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
    _ops.dynamic_per_token_scaled_fp8_quant(result, input, scale, scale_ub)
    return result, scale


def static_scaled_int8_quant(
    input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None = None
) -> torch.Tensor:
    """INT8 quantisation of ``input`` with the given ``scale`` (and ``azp``)."""
    result = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    _ops.static_scaled_int8_quant(result, input, scale, azp)
    return result


def dynamic_scaled_int8_quant(
    input: torch.Tensor, symmetric: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(result, scale [T, 1], azp [T, 1] int32 or None)``: per-token dynamic
    INT8 quantisation, symmetric or asymmetric."""
    result = torch.empty(input.shape, dtype=torch.int8, device=input.device)
    scale = torch.empty(_rows(input), 1, dtype=torch.float32, device=input.device)
    azp = None if symmetric else torch.empty(_rows(input), 1, dtype=torch.int32, device=input.device)
    _ops.dynamic_scaled_int8_quant(result, input, scale, azp)
    return result, scale, azp

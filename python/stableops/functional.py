"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

__all__: list[str] = []

# ---------------------------------------------------------------------------
# Activations (stableops.ops has the in-place forms and the contract).
# ---------------------------------------------------------------------------
import torch  # noqa: E402

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

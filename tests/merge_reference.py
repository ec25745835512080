"""The float64 reference for merge_attn_states, shared by the CPU and GPU tests."""

from __future__ import annotations

import torch

INF = float("inf")


def reference(
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
    prefill_tokens_with_context: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (output [T,H,D] float64, lse [H,T] float64) of the op's contract.

    A +inf LSE counts as -inf; where both are -inf the output is the prefix
    and the LSE -inf. Tokens at index >= prefill_tokens_with_context take the
    suffix and its LSE unchanged.
    """
    p = prefix_lse.double().clone()
    s = suffix_lse.double().clone()
    p[p == INF] = -INF
    s[s == INF] = -INF
    m = torch.maximum(p, s)
    empty = m == -INF
    m_safe = torch.where(empty, torch.zeros_like(m), m)
    ps = torch.exp(p - m_safe)
    ss = torch.exp(s - m_safe)
    total = ps + ss
    wp = torch.where(empty, torch.ones_like(ps), ps / total).t().unsqueeze(-1)
    ws = torch.where(empty, torch.zeros_like(ss), ss / total).t().unsqueeze(-1)
    out = prefix_output.double() * wp + suffix_output.double() * ws
    lse = torch.where(empty, torch.full_like(m, -INF), m_safe + torch.log(total))
    if prefill_tokens_with_context is not None:
        n = min(prefill_tokens_with_context, out.shape[0])
        out[n:] = suffix_output[n:].double()
        lse[:, n:] = suffix_lse[:, n:].double()
    return out, lse


FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}


def fp8_bits(values: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """torch's own conversion of float32 `values / scale`, clamped: the bits an
    FP8 output must hold."""
    mx = FP8_MAX[dtype]
    return (values.float() / torch.tensor(scale, dtype=torch.float32)).clamp(-mx, mx).to(dtype).view(torch.uint8)

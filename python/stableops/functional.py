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

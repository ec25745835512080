"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

__all__: list[str] = []


# rotary_embedding ---------------------------------------------------------
import torch  # noqa: E402

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

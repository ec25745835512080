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
) -> None:
    """Apply rotary position embedding to ``query`` and ``key`` (in place).

    Args:
        positions: int64 ``[num_tokens]`` (any stride): the position of each token.
        query: ``[num_tokens, num_heads * head_size]`` or
            ``[num_tokens, num_heads, head_size]``, float32, float16 or
            bfloat16, last dim contiguous; token and head strides are free
            (e.g. views of a fused QKV tensor), but rows must not overlap.
        key: like ``query`` with its own head count and the same dtype, or None.
            It must not share memory with ``query``.
        head_size: elements per head.
        cos_sin_cache: ``[max_position, rot_dim]`` of the query's dtype or
            float32: ``cos`` in the first ``rot_dim / 2`` columns, ``sin`` in
            the rest. ``rot_dim`` must be even.
        is_neox: NeoX style pairs element ``i`` with ``i + rot_dim / 2``;
            otherwise GPT-J style pairs ``2i`` with ``2i + 1``. Pair ``i`` uses
            ``cos[i]`` and ``sin[i]`` in both styles.
        rope_dim_offset: the rotated dims of each head are
            ``[rope_dim_offset, rope_dim_offset + rot_dim)``; the others are
            left as they are. Must satisfy ``rope_dim_offset + rot_dim <= head_size``.
        inverse: rotate by ``-theta`` (undoes a forward rotation, to rounding).

    Each pair ``(a, b)`` becomes ``(a cos - b sin, b cos + a sin)``, computed in
    float32. Zero tokens is a no-op.

    Out-of-range positions (``< 0`` or ``>= max_position``): on the CPU the op
    raises a RuntimeError naming the first one, before writing anything. On
    GPUs the kernel cannot raise without a host synchronisation, so it leaves
    the query and key of such a token unchanged and never reads outside
    ``cos_sin_cache``.
    """
    torch.ops.stableops.rotary_embedding.default(
        positions, query, key, head_size, cos_sin_cache, is_neox, rope_dim_offset, inverse
    )

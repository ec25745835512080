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
# KV-cache ops (torch.ops.stableops_cache_ops, vLLM's _C_cache_ops). In place
# by nature (they write into a cache the caller owns): no functional forms.
# ---------------------------------------------------------------------------
__all__ += ["concat_and_cache_mla", "reshape_and_cache_flash", "swap_blocks"]


def reshape_and_cache_flash(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> None:
    """Write each token's key and value into its cache slot (in place).

    Args:
        key / value: ``[T, H, D]`` float32, float16 or bfloat16, last dim
            contiguous (token and head strides free, e.g. views of a fused QKV).
        key_cache / value_cache: ``[num_blocks, block_size, H, D]``, last dim
            contiguous; the dtype of ``key`` for ``"auto"``, else uint8
            (e4m3fn bits), float8_e4m3fn or float8_e4m3fnuz.
        slot_mapping: int64 ``[T']``, ``T' <= T`` (rows past ``T'`` are
            padding). Slot ``-1`` skips the token; slot ``s`` is block
            ``s // block_size``, offset ``s % block_size``. Out-of-range
            slots raise on the CPU and are skipped on the GPU.
        kv_cache_dtype: ``"auto"`` (bytes copied) or ``"fp8"``/``"fp8_e4m3"``
            (stores ``fp8(x.float() / scale)`` clamped to the format's range).
        k_scale / v_scale: one-element float32 tensors on the data's device
            (not read with ``"auto"``).
    """
    torch.ops.stableops_cache_ops.reshape_and_cache_flash.default(
        key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale
    )


def concat_and_cache_mla(
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    scale: torch.Tensor,
) -> None:
    """Write ``cat(kv_c[t], k_pe[t])`` into each token's slot of an MLA cache.

    ``kv_c`` is ``[T, L]``, ``k_pe`` ``[T, R]`` (one dtype, last dim
    contiguous), ``kv_cache`` ``[num_blocks, block_size, L + R]``; slots,
    ``kv_cache_dtype`` and ``scale`` as in :func:`reshape_and_cache_flash`.
    """
    torch.ops.stableops_cache_ops.concat_and_cache_mla.default(
        kv_c, k_pe, kv_cache, slot_mapping, kv_cache_dtype, scale
    )


def swap_blocks(
    src: torch.Tensor,
    dst: torch.Tensor,
    block_size_in_bytes: int,
    block_mapping: torch.Tensor,
) -> None:
    """Copy the first ``block_size_in_bytes`` bytes of block ``src[s]`` to
    block ``dst[d]`` for each row ``(s, d)`` of ``block_mapping`` (int64
    ``[N, 2]`` on the CPU), in order.

    Blocks are along dim 0; ``src`` and ``dst`` have one dtype and block
    shape. GPU <-> GPU (one device), pinned CPU <-> GPU and CPU <-> CPU, on
    the current stream. Indices out of range and pageable host memory raise
    before anything is copied.
    """
    torch.ops.stableops_cache_ops.swap_blocks.default(src, dst, block_size_in_bytes, block_mapping)

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
    prefill_tokens_with_context: int | None = None,
    output_scale: torch.Tensor | None = None,
) -> None:
    """Merge two partial attention results by their log-sum-exp (in place).

    Args:
        output: ``[num_tokens, num_heads, head_size]`` result, written in place:
            of the inputs' dtype, or ``torch.float8_e4m3fn`` /
            ``torch.float8_e4m3fnuz`` with ``output_scale``.
        output_lse: optional float32 ``[num_heads, num_tokens]``, written in
            place with the merged LSE.
        prefix_output / suffix_output: the partial results, same shape and
            dtype (float32, float16 or bfloat16).
        prefix_lse / suffix_lse: float32 ``[num_heads, num_tokens]`` natural-log
            LSEs, any strides. ``+inf`` counts as ``-inf``; where both are
            ``-inf`` the prefix is passed through and the LSE is ``-inf``.
        prefill_tokens_with_context: tokens at index >= this have no prefix:
            they take the suffix output and LSE unchanged (None: every token
            merges; a value above num_tokens too).
        output_scale: one float32 element; ``output`` then holds
            ``fp8(clamp(merged / output_scale, -MAX, MAX))``, MAX 448 for
            e4m3fn and 240 for e4m3fnuz, bit-exact with torch's conversion.

    Value tensors must be contiguous in the last dim with ``head_size`` a
    multiple of 16 bytes of the input dtype (4 float32 or 8 float16/bfloat16
    elements).
    """
    torch.ops.stableops.merge_attn_states.default(
        output,
        output_lse,
        prefix_output,
        prefix_lse,
        suffix_output,
        suffix_lse,
        prefill_tokens_with_context,
        output_scale,
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


# RMSNorm family (csrc/norm/). Rows of ``[..., hidden_size]`` float32 /
# float16 / bfloat16 tensors, one dtype per call, statistics in float32; the
# last dim contiguous, the leading dims of each tensor viewable as rows of
# one stride (a row slice of a wider tensor, e.g. a fused QKV projection, is
# fine). Odd hidden sizes and unaligned rows work (a slower path).
__all__ += ["rms_norm", "fused_add_rms_norm", "rms_norm_weightless", "fused_add_rms_norm_weightless"]


def rms_norm(result: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    """RMSNorm into ``result`` (in place).

    ``result = round(round(input * rsqrt(mean(input**2, -1) + epsilon)) * weight)``
    where ``round`` converts to the dtype (vLLM / Hugging Face rounding).
    ``result`` has the shape of ``input`` (its own row stride; rows must not
    overlap); ``weight`` is 1-D ``[hidden_size]``; ``epsilon`` finite, >= 0.
    """
    torch.ops.stableops.rms_norm.default(result, input, weight, epsilon)


def fused_add_rms_norm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    """Residual add then RMSNorm, both in place.

    ``residual = round(input + residual)``, then ``input = rms_norm(residual)``
    (statistics of the stored, rounded sum). ``input`` and ``residual`` have
    one shape (each its own row stride); ``weight`` is 1-D ``[hidden_size]``.
    """
    torch.ops.stableops.fused_add_rms_norm.default(input, residual, weight, epsilon)


def rms_norm_weightless(result: torch.Tensor, input: torch.Tensor, epsilon: float) -> None:
    """:func:`rms_norm` with a weight of ones (weight folded into the next layer)."""
    torch.ops.stableops.rms_norm_weightless.default(result, input, epsilon)


def fused_add_rms_norm_weightless(input: torch.Tensor, residual: torch.Tensor, epsilon: float) -> None:
    """:func:`fused_add_rms_norm` with a weight of ones."""
    torch.ops.stableops.fused_add_rms_norm_weightless.default(input, residual, epsilon)
# ---------------------------------------------------------------------------
# Activations. float32/float16/bfloat16 (``out`` and ``input`` alike), last
# dim contiguous, any leading shape whose rows have one stride (slices are
# fine); math in float32. The ``*_and_mul`` ops take ``input[..., 2d]`` and
# write ``out[..., d]``; the others write ``out`` of ``input``'s shape.
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


def silu_and_mul(result: torch.Tensor, input: torch.Tensor) -> None:
    """``result = silu(input[..., :d]) * input[..., d:]`` (in place)."""
    torch.ops.stableops.silu_and_mul.default(result, input)


def mul_and_silu(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = input[..., :d] * silu(input[..., d:])`` (in place)."""
    torch.ops.stableops.mul_and_silu.default(out, input)


def silu_and_mul_with_clamp(result: torch.Tensor, input: torch.Tensor, limit: float) -> None:
    """``result = silu(min(x1, limit)) * clamp(x2, -limit, limit)`` with
    ``x1, x2 = input[..., :d], input[..., d:]`` (in place); ``limit >= 0``."""
    torch.ops.stableops.silu_and_mul_with_clamp.default(result, input, limit)


def gelu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = gelu(input[..., :d]) * input[..., d:]``, exact (erf) GELU (in place)."""
    torch.ops.stableops.gelu_and_mul.default(out, input)


def gelu_tanh_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = gelu_tanh(input[..., :d]) * input[..., d:]``, tanh-approximated
    GELU (in place)."""
    torch.ops.stableops.gelu_tanh_and_mul.default(out, input)


def fatrelu_and_mul(out: torch.Tensor, input: torch.Tensor, threshold: float) -> None:
    """``out = where(x1 > threshold, x1, 0) * x2`` with
    ``x1, x2 = input[..., :d], input[..., d:]`` (in place; a NaN ``x1`` gives 0)."""
    torch.ops.stableops.fatrelu_and_mul.default(out, input, threshold)


def swigluoai_and_mul(out: torch.Tensor, input: torch.Tensor, alpha: float = 1.702, limit: float = 7.0) -> None:
    """gpt-oss SwiGLU (in place), gate and up interleaved in ``input``:
    ``g = min(input[..., 0::2], limit)``, ``u = clamp(input[..., 1::2], -limit, limit)``,
    ``out = (u + 1) * g * sigmoid(alpha * g)``; ``limit >= 0``."""
    torch.ops.stableops.swigluoai_and_mul.default(out, input, alpha, limit)


def gelu_new(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (in place)."""
    torch.ops.stableops.gelu_new.default(out, input)


def gelu_fast(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = 0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))`` (in place)."""
    torch.ops.stableops.gelu_fast.default(out, input)


def gelu_quick(out: torch.Tensor, input: torch.Tensor) -> None:
    """``out = x * sigmoid(1.702 x)`` (in place)."""
    torch.ops.stableops.gelu_quick.default(out, input)
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
# ---------------------------------------------------------------------------
# Quantization (csrc/quantization/). Input [..., H] float32/float16/bfloat16
# (rows = the leading dims with one row stride, last dim contiguous); scales
# float32; every x / scale is an IEEE float32 division. FP8 results are
# float8_e4m3fn (MAX 448) or float8_e4m3fnuz (MAX 240), their bits equal to
# torch's ``(x.float() / scale).clamp(-MAX, MAX).to(dtype)``.
# ---------------------------------------------------------------------------
__all__ += [
    "static_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "dynamic_per_token_scaled_fp8_quant",
    "static_scaled_int8_quant",
    "dynamic_scaled_int8_quant",
]


def static_scaled_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    scale: torch.Tensor,
    group_shape: list[int] | tuple[int, int] | None = None,
) -> None:
    """``result = fp8(clamp(input / scale, -MAX, MAX))`` (in place).

    ``scale`` (float32): one element (per-tensor); without ``group_shape``
    also ``[T, 1]`` (per-token) or ``[1, H]`` (per-channel); with
    ``group_shape=[gm, gn]`` (``-1``: the whole dim) ``[ceil(T/gm),
    ceil(H/gn)]``, one scale per ``gm x gn`` block. Any other shape raises.
    """
    # Passed on as given: the schema's int[] rejects a non-integer entry
    # (int() here would turn 1.5 into 1 and quantise with the wrong groups).
    gs = None if group_shape is None else list(group_shape)
    torch.ops.stableops.static_scaled_fp8_quant.default(result, input, scale, gs)


def dynamic_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    """Per-tensor dynamic FP8 quantisation (in place).

    Writes ``scale[0] = max(amax(|input|) / MAX, 1 / (MAX * 512))`` (the
    kernel initialises it: any prior content is ignored), then quantises with
    it. A NaN in the input makes the scale NaN (``torch.amax`` semantics) and
    every quantised value the format's NaN. Zero elements: the scale is
    ``1 / (MAX * 512)``.
    """
    torch.ops.stableops.dynamic_scaled_fp8_quant.default(result, input, scale)


def dynamic_per_token_scaled_fp8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, scale_ub: torch.Tensor | None
) -> None:
    """Per-token dynamic FP8 quantisation (in place).

    ``scale`` is float32 ``[T, 1]``: row ``r`` gets
    ``max(min(amax(|input[r]|), scale_ub) / MAX, 1 / (MAX * 512))``
    (``scale_ub`` a one-element float32 tensor, or None for no bound), then the
    row is quantised with it. NaN propagates as in
    :func:`dynamic_scaled_fp8_quant`, per row.
    """
    torch.ops.stableops.dynamic_per_token_scaled_fp8_quant.default(result, input, scale, scale_ub)


def static_scaled_int8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None
) -> None:
    """``result = sat(rne(input / scale) + azp)`` into int8 (in place).

    ``scale`` one float32 element, ``azp`` one int32 element or None. In
    float32: ``rne`` rounds half to even (``torch.round``), ``azp`` is added
    as a float32, ``sat`` maps NaN to 0 and clamps to ``[-128, 127]``.
    """
    torch.ops.stableops.static_scaled_int8_quant.default(result, input, scale, azp)


def dynamic_scaled_int8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor, azp: torch.Tensor | None
) -> None:
    """Per-token dynamic INT8 quantisation (in place); ``scale`` float32 ``[T, 1]``.

    Symmetric (``azp`` None): ``s = amax(|row|) / 127``,
    ``q = sat(rne(row / s))``. Asymmetric (``azp`` int32 ``[T, 1]``):
    ``s = (max - min) / 255``, ``azp = sat32(rne(-128 - min / s))``,
    ``q = sat(rne(row / s) + azp)`` (``sat32`` maps NaN to 0 and clamps to
    ``[-2**31, 2**31 - 128]``). A row whose ``s`` is 0 (all zeros, or
    ``max == min``) is written as zeros with ``azp`` 0: nothing is divided by
    zero. A NaN in a row gives it a NaN scale, ``q`` 0 and ``azp`` 0.
    """
    torch.ops.stableops.dynamic_scaled_int8_quant.default(result, input, scale, azp)
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

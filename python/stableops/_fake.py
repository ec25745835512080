"""Fake (meta) implementations for every operator of the library.

They let ``torch.compile(fullgraph=True)``, ``torch.library.opcheck`` and meta
tensors trace the operators without running them. Each fake is registered only
when its operator exists in the loaded library (GPU-only operators are absent
from CPU builds). :func:`register_fakes` is called once by the package loader.

``merge_attn_states``'s fake repeats the cheap shape/dtype/device checks of the
C++ validation (csrc/merge_attn_states_check.cpp) with the same messages, so
bad inputs fail the same way at trace time and on meta tensors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["FAKE_IMPLS", "register_fakes"]

_VEC_BYTES = 16
_VALUE_DTYPES = {
    torch.float32: "Float",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
}
_DTYPE_NAMES = {
    **_VALUE_DTYPES,
    torch.float64: "Double",
    torch.uint8: "Byte",
    torch.int8: "Char",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.bool: "Bool",
}


def _dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype))


def _device_name(device: torch.device) -> str:
    return str(device)


def _fail(msg: str) -> None:
    raise RuntimeError(f"merge_attn_states: {msg}")


def _check_value(t: torch.Tensor, name: str, output: torch.Tensor, vec: int) -> None:
    if t.dtype != output.dtype:
        _fail(
            f"{name} must have the same dtype as output "
            f"({_dtype_name(output.dtype)}), got {_dtype_name(t.dtype)}"
        )
    if t.dim() != 3:
        _fail(
            f"{name} must be 3-D [num_tokens, num_heads, head_size], got "
            f"{t.dim()}-D tensor of shape {list(t.shape)}"
        )
    if t.shape != output.shape:
        _fail(
            f"{name} shape {list(t.shape)} does not match output shape "
            f"{list(output.shape)}"
        )
    if t.numel() == 0:
        return
    if t.stride(2) != 1:
        _fail(
            f"{name} must be contiguous in its last (head_size) dim, got "
            f"strides {list(t.stride())}"
        )
    if t.stride(0) % vec != 0 or t.stride(1) % vec != 0:
        _fail(
            f"{name} strides {list(t.stride())} must be multiples of {vec} "
            f"elements ({_VEC_BYTES}-byte vectors of {_dtype_name(t.dtype)})"
        )


def _check_lse(t: torch.Tensor, name: str, num_heads: int, num_tokens: int) -> None:
    if t.dtype != torch.float32:
        _fail(f"{name} must have dtype Float (float32), got {_dtype_name(t.dtype)}")
    if t.dim() != 2 or t.shape[0] != num_heads or t.shape[1] != num_tokens:
        _fail(
            f"{name} must have shape [num_heads, num_tokens] = "
            f"[{num_heads}, {num_tokens}], got {list(t.shape)}"
        )


def check_merge_attn_states(
    output: torch.Tensor,
    output_lse: torch.Tensor | None,
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
) -> None:
    """Python mirror of check_merge_attn_states_inputs (minus pointer alignment)."""
    device = output.device
    named = [
        ("prefix_output", prefix_output),
        ("suffix_output", suffix_output),
        ("prefix_lse", prefix_lse),
        ("suffix_lse", suffix_lse),
    ]
    if output_lse is not None:
        named.append(("output_lse", output_lse))
    for name, t in named:
        if t.device != device:
            _fail(
                f"{name} must be on the same device as output "
                f"({_device_name(device)}), got {_device_name(t.device)}"
            )
    if output.dtype not in _VALUE_DTYPES:
        _fail(
            "output must have dtype Float (float32), Half (float16) or "
            f"BFloat16 (bfloat16), got {_dtype_name(output.dtype)}"
        )
    if output.dim() != 3:
        _fail(
            "output must be 3-D [num_tokens, num_heads, head_size], got "
            f"{output.dim()}-D tensor of shape {list(output.shape)}"
        )
    vec = max(1, _VEC_BYTES // output.element_size())
    num_tokens, num_heads, head_size = output.shape
    if head_size <= 0 or head_size % vec != 0:
        _fail(
            f"head_size ({head_size}) must be a positive multiple of {vec} for "
            f"{_dtype_name(output.dtype)} ({_VEC_BYTES}-byte vectors)"
        )
    _check_value(output, "output", output, vec)
    _check_value(prefix_output, "prefix_output", output, vec)
    _check_value(suffix_output, "suffix_output", output, vec)
    _check_lse(prefix_lse, "prefix_lse", num_heads, num_tokens)
    _check_lse(suffix_lse, "suffix_lse", num_heads, num_tokens)
    if output_lse is not None:
        _check_lse(output_lse, "output_lse", num_heads, num_tokens)


def _merge_attn_states_fake(
    output: torch.Tensor,
    output_lse: torch.Tensor | None,
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
) -> None:
    check_merge_attn_states(
        output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse
    )


def _get_cuda_view_from_cpu_tensor_fake(cpu_tensor: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(
        cpu_tensor.shape,
        cpu_tensor.stride(),
        dtype=cpu_tensor.dtype,
        device=torch.device("cuda", torch.cuda.current_device())
        if torch.cuda.is_available()
        else "cuda",
    )


def _real_int_query(qualname: str) -> Callable[..., int]:
    """Fake for a tensor-free int query: the answer is a device constant, so
    run the real kernel outside fake mode."""
    ns, name = qualname.split("::")

    def fake(*args: int) -> int:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            return int(getattr(getattr(torch.ops, ns), name).default(*args))

    return fake


#: Every operator of the library and its fake implementation.
FAKE_IMPLS: dict[str, Callable[..., Any]] = {
    "stableops::merge_attn_states": _merge_attn_states_fake,
    "stableops::get_cuda_view_from_cpu_tensor": _get_cuda_view_from_cpu_tensor_fake,
    "stableops_cuda_utils::get_device_attribute": _real_int_query(
        "stableops_cuda_utils::get_device_attribute"
    ),
    "stableops_cuda_utils::get_max_shared_memory_per_block_device_attribute": (
        _real_int_query(
            "stableops_cuda_utils::get_max_shared_memory_per_block_device_attribute"
        )
    ),
}

_lock = threading.Lock()
_registered: list[str] = []
_done = False


def _op_exists(qualname: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(qualname, "")
    except RuntimeError:
        return False
    return True


def register_fakes() -> list[str]:
    """Register the fake impl of every loaded operator (once). Returns their
    qualified names."""
    global _done
    with _lock:
        if not _done:
            for qualname, fn in FAKE_IMPLS.items():
                if _op_exists(qualname):
                    torch.library.register_fake(qualname, fn)
                    _registered.append(qualname)
            _done = True
        return list(_registered)

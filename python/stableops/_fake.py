"""Fake (meta) implementations for every operator of the library.

They let ``torch.compile(fullgraph=True)``, ``torch.library.opcheck`` and meta
tensors trace the operators without running them.

Validation happens once, in C++: each op has one check function that its CPU
kernel, its GPU kernel and these fakes all go through (each family's
``*_check.h``, built on csrc/core/check.h).
FakeTensor does run a C++ Meta kernel registered through the stable ABI, but
only with concrete sizes: under dynamic shapes the sizes are symbolic, and
the stable ABI (at the 2.11 target) has no way to read them (aoti_torch's
size getters fail on SymInts). A Python fake is needed for those, and
``register_fake`` refuses an op that also has a C++ Meta kernel. So the fake
of a mutating op:

1. checks that all tensor arguments share one device (the rule and message
   of ``stableops::check_devices``; meta tensors cannot carry it);
2. runs the op's CPU kernel on meta copies of the arguments
   (``redispatch`` to the CPU key), which validates and returns without
   touching data. Symbolic sizes and strides become their hints (the sizes
   of the example inputs being traced), which adds no guards; an unbacked
   size (data-dependent, no hint) skips this step, and the kernel still
   checks at run time.

tests/test_bad_inputs.py runs every bad-input case through the real kernel
and through the fake and requires the same decision and message.

What a fake cannot decide, the kernel still checks at run time: whether CPU
memory is pinned (swap_blocks between CPU and GPU needs it; a fake tensor has
no such property), and data-dependent checks such as an out-of-range slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from ._dispatch import has_op

__all__ = ["FAKE_IMPLS", "register_fakes"]

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


class _NoHint(Exception):
    """A size without a hint (unbacked): the fake cannot run the C++ check."""


def _int(v: Any) -> Any:
    """A concrete value for a (possibly symbolic) scalar: a symbol's hint.

    Reads ``SymNode.hint`` (the same in torch 2.11 and 2.13, unlike the
    symbolic_shapes helpers around it), which adds no guard.
    """
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = v.node.hint
        if not isinstance(hint, (bool, int, float)):
            raise _NoHint
        return hint
    return v


def _meta(v: Any) -> Any:
    """A meta copy of a tensor: same sizes, strides, storage offset and dtype
    (hints for symbols). The offset keeps the kernel's alignment checks
    meaningful: a meta tensor's data_ptr() is its offset in bytes."""
    if isinstance(v, torch.Tensor):
        size = [_int(s) for s in v.shape]
        stride = [_int(s) for s in v.stride()]
        offset = _int(v.storage_offset())
        span = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(n > 0 for n in size) else 0
        base = torch.empty(offset + span, dtype=v.dtype, device="meta")
        return base.as_strided(size, stride, offset)
    if isinstance(v, (list, tuple)):
        return type(v)(_meta(x) for x in v)
    return _int(v)


def _check_devices(op: str, named: list[tuple[str, Any]]) -> None:
    """stableops::check_devices' rule: every tensor on the first tensor's device."""
    ref: tuple[str, torch.Tensor] | None = None
    for name, value in named:
        if not isinstance(value, torch.Tensor):
            continue
        if ref is None:
            ref = (name, value)
        elif value.device != ref[1].device:
            raise RuntimeError(
                f"{op}: {name} must be on the same device as {ref[0]} ({ref[1].device}), got {value.device}"
            )


def _validated_by_kernel(qualname: str) -> Callable[..., None]:
    """The fake of a mutating op (``-> ()``): validation through its CPU kernel."""
    ns, name = qualname.split("::")
    overload = getattr(getattr(torch.ops, ns), name).default
    arg_names = [a.name for a in overload._schema.arguments]
    check_devices = _DEVICE_RULES.get(qualname, _check_devices)

    def fake(*args: Any, **kwargs: Any) -> None:
        named = list(zip(arg_names, args)) + [(k, v) for k, v in kwargs.items()]
        check_devices(name, named)
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        try:
            with unset_fake_temporarily():
                meta_args = [_meta(a) for a in args]
                meta_kwargs = {k: _meta(v) for k, v in kwargs.items()}
                overload.redispatch(_CPU, *meta_args, **meta_kwargs)
        except _NoHint:
            pass

    fake.__name__ = f"{name}_fake"
    return fake


def _swap_blocks_devices(op: str, named: list[tuple[str, Any]]) -> None:
    """stableops::check_swap_blocks' device rule (csrc/cache/cache_check.cpp):
    block_mapping on the CPU; src and dst each on the CPU or a GPU, one GPU if
    both are. Same order and messages as the C++ check."""
    args = dict(named)
    mapping, src, dst = args["block_mapping"], args["src"], args["dst"]
    if mapping.device.type != "cpu":
        raise RuntimeError(f"{op}: block_mapping must be a cpu tensor, got {mapping.device}")
    for arg in ("src", "dst"):
        if args[arg].device.type not in ("cpu", "cuda"):
            raise RuntimeError(f"{op}: {arg} must be a cpu or cuda tensor, got {args[arg].device}")
    if src.device.type == dst.device.type == "cuda" and src.device != dst.device:
        raise RuntimeError(f"{op}: src ({src.device}) and dst ({dst.device}) must be on the same GPU")


#: Ops whose tensors may sit on different devices: their own device rule
#: replaces _check_devices (the C++ check skips devices on meta tensors).
_DEVICE_RULES: dict[str, Callable[[str, list[tuple[str, Any]]], None]] = {
    "stableops_cache_ops::swap_blocks": _swap_blocks_devices,
}


def _get_cuda_view_from_cpu_tensor_fake(cpu_tensor: torch.Tensor) -> torch.Tensor:
    # The kernel's device rule and message (csrc/utils/cuda_utils.cu), so a
    # traced call with a GPU tensor fails at trace time as it would when run.
    # A meta tensor stands for any device and passes.
    if cpu_tensor.device.type not in ("cpu", "meta"):
        raise RuntimeError(
            f"get_cuda_view_from_cpu_tensor: expected a CPU tensor, got a tensor on {cpu_tensor.device}"
        )
    return torch.empty_strided(
        cpu_tensor.shape,
        cpu_tensor.stride(),
        dtype=cpu_tensor.dtype,
        device=torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cuda",
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


#: Every mutating operator of the library: its fake validates through the CPU kernel.
VALIDATED_BY_KERNEL: tuple[str, ...] = (
    "stableops::merge_attn_states",
    "stableops::rms_norm",
    "stableops::fused_add_rms_norm",
    "stableops::rms_norm_weightless",
    "stableops::fused_add_rms_norm_weightless",
    "stableops::silu_and_mul",
    "stableops::mul_and_silu",
    "stableops::silu_and_mul_with_clamp",
    "stableops::gelu_and_mul",
    "stableops::gelu_tanh_and_mul",
    "stableops::fatrelu_and_mul",
    "stableops::swigluoai_and_mul",
    "stableops::gelu_new",
    "stableops::gelu_fast",
    "stableops::gelu_quick",
    "stableops::rotary_embedding",
    "stableops::static_scaled_fp8_quant",
    "stableops::dynamic_scaled_fp8_quant",
    "stableops::dynamic_per_token_scaled_fp8_quant",
    "stableops::static_scaled_int8_quant",
    "stableops::dynamic_scaled_int8_quant",
    "stableops_cache_ops::reshape_and_cache_flash",
    "stableops_cache_ops::concat_and_cache_mla",
    "stableops_cache_ops::swap_blocks",
)

#: Operators whose fake is written out here.
_SPECIAL: dict[str, Callable[[str], Callable[..., Any]]] = {
    # Needs pinned CPU memory, which meta tensors cannot show; returns a view.
    "stableops::get_cuda_view_from_cpu_tensor": lambda _: _get_cuda_view_from_cpu_tensor_fake,
    "stableops_cuda_utils::get_device_attribute": _real_int_query,
    "stableops_cuda_utils::get_max_shared_memory_per_block_device_attribute": _real_int_query,
}

#: Every operator of the library and how its fake is made.
FAKE_IMPLS: dict[str, Callable[[str], Callable[..., Any]]] = {
    **{q: _validated_by_kernel for q in VALIDATED_BY_KERNEL},
    **_SPECIAL,
}

_lock = threading.Lock()
_registered: list[str] = []
_done = False


def register_fakes() -> list[str]:
    """Register the fake impl of every loaded operator (once). Returns their
    qualified names."""
    global _done
    with _lock:
        if not _done:
            for qualname, make in FAKE_IMPLS.items():
                ns, name = qualname.split("::")
                # Skips what an earlier, interrupted call registered: a
                # second register_fake of one op raises.
                if qualname not in _registered and has_op(ns, name):
                    torch.library.register_fake(qualname, make(qualname))
                    _registered.append(qualname)
            _done = True
        return list(_registered)

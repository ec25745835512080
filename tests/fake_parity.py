"""Runs an op through its kernel and through its fake, for bad-input tests.

Every op's fake validates through the op's own C++ check (python/stableops/
_fake.py); these helpers let a test require that the kernel and the fake make
the same decision with the same message on every case.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch


def decision(call: Callable[[], Any]) -> str | None:
    """None if the call is accepted, else the first line of its RuntimeError,
    with addresses masked (a fake tensor's data pointer is not the real one)
    and the "function, file:line, " prefix some torch versions put before a
    C++ check's message dropped (the fake's device check is Python's)."""
    try:
        call()
    except RuntimeError as e:
        line = re.sub(r"^[\w:~<>]+, [\w/.+-]+:\d+, ", "", str(e).splitlines()[0])
        return re.sub(r"0x[0-9a-f]+", "0x?", line)
    return None


def fake_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn` on fake copies of the tensor arguments (devices, sizes, strides and
    storage offsets kept) under FakeTensorMode: what torch.compile sees."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=False) as mode:

        def fake(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                return mode.from_tensor(v)
            if isinstance(v, (list, tuple)):
                return type(v)(fake(x) for x in v)
            return v

        return fn(*[fake(a) for a in args], **{k: fake(v) for k, v in kwargs.items()})


def assert_same_decision(fn: Callable[..., Any], *args: Any, expect_ok: bool, **kwargs: Any) -> str | None:
    """The kernel and the fake accept or reject alike, with the same message.

    The kernel runs on clones of the tensor arguments (a rejected call must not
    write anything; an accepted one may). Returns the kernel's decision.
    """

    def clone(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.device.type != "meta":
            return v.clone() if v.is_contiguous() else v
        return v

    real = decision(lambda: fn(*[clone(a) for a in args], **{k: clone(v) for k, v in kwargs.items()}))
    fake = decision(lambda: fake_call(fn, *args, **kwargs))
    assert (real is None) == expect_ok, f"kernel decision: {real!r}"
    assert fake == real, f"fake decided {fake!r}, kernel {real!r}"
    return real

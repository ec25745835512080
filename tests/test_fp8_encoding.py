"""csrc/core/fp8.h's conversion equals torch's, bit for bit.

The kernels' FP8 encoder is reached through merge_attn_states with
prefill_tokens_with_context=0 (every token takes the suffix unchanged) and
output_scale=1: the output is then exactly clamp(suffix, -MAX, MAX) encoded
(x / 1.0 is exact). Inputs: every representable value of both formats, every
midpoint between neighbours (the round-to-nearest-even ties), two float32
ulps either side of each, both signs, and a million float32 bit patterns
spread over the whole range (NaN, inf and subnormals included). On the CPU
always; on the GPU when one is visible (there the e4m3fn path uses the
hardware conversion on sm_89 and newer).
"""

from __future__ import annotations

import sys

import pytest
import torch

import stableops  # noqa: F401  (loads the library)
from stableops import ops

FORMATS = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}


def _points() -> torch.Tensor:
    vals = []
    for dt in FORMATS:
        codes = torch.arange(256, dtype=torch.uint8).view(dt).float()
        codes = codes[torch.isfinite(codes)].unique().sort().values
        vals += [codes, ((codes[1:].double() + codes[:-1].double()) / 2).float()]
    bits = torch.cat(vals).view(torch.int32)
    near = torch.cat([bits + d for d in (-2, -1, 0, 1, 2)]).view(torch.float32)
    spread = torch.arange(0, 1 << 32, 4099, dtype=torch.int64).to(torch.int32).view(torch.float32)
    extra = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), -float("nan"), 1e-30, -1e-30])
    x = torch.cat([near, -near, spread, extra])
    pad = (-x.numel()) % 4
    return torch.cat([x, torch.zeros(pad)])


def _encode(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    t = x.numel() // 4
    suffix = x.view(t, 1, 4)
    prefix = torch.zeros_like(suffix)
    lse = torch.zeros(1, t, device=x.device)
    out = torch.empty(t, 1, 4, dtype=dtype, device=x.device)
    ops.merge_attn_states(out, None, prefix, lse, suffix, lse, prefill_tokens_with_context=0,
                          output_scale=torch.ones(1, device=x.device))
    return out.view(torch.uint8).view(-1)


def _expected(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """torch's conversion of clamp(x / 1), computed where x lives: a GPU's
    division returns the canonical NaN, whatever the sign of a NaN input, as
    the kernel's division does; the CPU's keeps the sign."""
    mx = FORMATS[dtype]
    return (x / torch.ones((), device=x.device)).clamp(-mx, mx).to(dtype).view(torch.uint8).cpu()


@pytest.mark.parametrize("dtype", list(FORMATS), ids=["e4m3fn", "e4m3fnuz"])
def test_cpu_encoding_equals_torch(dtype: torch.dtype) -> None:
    x = _points()
    got = _encode(x, dtype)
    want = _expected(x, dtype)
    bad = (got != want).nonzero().flatten()
    assert bad.numel() == 0, [(x[i].item(), hex(want[i].item()), hex(got[i].item())) for i in bad[:8]]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible: the device encoder is checked on a GPU machine")
@pytest.mark.parametrize("dtype", list(FORMATS), ids=["e4m3fn", "e4m3fnuz"])
def test_gpu_encoding_equals_torch(dtype: torch.dtype) -> None:
    x = _points()
    got = _encode(x.cuda(), dtype).cpu()
    want = _expected(x.cuda(), dtype)
    bad = (got != want).nonzero().flatten()
    assert bad.numel() == 0, [(x[i].item(), hex(want[i].item()), hex(got[i].item())) for i in bad[:8]]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

"""Tests of the KV-cache ops (torch.ops.stableops_cache_ops): reshape_and_cache_flash,
concat_and_cache_mla and swap_blocks, on the CPU and (skipped, saying why, where
no GPU is visible) on the GPU.

References: "auto" caches are compared bit for bit with the source rows; FP8
caches bit for bit with torch's own ``(x.float() / scale).clamp(-MAX,
MAX).to(fp8)`` (the contract) and, loosely, with a float64 division. Every bad
input runs through the kernel and the fake (fake_parity); slot and block
indices, which no fake can see, are checked on real tensors only.
"""

from __future__ import annotations

import os
import sys
import tempfile

if os.environ.get("TEST_TMPDIR") and not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor_", dir=os.environ["TEST_TMPDIR"])

from collections.abc import Callable
from typing import Any

import pytest
import torch

import stableops  # noqa: F401  (loads the library, registers the fakes)
from stableops import ops

from fake_parity import assert_same_decision

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA/ROCm GPU visible")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# kv_cache_dtype string, cache dtype, the FP8 format the bits are in (None: auto).
MODES: dict[str, tuple[str, torch.dtype | None, torch.dtype | None]] = {
    "auto": ("auto", None, None),
    "fp8_uint8": ("fp8", torch.uint8, torch.float8_e4m3fn),
    "fp8_e4m3_fn": ("fp8_e4m3", torch.float8_e4m3fn, torch.float8_e4m3fn),
    "fp8_fnuz": ("fp8", torch.float8_e4m3fnuz, torch.float8_e4m3fnuz),
}
FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e4m3fnuz: 240.0}
INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of `t` (so NaN payloads and -0.0 compare exactly)."""
    return t.view(INT_OF_SIZE[t.element_size()])


def assert_bits_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    """Bit equality, reporting the first differing positions."""
    got, want = bits(got.cpu()), bits(want.cpu())
    assert got.shape == want.shape, (got.shape, want.shape)
    diff = (got != want).nonzero()
    assert diff.numel() == 0, (
        f"{diff.shape[0]} of {got.numel()} elements differ; first at "
        f"{diff[:4].tolist()}: got {[got[tuple(i)].item() for i in diff[:4].tolist()]}, "
        f"want {[want[tuple(i)].item() for i in diff[:4].tolist()]}"
    )


def quantize_ref(x: torch.Tensor, scale: torch.Tensor, fmt: torch.dtype) -> torch.Tensor:
    """The contract: torch's float32 division, clamp and conversion; uint8 bits."""
    m = FP8_MAX[fmt]
    return (x.float() / scale.float().cpu()).clamp(-m, m).to(fmt).view(torch.uint8)


def encode(x: torch.Tensor, mode: str, scale: torch.Tensor) -> torch.Tensor:
    """What the cache must hold for source rows `x`, as raw bits."""
    _, _, fmt = MODES[mode]
    return bits(x) if fmt is None else quantize_ref(x, scale, fmt)


def check_fp8_against_float64(x: torch.Tensor, stored: torch.Tensor, scale: torch.Tensor, fmt: torch.dtype) -> None:
    """Loose float64 check: dequantised = x / scale within FP8's half ulp."""
    ref = (x.double() / float(scale)).clamp(-FP8_MAX[fmt], FP8_MAX[fmt])
    deq = stored.view(fmt).double()
    finite = ref.isfinite()
    err = (deq - ref).abs()[finite]
    assert bool((err <= ref.abs()[finite] * 2.0**-4 + 2.0**-9).all()), float(err.max())


def make_slots(n: int, num_slots: int, gen: torch.Generator, skip_every: int = 4) -> torch.Tensor:
    """Distinct slots (no two tokens share one), every `skip_every`-th -1."""
    assert n <= num_slots
    slots = torch.randperm(num_slots, generator=gen)[:n].clone()
    if skip_every:
        slots[::skip_every] = -1
    return slots


def random_cache(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """A cache full of garbage: random bytes for FP8 (NaNs included), else
    random values."""
    if dtype.itemsize == 1:
        return torch.randint(0, 255, shape, generator=g, dtype=torch.uint8).view(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def scale_tensor(v: float, device: str = "cpu") -> torch.Tensor:
    return torch.tensor([v], dtype=torch.float32, device=device)


# ==========================================================================
# reshape_and_cache_flash
# ==========================================================================
def flash_inputs(
    dtype: torch.dtype,
    mode: str,
    layout: str,
    *,
    t: int = 9,
    padding: int = 2,
    h: int = 3,
    d: int = 16,
    nb: int = 5,
    bs: int = 4,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, Any]:
    """Arguments of reshape_and_cache_flash. `layout`:
    contiguous - plain tensors;
    fused      - key/value views of one fused [T, 3, H, D] QKV tensor; caches
                 views of one [NB, 2, BS, H, D] tensor;
    strided    - head-strided key/value (padded D), caches with a padded head
                 stride and a block stride that is not a multiple of 16 bytes.
    """
    g = torch.Generator().manual_seed(seed)
    kv_dtype, cache_dtype, _ = MODES[mode]
    cache_dtype = cache_dtype or dtype
    if layout == "fused":
        qkv = (torch.randn(t, 3, h, d, generator=g) * 3).to(dtype)
        key, value = qkv[:, 1], qkv[:, 2]
        both = random_cache((nb, 2, bs, h, d), cache_dtype, g)
        key_cache, value_cache = both[:, 0], both[:, 1]
    else:
        pad = 3 if layout == "strided" else 0
        key = (torch.randn(t, h, d + pad, generator=g) * 3).to(dtype)[..., :d]
        value = (torch.randn(t, h, d + pad, generator=g) * 3).to(dtype)[..., :d]

        def cache() -> torch.Tensor:
            c = random_cache((nb * bs * h * (d + pad) + pad,), cache_dtype, g)
            return c[pad:].view(nb, bs, h, d + pad)[..., :d]

        key_cache, value_cache = cache(), cache()
    args = {
        "key": key,
        "value": value,
        "key_cache": key_cache,
        "value_cache": value_cache,
        "slot_mapping": make_slots(t - padding, nb * bs, g),
        "kv_cache_dtype": kv_dtype,
        "k_scale": scale_tensor(0.37),
        "v_scale": scale_tensor(1.9),
    }
    return args if device == "cpu" else to_device(args, device)


def to_device(args: dict[str, Any], device: str) -> dict[str, Any]:
    """Every tensor argument copied to `device`, strides and offsets kept."""
    dev = torch.device(device)
    return {k: (_to_device_keep_strides(v, dev) if isinstance(v, torch.Tensor) else v) for k, v in args.items()}


def _to_device_keep_strides(t: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """A copy of a (strided) view on `dev` with the same sizes, strides and offset."""
    if t.numel() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=dev)
    base = torch.empty(t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1, dtype=t.dtype, device=dev)
    out = base.as_strided(t.shape, t.stride(), t.storage_offset())
    bits(out).copy_(bits(t))  # raw bits: torch's float8 copies are not bitwise
    return out


def expected_flash(args: dict[str, Any], mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Bits the two caches must hold after the call (computed on the CPU)."""
    slots = args["slot_mapping"].cpu()
    n = slots.numel()
    valid = slots >= 0
    s = slots[valid]
    out = []
    for src, cache, scale in (("key", "key_cache", "k_scale"), ("value", "value_cache", "v_scale")):
        c = bits(args[cache].cpu()).clone()
        bs = c.shape[1]
        c[s // bs, s % bs] = encode(args[src].cpu()[:n][valid], mode, args[scale])
        out.append(c)
    return out[0], out[1]


def run_flash(args: dict[str, Any]) -> None:
    ops.reshape_and_cache_flash(**args)


def assert_flash_result(args: dict[str, Any], before: dict[str, Any], mode: str) -> None:
    want_k, want_v = expected_flash(before, mode)
    assert_bits_equal(args["key_cache"], want_k)
    assert_bits_equal(args["value_cache"], want_v)
    fmt = MODES[mode][2]
    if fmt is not None:
        slots = before["slot_mapping"].cpu()
        valid = slots >= 0
        s = slots[valid]
        bs = want_k.shape[1]
        x = before["key"].cpu()[: slots.numel()][valid]
        check_fp8_against_float64(x, want_k[s // bs, s % bs], before["k_scale"], fmt)


def clone_args(args: dict[str, Any]) -> dict[str, Any]:
    """Deep copies (strides kept) of every tensor argument."""
    out = {}
    for k, v in args.items():
        if isinstance(v, torch.Tensor):
            out[k] = _to_device_keep_strides(v, v.device)
        else:
            out[k] = v
    return out


LAYOUTS = ["contiguous", "fused", "strided"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_flash_cpu_matches_reference(dtype: str, mode: str, layout: str) -> None:
    args = flash_inputs(DTYPES[dtype], mode, layout, seed=len(dtype) + len(mode) + len(layout))
    before = clone_args(args)
    run_flash(args)
    assert_flash_result(args, before, mode)


@pytest.mark.parametrize("mode", list(MODES))
def test_flash_cpu_odd_sizes(mode: str) -> None:
    # head_size 13, 1 head, block_size 3, a single token: no vector multiple anywhere.
    for t, h, d, bs in [(1, 1, 13, 3), (6, 5, 7, 1), (4, 2, 1, 5)]:
        args = flash_inputs(torch.float16, mode, "strided", t=t, padding=0, h=h, d=d, nb=6, bs=bs, seed=t)
        before = clone_args(args)
        run_flash(args)
        assert_flash_result(args, before, mode)


@pytest.mark.parametrize("mode", ["fp8_uint8", "fp8_fnuz"])
def test_flash_cpu_fp8_special_values(mode: str) -> None:
    """NaN, infinities, values past the format's range, subnormals, -0.0 and
    values whose quotient rounds differently with x * (1/s): bit-exact."""
    fmt = MODES[mode][2]
    assert fmt is not None
    s = scale_tensor(0.3)
    special = torch.tensor(
        [float("nan"), -float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 0.0, -0.0,
         FP8_MAX[fmt] * 0.3, FP8_MAX[fmt] * 0.3 * 1.01, 2.0**-12, -(2.0**-10), 1e-40, 3.4e38]
    )
    # Quotients x / s whose FP8 rounding depends on the division being IEEE.
    g = torch.Generator().manual_seed(7)
    cand = torch.randn(1 << 16, generator=g) * 8
    exact = quantize_ref(cand, s, fmt)
    via_recip = (cand * (1.0 / s)).clamp(-FP8_MAX[fmt], FP8_MAX[fmt]).to(fmt).view(torch.uint8)
    differ = cand[exact != via_recip][:64]
    x = torch.cat([special, differ, torch.randn(128, generator=g) * 100])
    n = x.numel() // 8 * 8
    key = x[:n].view(-1, 1, 8)
    t = key.shape[0]
    cache = torch.zeros(t, 1, 1, 8, dtype=MODES[mode][1])
    vcache = torch.zeros_like(cache)
    slots = torch.arange(t)
    ops.reshape_and_cache_flash(key, key, cache, vcache, slots, "fp8", s, s)
    want = quantize_ref(key, s, fmt)
    assert torch.equal(cache.view(torch.uint8).view(t, 1, 8), want)
    assert torch.equal(vcache.view(torch.uint8).view(t, 1, 8), want)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_flash_cpu_zero_tokens(dtype: str) -> None:
    for t, padding in [(0, 0), (3, 3)]:  # no rows at all; rows but T' = 0
        args = flash_inputs(DTYPES[dtype], "fp8_uint8", "contiguous", t=t, padding=padding)
        before = clone_args(args)
        run_flash(args)
        assert torch.equal(bits(args["key_cache"]), bits(before["key_cache"]))


def test_flash_cpu_auto_does_not_read_scales() -> None:
    args = flash_inputs(torch.bfloat16, "auto", "contiguous")
    args["k_scale"] = scale_tensor(float("nan"))
    args["v_scale"] = scale_tensor(0.0)
    before = clone_args(args)
    run_flash(args)
    assert_flash_result(args, before, "auto")


@pytest.mark.parametrize("bad_slot", ["past_end", "minus_two"])
def test_flash_cpu_out_of_range_slot_raises_and_writes_nothing(bad_slot: str) -> None:
    args = flash_inputs(torch.float32, "auto", "contiguous", t=6, padding=0, nb=2, bs=4)
    slots = args["slot_mapping"]
    slots[:] = torch.tensor([0, 1, 2, 3, 4, 5])
    slots[4] = 8 if bad_slot == "past_end" else -2
    before = clone_args(args)
    with pytest.raises(RuntimeError, match=r"reshape_and_cache_flash: slot_mapping\[4\] = (8|-2) is out of range"):
        run_flash(args)
    assert torch.equal(bits(args["key_cache"]), bits(before["key_cache"]))
    assert torch.equal(bits(args["value_cache"]), bits(before["value_cache"]))


def test_flash_cpu_many_tokens_threads() -> None:
    """Enough tokens for several parallel_for tasks; one vs several threads."""
    args = flash_inputs(torch.bfloat16, "fp8_uint8", "fused", t=700, padding=20, h=4, d=64, nb=48, bs=16)
    before = clone_args(args)
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(max(2, old))
        run_flash(args)
    finally:
        torch.set_num_threads(old)
    assert_flash_result(args, before, "fp8_uint8")


# ==========================================================================
# concat_and_cache_mla
# ==========================================================================
def mla_inputs(
    dtype: torch.dtype,
    mode: str,
    layout: str,
    *,
    t: int = 9,
    padding: int = 2,
    lora: int = 32,
    pe: int = 8,
    nb: int = 4,
    bs: int = 4,
    seed: int = 0,
) -> dict[str, Any]:
    """contiguous; fused (kv_c and k_pe views of one [T, L + R + 8] tensor,
    cache a view with padded slots); strided (odd L and R, odd offsets)."""
    g = torch.Generator().manual_seed(seed)
    kv_dtype, cache_dtype, _ = MODES[mode]
    cache_dtype = cache_dtype or dtype
    if layout == "strided":
        lora, pe = lora + 3, pe - 3
    w = lora + pe
    if layout == "contiguous":
        kv_c = (torch.randn(t, lora, generator=g) * 3).to(dtype)
        k_pe = (torch.randn(t, pe, generator=g) * 3).to(dtype)
    else:
        off = 1 if layout == "strided" else 0
        fused = (torch.randn(t, w + 8, generator=g) * 3).to(dtype)
        kv_c, k_pe = fused[:, off : off + lora], fused[:, off + lora : off + w]
    pad = 0 if layout == "contiguous" else 5
    raw = random_cache((nb, bs, w + pad), cache_dtype, g)
    return {
        "kv_c": kv_c,
        "k_pe": k_pe,
        "kv_cache": raw[..., :w],
        "slot_mapping": make_slots(t - padding, nb * bs, g),
        "kv_cache_dtype": kv_dtype,
        "scale": scale_tensor(0.7),
    }


def expected_mla(args: dict[str, Any], mode: str) -> torch.Tensor:
    slots = args["slot_mapping"].cpu()
    n = slots.numel()
    valid = slots >= 0
    s = slots[valid]
    c = bits(args["kv_cache"].cpu()).clone()
    bs = c.shape[1]
    rows = torch.cat([args["kv_c"].cpu(), args["k_pe"].cpu()], dim=1)[:n][valid]
    c[s // bs, s % bs] = encode(rows, mode, args["scale"])
    return c


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_mla_cpu_matches_reference(dtype: str, mode: str, layout: str) -> None:
    args = mla_inputs(DTYPES[dtype], mode, layout, seed=len(dtype) * len(mode))
    before = clone_args(args)
    ops.concat_and_cache_mla(**args)
    assert torch.equal(bits(args["kv_cache"]), expected_mla(before, mode))
    fmt = MODES[mode][2]
    if fmt is not None:
        slots = before["slot_mapping"]
        valid = slots >= 0
        s = slots[valid]
        rows = torch.cat([before["kv_c"], before["k_pe"]], dim=1)[: slots.numel()][valid]
        check_fp8_against_float64(rows, expected_mla(before, mode)[s // 4, s % 4], before["scale"], fmt)


def test_mla_cpu_zero_tokens_and_out_of_range() -> None:
    args = mla_inputs(torch.float16, "auto", "contiguous", t=0, padding=0)
    before = clone_args(args)
    ops.concat_and_cache_mla(**args)
    assert torch.equal(bits(args["kv_cache"]), bits(before["kv_cache"]))
    args = mla_inputs(torch.float16, "fp8_uint8", "contiguous", t=3, padding=0, nb=2, bs=2)
    args["slot_mapping"] = torch.tensor([0, 1, 4])
    before = clone_args(args)
    with pytest.raises(RuntimeError, match=r"concat_and_cache_mla: slot_mapping\[2\] = 4 is out of range .* 2 blocks of 2 slots \(valid: -1 to 3\)"):
        ops.concat_and_cache_mla(**args)
    assert torch.equal(bits(args["kv_cache"]), bits(before["kv_cache"]))


# ==========================================================================
# swap_blocks (CPU <-> CPU here; GPU cases below)
# ==========================================================================
def test_swap_blocks_cpu_copies_in_order() -> None:
    src = torch.arange(6 * 4 * 8, dtype=torch.float16).view(6, 4, 8)
    dst = torch.full((5, 4, 8), -1.0, dtype=torch.float16)
    mapping = torch.tensor([[3, 0], [0, 4], [5, 2]])
    ops.swap_blocks(src, dst, 4 * 8 * 2, mapping)
    assert torch.equal(dst[0], src[3]) and torch.equal(dst[4], src[0]) and torch.equal(dst[2], src[5])
    assert bool((dst[1] == -1).all()) and bool((dst[3] == -1).all())
    # Part of a block: the first 20 bytes (10 halves), in one tensor, in order.
    t = torch.arange(4 * 16, dtype=torch.float16).view(4, 16)
    orig = t.clone()
    ops.swap_blocks(t, t, 20, torch.tensor([[0, 1], [1, 2]]))
    assert torch.equal(t[1, :10], orig[0, :10]) and torch.equal(t[1, 10:], orig[1, 10:])
    assert torch.equal(t[2, :10], orig[0, :10])  # pair 2 saw pair 1's write
    assert torch.equal(t[0], orig[0]) and torch.equal(t[3], orig[3])


def test_swap_blocks_cpu_strided_blocks_and_empty_mapping() -> None:
    both = torch.randn(4, 2, 3, 8)  # [NB, K/V, ...]: the K half of each block
    src = both[:, 0]
    dst = torch.zeros(4, 3, 8)
    ops.swap_blocks(src, dst, 3 * 8 * 4, torch.tensor([[1, 3], [2, 0]]))
    assert torch.equal(dst[3], src[1]) and torch.equal(dst[0], src[2])
    ops.swap_blocks(src, dst, 4, torch.empty(0, 2, dtype=torch.int64))


@pytest.mark.parametrize("pair", [(4, 0), (0, 3), (-1, 0), (0, -2)])
def test_swap_blocks_cpu_index_out_of_range(pair: tuple[int, int]) -> None:
    src = torch.randn(4, 8)
    dst = torch.zeros(3, 8)
    with pytest.raises(RuntimeError, match=r"swap_blocks: block_mapping\[1\] = .* out of range"):
        ops.swap_blocks(src, dst, 32, torch.tensor([[0, 0], list(pair)]))
    assert bool((dst == 0).all()), "a rejected call copied something"


# ==========================================================================
# Bad inputs: the kernel and the fake decide alike (CPU tensors)
# ==========================================================================
Maker = Callable[[], dict[str, Any]]


def _flash_good(mode: str = "auto") -> dict[str, Any]:
    return flash_inputs(torch.float16, mode, "contiguous", t=5, padding=1, h=2, d=8, nb=3, bs=4)


def _flash(mode: str = "auto", **changes: Any) -> Maker:
    def make() -> dict[str, Any]:
        args = _flash_good(mode)
        for k, v in changes.items():
            args[k] = v(args) if callable(v) else v
        return args

    return make


def _mla(mode: str = "auto", **changes: Any) -> Maker:
    def make() -> dict[str, Any]:
        args = mla_inputs(torch.bfloat16, mode, "contiguous", t=5, padding=1, lora=16, pe=8, nb=2, bs=4)
        for k, v in changes.items():
            args[k] = v(args) if callable(v) else v
        return args

    return make


def _swap(**changes: Any) -> Maker:
    def make() -> dict[str, Any]:
        args = {
            "src": torch.randn(4, 2, 8),
            "dst": torch.zeros(3, 2, 8),
            "block_size_in_bytes": 64,
            "block_mapping": torch.tensor([[0, 1], [3, 2]]),
        }
        for k, v in changes.items():
            args[k] = v(args) if callable(v) else v
        return args

    return make


BAD: dict[str, tuple[Callable[..., None], Maker, str | None]] = {
    # reshape_and_cache_flash
    "flash_good_auto": (ops.reshape_and_cache_flash, _flash(), None),
    "flash_good_fp8": (ops.reshape_and_cache_flash, _flash("fp8_fnuz"), None),
    "flash_kv_cache_dtype": (ops.reshape_and_cache_flash, _flash(kv_cache_dtype="fp8_e5m2"),
                             'kv_cache_dtype must be "auto", "fp8" or "fp8_e4m3", got "fp8_e5m2"'),
    "flash_key_int32": (ops.reshape_and_cache_flash, _flash(key=lambda a: a["key"].int(), value=lambda a: a["value"].int()),
                        "key must have dtype Float (float32), Half (float16) or BFloat16 (bfloat16), got Int"),
    "flash_value_dtype": (ops.reshape_and_cache_flash, _flash(value=lambda a: a["value"].float()),
                          "value must have the same dtype as key (Half), got Float"),
    "flash_value_shape": (ops.reshape_and_cache_flash, _flash(value=lambda a: a["value"][:, :1]),
                          "value shape [5, 1, 8] does not match key shape [5, 2, 8]"),
    "flash_key_2d": (ops.reshape_and_cache_flash, _flash(key=lambda a: a["key"][:, 0], value=lambda a: a["value"][:, 0]),
                     "key must be 3-D [num_tokens, num_heads, head_size], got 2-D tensor of shape [5, 8]"),
    "flash_cache_3d": (ops.reshape_and_cache_flash, _flash(key_cache=lambda a: a["key_cache"][0]),
                       "key_cache must be 4-D [num_blocks, block_size, num_heads, head_size], got 3-D"),
    "flash_cache_heads": (ops.reshape_and_cache_flash, _flash(key_cache=lambda a: a["key_cache"][:, :, :1], value_cache=lambda a: a["value_cache"][:, :, :1]),
                          "key_cache shape [3, 4, 1, 8] does not match key: expected [num_blocks, block_size, 2, 8]"),
    "flash_value_cache_shape": (ops.reshape_and_cache_flash, _flash(value_cache=lambda a: a["value_cache"][:2]),
                                "value_cache shape [2, 4, 2, 8] does not match key_cache shape [3, 4, 2, 8]"),
    "flash_auto_uint8_cache": (ops.reshape_and_cache_flash, _flash("fp8_uint8", kv_cache_dtype="auto"),
                               'kv_cache_dtype "auto" stores key unchanged, so key_cache must have the dtype of key (Half), got Byte'),
    "flash_fp8_half_cache": (ops.reshape_and_cache_flash, _flash("auto", kv_cache_dtype="fp8"),
                             'kv_cache_dtype "fp8" needs key_cache of dtype Byte (uint8, holding e4m3fn bits), Float8_e4m3fn or Float8_e4m3fnuz, got Half'),
    "flash_fp8_value_cache_dtype": (ops.reshape_and_cache_flash, _flash("fp8_uint8", value_cache=lambda a: a["value_cache"].view(torch.float8_e4m3fn)),
                                    "value_cache must have the same dtype as key_cache (Byte), got Float8_e4m3fn"),
    "flash_slots_int32": (ops.reshape_and_cache_flash, _flash(slot_mapping=lambda a: a["slot_mapping"].int()),
                          "slot_mapping must have dtype Long (int64), got Int"),
    "flash_slots_2d": (ops.reshape_and_cache_flash, _flash(slot_mapping=lambda a: a["slot_mapping"].view(2, 2)),
                       "slot_mapping must be 1-D [num_tokens], got 2-D tensor of shape [2, 2]"),
    "flash_slots_too_many": (ops.reshape_and_cache_flash, _flash(slot_mapping=torch.arange(6)),
                             "slot_mapping has 6 entries but key has only 5 rows"),
    "flash_k_scale_half": (ops.reshape_and_cache_flash, _flash(k_scale=torch.ones(1, dtype=torch.float16)),
                           "k_scale must have dtype Float (float32), got Half"),
    "flash_v_scale_two": (ops.reshape_and_cache_flash, _flash(v_scale=torch.ones(2)),
                          "v_scale must have exactly one element, got shape [2]"),
    "flash_key_last_dim": (ops.reshape_and_cache_flash, _flash(key=lambda a: a["key"].transpose(1, 2).contiguous().transpose(1, 2)),
                           "key must be contiguous in its last dim, got strides [16, 1, 2]"),
    "flash_cache_last_dim": (ops.reshape_and_cache_flash, _flash(value_cache=lambda a: a["value_cache"].transpose(2, 3).contiguous().transpose(2, 3)),
                             "value_cache must be contiguous in its last dim, got strides [64, 16, 1, 2]"),
    "flash_cache_expanded": (ops.reshape_and_cache_flash, _flash(key_cache=lambda a: a["key_cache"][:1].expand(3, -1, -1, -1)),
                             "key_cache has stride 0 in dim 0 of size 3 (strides [0, 16, 8, 1]): its elements would overlap"),
    "flash_slots_meta": (ops.reshape_and_cache_flash, _flash(slot_mapping=lambda a: a["slot_mapping"].to("meta")),
                         "slot_mapping must be on the same device as key (cpu), got meta"),
    "flash_k_scale_meta": (ops.reshape_and_cache_flash, _flash(k_scale=torch.ones(1, device="meta")),
                           "k_scale must be on the same device as key (cpu), got meta"),
    # concat_and_cache_mla
    "mla_good_auto": (ops.concat_and_cache_mla, _mla(), None),
    "mla_good_fp8": (ops.concat_and_cache_mla, _mla("fp8_e4m3_fn"), None),
    "mla_kv_cache_dtype": (ops.concat_and_cache_mla, _mla(kv_cache_dtype="int8"),
                           'kv_cache_dtype must be "auto", "fp8" or "fp8_e4m3", got "int8"'),
    "mla_kv_c_float64": (ops.concat_and_cache_mla, _mla(kv_c=lambda a: a["kv_c"].double(), k_pe=lambda a: a["k_pe"].double()),
                         "kv_c must have dtype Float (float32), Half (float16) or BFloat16 (bfloat16), got Double"),
    "mla_k_pe_dtype": (ops.concat_and_cache_mla, _mla(k_pe=lambda a: a["k_pe"].half()),
                       "k_pe must have the same dtype as kv_c (BFloat16), got Half"),
    "mla_kv_c_3d": (ops.concat_and_cache_mla, _mla(kv_c=lambda a: a["kv_c"].view(5, 2, 8)),
                    "kv_c must be 2-D [num_tokens, kv_lora_rank], got 3-D tensor of shape [5, 2, 8]"),
    "mla_k_pe_tokens": (ops.concat_and_cache_mla, _mla(k_pe=lambda a: a["k_pe"][:4]),
                        "k_pe has 4 tokens (shape [4, 8]) but kv_c has 5 (shape [5, 16])"),
    "mla_cache_width": (ops.concat_and_cache_mla, _mla(kv_cache=lambda a: a["kv_cache"][..., :20]),
                        "kv_cache last dim (20) must be kv_lora_rank + pe_dim = 16 + 8 = 24"),
    "mla_cache_4d": (ops.concat_and_cache_mla, _mla(kv_cache=lambda a: a["kv_cache"].unsqueeze(2)),
                     "kv_cache must be 3-D [num_blocks, block_size, kv_lora_rank + pe_dim], got 4-D"),
    "mla_auto_dtype": (ops.concat_and_cache_mla, _mla(kv_cache=lambda a: a["kv_cache"].half()),
                       'kv_cache_dtype "auto" stores kv_c unchanged, so kv_cache must have the dtype of kv_c (BFloat16), got Half'),
    "mla_fp8_float_cache": (ops.concat_and_cache_mla, _mla(kv_cache_dtype="fp8_e4m3"),
                            'kv_cache_dtype "fp8_e4m3" needs kv_cache of dtype Byte (uint8, holding e4m3fn bits)'),
    "mla_slots_too_many": (ops.concat_and_cache_mla, _mla(slot_mapping=torch.zeros(6, dtype=torch.int64)),
                           "slot_mapping has 6 entries but kv_c has only 5 rows"),
    "mla_scale_float64": (ops.concat_and_cache_mla, _mla(scale=torch.ones(1, dtype=torch.float64)),
                          "scale must have dtype Float (float32), got Double"),
    "mla_k_pe_last_dim": (ops.concat_and_cache_mla, _mla(k_pe=lambda a: a["k_pe"].t().contiguous().t()),
                          "k_pe must be contiguous in its last dim, got strides [1, 5]"),
    "mla_scale_meta": (ops.concat_and_cache_mla, _mla(scale=torch.ones(1, device="meta")),
                       "scale must be on the same device as kv_c (cpu), got meta"),
    # swap_blocks
    "swap_good": (ops.swap_blocks, _swap(), None),
    "swap_dtype": (ops.swap_blocks, _swap(dst=torch.zeros(3, 2, 8, dtype=torch.float16)),
                   "dst must have the same dtype as src (Float), got Half"),
    "swap_block_shape": (ops.swap_blocks, _swap(dst=torch.zeros(3, 2, 4)),
                         "dst shape [3, 2, 4] does not match src shape [4, 2, 8] past dim 0 (the shape of one block)"),
    "swap_src_0d": (ops.swap_blocks, _swap(src=torch.tensor(1.0), dst=torch.tensor(2.0)),
                    "src must have at least 1 dims, got 0-D tensor of shape []"),
    "swap_blocks_not_contiguous": (ops.swap_blocks, _swap(src=lambda a: torch.randn(4, 8, 2).transpose(1, 2)),
                                   "the blocks of src must be contiguous (dims 1.. of shape [4, 2, 8], strides [16, 1, 2])"),
    "swap_mapping_int32": (ops.swap_blocks, _swap(block_mapping=torch.tensor([[0, 1]], dtype=torch.int32)),
                           "block_mapping must have dtype Long (int64), got Int"),
    "swap_mapping_shape": (ops.swap_blocks, _swap(block_mapping=torch.zeros(2, 3, dtype=torch.int64)),
                           "block_mapping must have shape [num_pairs, 2], got [2, 3]"),
    "swap_bytes_zero": (ops.swap_blocks, _swap(block_size_in_bytes=0),
                        "block_size_in_bytes must be in [1, 64] (one block of src and dst: 16 elements of Float, src block stride 64 bytes, dst block stride 64 bytes), got 0"),
    "swap_bytes_past_block": (ops.swap_blocks, _swap(block_size_in_bytes=65),
                              "block_size_in_bytes must be in [1, 64]"),
    "swap_bytes_past_stride": (ops.swap_blocks, _swap(src=lambda a: torch.randn(4, 2, 16)[:, :, :8].contiguous().as_strided((4, 2, 8), (12, 8, 1)), block_size_in_bytes=64),
                               "block_size_in_bytes must be in [1, 48]"),
    "swap_mapping_meta": (ops.swap_blocks, _swap(block_mapping=torch.zeros(1, 2, dtype=torch.int64, device="meta")),
                          "block_mapping must be a cpu tensor, got meta"),
    "swap_dst_meta": (ops.swap_blocks, _swap(dst=torch.zeros(3, 2, 8, device="meta")),
                      "dst must be a cpu or cuda tensor, got meta"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_kernel_and_fake_agree(case: str) -> None:
    fn, make, expected = BAD[case]
    decision = assert_same_decision(fn, expect_ok=expected is None, **make())
    if expected is not None:
        assert decision is not None and expected in decision, decision
        op = fn.__name__
        assert f", {op}: " in decision or decision.startswith(f"{op}: "), decision


# ==========================================================================
# opcheck, meta tensors, torch.compile
# ==========================================================================
def _opcheck_cases() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    f = flash_inputs(torch.bfloat16, "fp8_uint8", "fused", t=6)
    f2 = flash_inputs(torch.float32, "auto", "strided", t=4, padding=0)
    m = mla_inputs(torch.float16, "fp8_uint8", "fused")  # opcheck cannot multiply float8
    s = _swap()()
    flash = torch.ops.stableops_cache_ops.reshape_and_cache_flash.default
    return {
        "flash_fp8": (flash, tuple(f.values())),
        "flash_auto": (flash, tuple(f2.values())),
        "mla_fp8": (torch.ops.stableops_cache_ops.concat_and_cache_mla.default, tuple(m.values())),
        "swap": (torch.ops.stableops_cache_ops.swap_blocks.default, tuple(s.values())),
    }


@pytest.mark.parametrize("case", ["flash_fp8", "flash_auto", "mla_fp8", "swap"])
def test_opcheck(case: str) -> None:
    op, args = _opcheck_cases()[case]
    torch.library.opcheck(op, args)


def test_meta_tensors_validate_only() -> None:
    args = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in _flash_good("fp8_uint8").items()}
    ops.reshape_and_cache_flash(**args)
    bad = dict(args, kv_cache_dtype="fp16")
    with pytest.raises(RuntimeError, match='kv_cache_dtype must be "auto"'):
        ops.reshape_and_cache_flash(**bad)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_flash_torch_compile_fullgraph(dynamic: bool) -> None:
    torch._dynamo.reset()

    def f(key: torch.Tensor, value: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor,
          slots: torch.Tensor, ks: torch.Tensor, vs: torch.Tensor) -> torch.Tensor:
        ops.reshape_and_cache_flash(key * 2, value, kc, vc, slots, "fp8", ks, vs)
        return kc.view(torch.uint8).sum(dtype=torch.int64) + vc.view(torch.uint8).sum(dtype=torch.int64)

    compiled = torch.compile(f, fullgraph=True, dynamic=dynamic)
    for t in (7, 11):  # a second size: a recompile (static) or the same graph (dynamic)
        args = flash_inputs(torch.float16, "fp8_uint8", "fused", t=t, nb=6)
        eager = clone_args(args)
        keys = ["key", "value", "key_cache", "value_cache", "slot_mapping", "k_scale", "v_scale"]
        out_c = compiled(*[args[k] for k in keys])
        out_e = f(*[eager[k] for k in keys])
        assert torch.equal(out_c, out_e)
        assert torch.equal(args["key_cache"].view(torch.uint8), eager["key_cache"].view(torch.uint8))


def test_mla_and_swap_torch_compile_dynamic() -> None:
    torch._dynamo.reset()

    def g(kv_c: torch.Tensor, k_pe: torch.Tensor, cache: torch.Tensor, slots: torch.Tensor,
          scale: torch.Tensor, other: torch.Tensor, mapping: torch.Tensor) -> None:
        ops.concat_and_cache_mla(kv_c, k_pe, cache, slots, "auto", scale)
        ops.swap_blocks(cache, other, cache.shape[1] * cache.shape[2] * cache.element_size(), mapping)

    compiled = torch.compile(g, fullgraph=True, dynamic=True)
    for t in (5, 9):
        args = mla_inputs(torch.bfloat16, "auto", "contiguous", t=t, padding=1)
        other = torch.zeros_like(args["kv_cache"])
        mapping = torch.tensor([[0, 1], [2, 3]])
        eager_args = clone_args(args)
        eager_other = other.clone()
        compiled(args["kv_c"], args["k_pe"], args["kv_cache"], args["slot_mapping"], args["scale"], other, mapping)
        g(eager_args["kv_c"], eager_args["k_pe"], eager_args["kv_cache"], eager_args["slot_mapping"], eager_args["scale"], eager_other, mapping)
        assert torch.equal(bits(args["kv_cache"]), bits(eager_args["kv_cache"]))
        assert torch.equal(bits(other), bits(eager_other))
        assert torch.equal(bits(other[1]), bits(args["kv_cache"][0]))


# ==========================================================================
# GPU (CUDA or ROCm): skipped where no GPU is visible
# ==========================================================================
@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_flash_gpu_matches_reference(dtype: str, mode: str, layout: str) -> None:
    args = flash_inputs(DTYPES[dtype], mode, layout, t=37, padding=5, h=4, d=64 if layout != "strided" else 40, nb=16, bs=4, seed=3, device="cuda")
    before = clone_args(args)
    run_flash(args)
    torch.cuda.synchronize()
    assert_flash_result(args, before, mode)


@requires_cuda
@pytest.mark.parametrize("mode", list(MODES))
def test_flash_gpu_odd_sizes_and_cpu_parity(mode: str) -> None:
    for t, h, d, bs in [(1, 1, 13, 3), (6, 5, 7, 1), (4, 2, 1, 5), (300, 8, 128, 16)]:
        nb = max(3, -(-t // bs) + 1)
        cpu = flash_inputs(torch.bfloat16, mode, "strided", t=t, padding=0, h=h, d=d, nb=nb, bs=bs, seed=t)
        gpu = to_device(cpu, "cuda")
        run_flash(cpu)
        run_flash(gpu)
        assert torch.equal(bits(gpu["key_cache"].cpu()), bits(cpu["key_cache"]))
        assert torch.equal(bits(gpu["value_cache"].cpu()), bits(cpu["value_cache"]))


@requires_cuda
@pytest.mark.parametrize("mode", ["auto", "fp8_uint8"])
def test_flash_gpu_large_and_special_values(mode: str) -> None:
    """Many blocks (T*H*D vectors > one wave), NaN/inf/huge values, the
    hardware FP8 conversion path: bit-equal to the CPU kernel."""
    t, h, d = 4099, 8, 128
    cpu = flash_inputs(torch.float16, mode, "fused", t=t, padding=3, h=h, d=d, nb=300, bs=16, seed=11)
    cpu["key"][:8, 0, :6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 60000.0, -0.0, 1e-7], dtype=torch.float16)
    gpu = to_device(cpu, "cuda")
    before = clone_args(cpu)
    run_flash(cpu)
    run_flash(gpu)
    assert torch.equal(bits(gpu["key_cache"].cpu()), bits(cpu["key_cache"]))
    assert torch.equal(bits(gpu["value_cache"].cpu()), bits(cpu["value_cache"]))
    assert_flash_result(cpu, before, mode)


@requires_cuda
def test_flash_gpu_out_of_range_slots_are_skipped() -> None:
    """GPU contract: slots < -1 or >= num_blocks * block_size are skipped (no
    host sync to raise); nothing outside the cache view is ever written."""
    nb, bs, h, d = 4, 4, 2, 64
    guard = torch.full((nb * bs * h * d * 3,), 7, dtype=torch.uint8, device="cuda")
    kc = guard[nb * bs * h * d : 2 * nb * bs * h * d].view(nb, bs, h, d)
    vc = torch.zeros(nb, bs, h, d, dtype=torch.uint8, device="cuda")
    key = torch.randn(6, h, d, device="cuda", dtype=torch.bfloat16)
    slots = torch.tensor([0, nb * bs, 5, -7, nb * bs + 1000, 2**40], device="cuda")
    s = scale_tensor(1.0, "cuda")
    ops.reshape_and_cache_flash(key, key, kc, vc, slots, "fp8", s, s)
    torch.cuda.synchronize()
    want = quantize_ref(key.cpu(), s, torch.float8_e4m3fn)
    assert torch.equal(kc.view(-1, h, d)[0].cpu(), want[0])
    assert torch.equal(kc.view(-1, h, d)[5].cpu(), want[2])
    untouched = [i for i in range(nb * bs) if i not in (0, 5)]
    assert bool((kc.view(-1, h, d)[untouched] == 7).all())
    assert bool((guard[: nb * bs * h * d] == 7).all()) and bool((guard[2 * nb * bs * h * d :] == 7).all())


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_mla_gpu_matches_cpu_kernel(dtype: str, mode: str, layout: str) -> None:
    cpu = mla_inputs(DTYPES[dtype], mode, layout, t=70, padding=3, lora=512 if layout != "strided" else 61, pe=64 if layout != "strided" else 11, nb=20, bs=4, seed=5)
    gpu = to_device(cpu, "cuda")
    before = clone_args(cpu)
    ops.concat_and_cache_mla(**cpu)
    ops.concat_and_cache_mla(**gpu)
    assert torch.equal(bits(gpu["kv_cache"].cpu()), bits(cpu["kv_cache"]))
    assert torch.equal(bits(cpu["kv_cache"]), expected_mla(before, mode))


@requires_cuda
def test_mla_gpu_out_of_range_slots_are_skipped() -> None:
    kv_c = torch.randn(3, 32, device="cuda")
    k_pe = torch.randn(3, 8, device="cuda")
    cache = torch.full((2, 2, 40), -3.0, device="cuda")
    ops.concat_and_cache_mla(kv_c, k_pe, cache, torch.tensor([4, 1, -2], device="cuda"), "auto", scale_tensor(1.0, "cuda"))
    torch.cuda.synchronize()
    assert torch.equal(cache[0, 1], torch.cat([kv_c[1], k_pe[1]]))
    assert bool((cache.view(4, 40)[[0, 2, 3]] == -3).all())


@requires_cuda
def test_cache_ops_cuda_graph_capture_and_replay() -> None:
    f = flash_inputs(torch.bfloat16, "fp8_uint8", "fused", t=33, padding=1, h=8, d=128, nb=16, bs=16, device="cuda")
    m = mla_inputs(torch.bfloat16, "auto", "contiguous", t=33, padding=1, lora=512, pe=64, nb=16, bs=16)
    m = to_device(m, "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off capture
        run_flash(f)
        ops.concat_and_cache_mla(**m)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_flash(f)
        ops.concat_and_cache_mla(**m)
    # New data and slots in the same buffers, then replay.
    g = torch.Generator().manual_seed(99)
    f["key"].copy_(torch.randn(f["key"].shape, generator=g).to(torch.bfloat16))
    f["slot_mapping"].copy_(make_slots(32, 256, g))
    m["kv_c"].copy_(torch.randn(m["kv_c"].shape, generator=g).to(torch.bfloat16))
    m["slot_mapping"].copy_(make_slots(32, 256, g))
    before_f = clone_args(f)
    before_m = clone_args(m)
    graph.replay()
    torch.cuda.synchronize()
    assert_flash_result(f, before_f, "fp8_uint8")
    assert torch.equal(bits(m["kv_cache"].cpu()), expected_mla(before_m, "auto"))


@requires_cuda
def test_gpu_bad_inputs_kernel_and_fake_agree() -> None:
    f = flash_inputs(torch.float16, "fp8_uint8", "contiguous", device="cuda")
    cases = [
        (dict(f, slot_mapping=f["slot_mapping"].cpu()), "slot_mapping must be on the same device as key (cuda:0), got cpu"),
        (dict(f, k_scale=f["k_scale"].cpu()), "k_scale must be on the same device as key (cuda:0), got cpu"),
        (dict(f, kv_cache_dtype="fp8_e5m2"), 'got "fp8_e5m2"'),
        (dict(f, value_cache=f["value_cache"][:, :, :1]), "value_cache shape"),
    ]
    for args, msg in cases:
        decision = assert_same_decision(ops.reshape_and_cache_flash, expect_ok=False, **args)
        assert decision is not None and msg.replace("cuda:0", f"cuda:{torch.cuda.current_device()}") in decision, decision
    assert_same_decision(ops.reshape_and_cache_flash, expect_ok=True, **f)
    src = torch.randn(4, 64, device="cuda")
    for args, msg in [
        ((src, torch.zeros(4, 64, device="cuda"), 256, torch.tensor([[0, 1]], device="cuda")), "block_mapping must be a cpu tensor"),
        ((src, torch.zeros(4, 32, device="cuda"), 128, torch.tensor([[0, 1]])), "does not match src shape"),
    ]:
        decision = assert_same_decision(ops.swap_blocks, *args, expect_ok=False)
        assert decision is not None and msg in decision, decision


@requires_cuda
def test_gpu_opcheck() -> None:
    f = flash_inputs(torch.bfloat16, "fp8_uint8", "fused", t=10, device="cuda")
    torch.library.opcheck(torch.ops.stableops_cache_ops.reshape_and_cache_flash.default, tuple(f.values()))
    m = to_device(mla_inputs(torch.float16, "fp8_uint8", "fused"), "cuda")
    torch.library.opcheck(torch.ops.stableops_cache_ops.concat_and_cache_mla.default, tuple(m.values()))
    src = torch.randn(4, 64, device="cuda")
    torch.library.opcheck(torch.ops.stableops_cache_ops.swap_blocks.default, (src, torch.zeros(3, 64, device="cuda"), 256, torch.tensor([[0, 1], [3, 0]])))


@requires_cuda
def test_gpu_flash_torch_compile_dynamic() -> None:
    torch._dynamo.reset()

    def f(key: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, slots: torch.Tensor, s: torch.Tensor) -> None:
        ops.reshape_and_cache_flash(key, key * 2, kc, vc, slots, "fp8", s, s)

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for t in (5, 17):
        a = flash_inputs(torch.bfloat16, "fp8_uint8", "contiguous", t=t, nb=8, device="cuda")
        e = clone_args(a)
        compiled(a["key"], a["key_cache"], a["value_cache"], a["slot_mapping"], a["k_scale"])
        f(e["key"], e["key_cache"], e["value_cache"], e["slot_mapping"], e["k_scale"])
        assert torch.equal(bits(a["value_cache"]), bits(e["value_cache"]))


# swap_blocks on the GPU ---------------------------------------------------
def _pattern(n: int, w: int, device: str, pinned: bool = False, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    t = torch.arange(n * w, dtype=torch.float64).view(n, w).to(dtype)
    t = t.pin_memory() if pinned else t
    return t.to(device) if device != "cpu" else t


@requires_cuda
@pytest.mark.parametrize(
    "direction", ["d2d", "d2d_unaligned", "d2d_same_tensor", "h2d", "d2h"]
)
def test_swap_blocks_gpu(direction: str) -> None:
    w = 1024  # 4 KiB fp32 blocks
    mapping = torch.tensor([[3, 0], [0, 2], [5, 4]])
    nbytes = w * 4
    if direction == "d2d":
        src, dst = _pattern(6, w, "cuda"), torch.zeros(5, w, device="cuda")
    elif direction == "d2d_unaligned":
        nbytes = 4 * 1001
        src = _pattern(6, w + 1, "cuda")[:, 1:]  # 4-byte aligned rows only
        dst = torch.zeros(5, w, device="cuda")
    elif direction == "h2d":
        src, dst = _pattern(6, w, "cpu", pinned=True), torch.zeros(5, w, device="cuda")
    elif direction == "d2h":
        src, dst = _pattern(6, w, "cuda"), torch.zeros(5, w).pin_memory()
    else:  # one tensor: pairs must run in order (0 -> 2, then 2 -> 4)
        t = _pattern(6, w, "cuda")
        orig = t.cpu()
        ops.swap_blocks(t, t, nbytes, torch.tensor([[0, 2], [2, 4]]))
        torch.cuda.synchronize()
        assert torch.equal(t[2].cpu(), orig[0]) and torch.equal(t[4].cpu(), orig[0])
        assert torch.equal(t[[0, 1, 3, 5]].cpu(), orig[[0, 1, 3, 5]])
        return
    ops.swap_blocks(src, dst, nbytes, mapping)
    torch.cuda.synchronize()
    n = nbytes // 4
    s, d = src.cpu(), dst.cpu()
    for a, b in mapping.tolist():
        assert torch.equal(d[b, :n], s[a, :n])
    assert bool((d[1] == 0).all()) and bool((d[3] == 0).all())
    if n < w:
        assert bool((d[:, n:] == 0).all())


@requires_cuda
def test_swap_blocks_gpu_many_pairs_large_blocks() -> None:
    """More pairs than one launch takes (128), 2 MiB blocks."""
    nb, w = 300, 2 * 1024 * 1024 // 2
    src = torch.randn(nb, w, device="cuda", dtype=torch.float16)
    dst = torch.zeros(nb, w, device="cuda", dtype=torch.float16)
    perm = torch.randperm(nb)
    mapping = torch.stack([torch.arange(nb), perm], dim=1)
    ops.swap_blocks(src, dst, w * 2, mapping)
    assert torch.equal(dst[perm], src)


@requires_cuda
def test_swap_blocks_gpu_rejects_pageable_and_out_of_range() -> None:
    gpu = _pattern(4, 64, "cuda")
    pageable = torch.zeros(4, 64)
    with pytest.raises(RuntimeError, match="swap_blocks: dst is a cpu tensor in pageable memory"):
        ops.swap_blocks(gpu, pageable, 256, torch.tensor([[0, 1]]))
    with pytest.raises(RuntimeError, match="swap_blocks: src is a cpu tensor in pageable memory"):
        ops.swap_blocks(pageable, gpu, 256, torch.tensor([[0, 1]]))
    dst = torch.zeros(4, 64, device="cuda")
    with pytest.raises(RuntimeError, match=r"swap_blocks: block_mapping\[1\] = \(0, 4\): dst block 4 is out of range"):
        ops.swap_blocks(gpu, dst, 256, torch.tensor([[1, 1], [0, 4]]))
    torch.cuda.synchronize()
    assert bool((dst == 0).all()), "a rejected call copied something"
    assert torch.ones(4, device="cuda").sum().item() == 4  # no sticky error


@requires_cuda
def test_swap_blocks_gpu_cuda_graph() -> None:
    src = _pattern(8, 4096, "cuda")
    dst_d = torch.zeros(8, 4096, device="cuda")
    dst_h = torch.zeros(8, 4096).pin_memory()
    mapping = torch.tensor([[1, 0], [7, 3]])
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.swap_blocks(src, dst_d, 4096 * 4, mapping)
        ops.swap_blocks(src, dst_h, 4096 * 4, mapping)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        ops.swap_blocks(src, dst_d, 4096 * 4, mapping)
        ops.swap_blocks(src, dst_h, 4096 * 4, mapping)
    src.mul_(-1)
    graph.replay()
    torch.cuda.synchronize()
    for dst in (dst_d.cpu(), dst_h):
        assert torch.equal(dst[0], src[1].cpu()) and torch.equal(dst[3], src[7].cpu())


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs", *sys.argv[1:]]))

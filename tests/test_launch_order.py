"""Back-to-back GPU kernels see each other's writes.

stableops launches every kernel with programmatic dependent launch where the
GPU has it (csrc/gpu_compat.h: compute capability >= 9.0): a kernel may be
scheduled while the one before it on the stream is still running, and orders
itself after it with griddepcontrol.wait before touching memory. A kernel
that skipped that wait would read its input while the previous kernel still
writes it. These tests run a chain of dependent ops without any
synchronisation between them (eagerly and inside a CUDA graph) and require
bit-identical results to the same chain with a device synchronisation after
every op, where no two kernels can overlap.

The chain is built so that a missing wait shows: the norm writes its last
rows last and those rows hold the largest values, which the per-tensor FP8
quantiser's amax pass must see (it reads every row) and which its quantise
pass reads first (last rows first); its three kernels (zero the scale, amax,
quantise) also depend on each other through the scale.

Run: pytest tests/test_launch_order.py -rs
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import stableops  # noqa: F401  (loads the library)

HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU visible")

T, H, HEADS = 8192, 4096, 32
EPS = 1e-6


def make_inputs(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=gen)
    residual = torch.randn(T, H, device="cuda", dtype=torch.bfloat16, generator=gen)
    residual[-T // 8:] *= 64  # the largest values are in the rows written last
    weight = torch.rand(H, device="cuda", dtype=torch.bfloat16, generator=gen) + 0.5
    positions = torch.randint(0, 4096, (T,), device="cuda", generator=gen)
    theta = torch.rand(4096, H // HEADS // 2, device="cuda", generator=gen) * 6.28
    cos_sin = torch.cat([theta.cos(), theta.sin()], dim=-1).to(torch.bfloat16)
    return dict(x=x, residual=residual, weight=weight, positions=positions, cos_sin=cos_sin)


def run_chain(inp: dict[str, torch.Tensor], sync: bool) -> dict[str, torch.Tensor]:
    """Dependent ops; each reads what an earlier one wrote."""
    so = torch.ops.stableops
    x, residual = inp["x"], inp["residual"]
    act = torch.empty(T, H // 2, device="cuda", dtype=torch.bfloat16)
    normed = torch.empty_like(act)
    q_dyn = torch.empty(T, H // 2, device="cuda", dtype=torch.float8_e4m3fn)
    q_static = torch.empty_like(q_dyn)
    scale = torch.empty(1, device="cuda")

    def step(fn, *args):
        fn(*args)
        if sync:
            torch.cuda.synchronize()

    for _ in range(3):
        step(so.fused_add_rms_norm.default, x, residual, inp["weight"], EPS)
    # The residual's last rows are the largest, and the norm writes them last.
    step(so.silu_and_mul.default, act, residual)
    step(so.dynamic_scaled_fp8_quant.default, q_dyn, act, scale)
    step(so.static_scaled_fp8_quant.default, q_static, act, scale, None)
    step(so.rotary_embedding.default, inp["positions"], x, None, H // HEADS, inp["cos_sin"], True, 0, False)
    step(so.rms_norm.default, normed, act, inp["weight"][: H // 2], EPS)
    return dict(x=x, residual=residual, act=act, normed=normed, scale=scale, q_dyn=q_dyn, q_static=q_static)


def assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    for name, w in want.items():
        g = got[name]
        if not torch.equal(g.view(torch.uint8), w.view(torch.uint8)):
            diff = (g.view(torch.uint8) != w.view(torch.uint8)).sum().item()
            raise AssertionError(f"{name}: {diff} of {w.numel()} bytes differ from the synchronised chain")


@requires_cuda
def test_chain_without_synchronisation_matches_serial() -> None:
    want = run_chain(make_inputs(), sync=True)
    torch.cuda.synchronize()
    for _ in range(3):  # a race would not show every time
        got = run_chain(make_inputs(), sync=False)
        torch.cuda.synchronize()
        assert_same(got, want)


@requires_cuda
def test_chain_in_cuda_graph_matches_serial() -> None:
    want = run_chain(make_inputs(), sync=True)
    inp = make_inputs()
    fresh = {k: v.clone() for k, v in inp.items()}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off-capture
        run_chain({k: v.clone() for k, v in fresh.items()}, sync=False)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = run_chain(inp, sync=False)
    for _ in range(3):
        for k, v in fresh.items():
            inp[k].copy_(v)
        graph.replay()
        torch.cuda.synchronize()
        assert_same(got, want)


@requires_cuda
def test_plain_launches_give_the_same_chain() -> None:
    """STABLEOPS_DISABLE_PDL=1 (plain launches) computes the same bytes."""
    want = run_chain(make_inputs(), sync=True)
    code = textwrap.dedent(
        """
        import sys, torch
        sys.path.insert(0, sys.argv[1])
        import test_launch_order as t
        out = t.run_chain(t.make_inputs(), sync=False)
        torch.cuda.synchronize()
        torch.save({k: v.cpu() for k, v in out.items()}, sys.argv[2])
        """
    )
    path = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "stableops_plain_chain.pt")
    env = dict(os.environ, STABLEOPS_DISABLE_PDL="1")
    subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__)), path],
                   env=env, check=True, timeout=300)
    got = {k: v.cuda() for k, v in torch.load(path).items()}
    assert_same(got, want)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-rs"]))

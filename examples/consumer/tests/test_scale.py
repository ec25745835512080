"""The example op: registration, CPU correctness, errors, GPU where present."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import stableops_example

HAS_GPU = torch.cuda.is_available()


def test_registration_matches_build() -> None:
    names = {n for n in torch._C._dispatch_get_all_op_names() if n.startswith("stableops_example::")}
    assert names == {"stableops_example::scale_"}
    schema = str(torch.ops.stableops_example.scale_.default._schema)
    assert schema.startswith("stableops_example::scale_(Tensor(") and "alpha" in schema
    assert torch._C._dispatch_has_kernel_for_dispatch_key("stableops_example::scale_", "CPU")
    gpu_build = os.environ.get("STABLEOPS_EXPECT_BACKEND", "cpu") != "cpu"
    assert torch._C._dispatch_has_kernel_for_dispatch_key("stableops_example::scale_", "CUDA") == gpu_build


def test_scale_cpu_matches_torch() -> None:
    x = torch.randn(1000)
    expected = x * 2.5
    stableops_example.scale_(x, 2.5)
    torch.testing.assert_close(x, expected)


def test_wrong_dtype_raises() -> None:
    with pytest.raises(RuntimeError, match="float32"):
        stableops_example.scale_(torch.ones(3, dtype=torch.float64), 2.0)


@pytest.mark.skipif(not HAS_GPU, reason="no CUDA/ROCm GPU visible")
def test_scale_gpu_matches_torch() -> None:
    x = torch.randn(100_003, device="cuda")
    expected = x * -3.0
    stableops_example.scale_(x, -3.0)
    torch.testing.assert_close(x, expected)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

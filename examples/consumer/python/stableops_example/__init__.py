"""stableops_example: one op built with stableops' Bazel API."""

from __future__ import annotations

from pathlib import Path

import torch

# Not resolved: under Bazel the sources and the built library are links that
# sit side by side only in the runfiles tree.
torch.ops.load_library(str(Path(__file__).absolute().with_name("_C.abi3.so")))


@torch.library.register_fake("stableops_example::scale_")
def _scale_fake(x: torch.Tensor, alpha: float) -> None:
    return None


def scale_(x: torch.Tensor, alpha: float) -> None:
    """Multiplies the float32 tensor ``x`` by ``alpha`` in place."""
    torch.ops.stableops_example.scale_.default(x, alpha)

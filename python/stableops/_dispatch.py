"""Dispatcher queries shared by the package (and its tests)."""

from __future__ import annotations

import torch

__all__ = ["has_op"]


def has_op(namespace: str, name: str) -> bool:
    """Whether ``torch.ops.<namespace>.<name>`` is registered."""
    try:
        torch._C._dispatch_find_schema_or_throw(f"{namespace}::{name}", "")
    except RuntimeError:
        return False
    except AttributeError as e:  # a torch without this private helper
        raise RuntimeError(
            "stableops: expected torch._C._dispatch_find_schema_or_throw (torch >= 2.11) to look "
            f"ops up, found none in torch {torch.__version__}; please report this torch version"
        ) from e
    return True

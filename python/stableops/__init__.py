"""stableops: PyTorch custom operators built only against the stable ABI.

Importing the package loads the compiled operator library ``_C.abi3.so``
(which sits next to this file) exactly once, registers the fake (meta)
implementations used by ``torch.compile``, and exposes the typed wrappers as
``stableops.ops``, and functional forms that allocate their outputs at the
package level (``stableops.rms_norm(x, weight, eps)``, ...). The raw operators
live in ``torch.ops.stableops`` (and, in GPU builds,
``torch.ops.stableops_cuda_utils``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

try:
    from ._version import __version__
except ModuleNotFoundError as e:  # the source tree: _version.py is a build output
    raise ImportError(
        f"stableops: {Path(__file__).parent} is the source tree, which holds neither the "
        "generated _version.py nor the compiled library; build and install the wheel "
        "(./tools/bazel build //python:wheel, then pip install bazel-bin/python/stableops-*.whl)"
    ) from e

__all__ = ["LIBRARY_FILENAME", "__version__", "NAMESPACES", "library_path", "load_library", "ops"]

#: File name of the compiled library inside this package directory.
LIBRARY_FILENAME = "_C.abi3.so"

#: Operator namespaces owned by the library (the second only in GPU builds).
NAMESPACES = (
    "stableops",
    "stableops_cuda_utils",
    "stableops_cache_ops",  # KV-cache ops (vLLM's _C_cache_ops), every build
)

_lock = threading.Lock()
_loaded_path: str | None = None


def library_path() -> str:
    """Absolute path of the compiled library shipped in this package.

    Symbolic links are not resolved: under Bazel the package's sources and the
    built library are links, side by side only in the runfiles tree.
    """
    return str(Path(__file__).absolute().with_name(LIBRARY_FILENAME))


def load_library() -> str:
    """Load ``_C.abi3.so`` and register fake impls; idempotent and thread safe.

    Returns the path of the loaded library.
    """
    global _loaded_path
    with _lock:
        if _loaded_path is None:
            path = library_path()
            if not Path(path).is_file():
                raise ImportError(f"stableops: compiled library not found at {path}; build it first")
            torch.ops.load_library(path)
            from . import _fake

            _fake.register_fakes()
            _loaded_path = path
        return _loaded_path


load_library()

from . import ops  # noqa: E402  (needs the library loaded first)
from . import functional  # noqa: E402
from .functional import *  # noqa: E402,F403  (stableops.rms_norm(x, w, eps), ...)

__all__ += functional.__all__

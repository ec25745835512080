"""The loaded library registers exactly the operators of tests/op_manifest.json.

The expected build backend comes from STABLEOPS_EXPECT_BACKEND (cpu, cuda or
rocm; default cpu): GPU-only operators must be present in GPU builds and absent
from CPU builds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import stableops

MANIFEST_PATH = Path(__file__).with_name("op_manifest.json")
BACKENDS = ("cpu", "cuda", "rocm")


def _backend() -> str:
    backend = os.environ.get("STABLEOPS_EXPECT_BACKEND", "cpu").strip().lower() or "cpu"
    assert backend in BACKENDS, f"STABLEOPS_EXPECT_BACKEND={backend!r} not in {BACKENDS}"
    return backend


def _manifest() -> dict[str, Any]:
    with MANIFEST_PATH.open() as f:
        return json.load(f)


def _expected_ops() -> dict[str, dict[str, Any]]:
    backend = _backend()
    return {op["name"]: op for op in _manifest()["ops"] if backend in op["backends"]}


def _registered_ops() -> set[str]:
    namespaces = tuple(f"{ns}::" for ns in _manifest()["namespaces"])
    names = set()
    for name in torch._C._dispatch_get_all_op_names():
        if name.startswith(namespaces):
            names.add(name.split(".")[0])  # drop any overload name
    return names


def _packet(qualname: str) -> Any:
    ns, name = qualname.split("::")
    return getattr(getattr(torch.ops, ns), name)


def test_manifest_is_well_formed() -> None:
    manifest = _manifest()
    assert set(manifest["namespaces"]) == set(stableops.NAMESPACES)
    names = [op["name"] for op in manifest["ops"]]
    assert len(names) == len(set(names)), "duplicate op in manifest"
    for op in manifest["ops"]:
        ns, name = op["name"].split("::")
        assert ns in manifest["namespaces"], op["name"]
        assert op["schema"].startswith(name + "("), op["name"]
        assert set(op["backends"]) <= set(BACKENDS), op["name"]
        assert set(op["dispatch_keys"]) == set(op["backends"]), op["name"]
        torch._C.parse_schema(f"{ns}::{op['schema']}")  # must parse


def test_cuda_and_rocm_manifests_identical() -> None:
    """--config=cuda and --config=rocm promise exactly the same registrations.

    Every build checks the loaded library against its backend's entries in
    both directions (test_nothing_missing / test_nothing_extra /
    test_schema_and_kernels), so equal entries here mean the CUDA and the ROCm
    shared objects register the same ops, schemas and dispatch keys (the GPU
    kernels under CUDA on ROCm too, as PyTorch's ROCm builds expect).
    """
    def table(backend: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        return {
            op["name"]: (op["schema"], tuple(sorted(op["dispatch_keys"][backend])))
            for op in _manifest()["ops"]
            if backend in op["backends"]
        }

    cuda, rocm = table("cuda"), table("rocm")
    assert cuda, "no ops for cuda in the manifest"
    assert cuda == rocm, {k: (cuda.get(k), rocm.get(k)) for k in set(cuda) | set(rocm) if cuda.get(k) != rocm.get(k)}
    assert "CUDA" in rocm["stableops::merge_attn_states"][1]


def test_nothing_missing() -> None:
    missing = set(_expected_ops()) - _registered_ops()
    assert not missing, f"ops in manifest but not registered ({_backend()} build): {sorted(missing)}"


def test_nothing_extra() -> None:
    extra = _registered_ops() - set(_expected_ops())
    assert not extra, f"ops registered but not in manifest for {_backend()}: {sorted(extra)}"


@pytest.mark.parametrize("qualname", sorted(op["name"] for op in _manifest()["ops"]))
def test_schema_and_kernels(qualname: str) -> None:
    expected = _expected_ops()
    if qualname not in expected:
        pytest.skip(f"{qualname} is not part of a {_backend()} build")
    op = expected[qualname]
    ns = qualname.split("::")[0]
    overload = _packet(qualname).default
    want = torch._C.parse_schema(f"{ns}::{op['schema']}")
    assert str(overload._schema) == str(want)
    for key in op["dispatch_keys"][_backend()]:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key), (
            f"{qualname} has no kernel for dispatch key {key}"
        )


def test_no_kernels_for_other_backends_in_cpu_build() -> None:
    if _backend() != "cpu":
        pytest.skip("only meaningful for CPU builds")
    for qualname in _expected_ops():
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CUDA"), qualname


def test_python_wrappers_match_registered_ops() -> None:
    for qualname in _expected_ops():
        name = qualname.split("::")[1]
        assert hasattr(stableops.ops, name), f"stableops.ops lacks a wrapper for {qualname}"
        assert name in stableops.ops.__all__
    for qualname in {op["name"] for op in _manifest()["ops"]} - set(_expected_ops()):
        assert not hasattr(stableops.ops, qualname.split("::")[1]), qualname


def test_every_loaded_op_has_a_fake() -> None:
    from stableops import _fake

    registered = set(_fake.register_fakes())
    assert registered == set(_expected_ops())
    assert set(_fake.FAKE_IMPLS) == {op["name"] for op in _manifest()["ops"]}


def _run_merge() -> None:
    t, h, d = 3, 2, 16
    out = torch.full((t, h, d), float("nan"))
    lse = torch.full((h, t), float("nan"))
    p, s = torch.randn(t, h, d), torch.randn(t, h, d)
    pl, sl = torch.randn(h, t), torch.randn(h, t)
    stableops.ops.merge_attn_states(out, lse, p, pl, s, sl)
    assert not out.isnan().any() and not lse.isnan().any()


def test_loading_twice_is_harmless() -> None:
    before = _registered_ops()
    path = stableops.load_library()
    assert path == stableops.library_path()
    torch.ops.load_library(path)  # same file again, straight through torch
    assert stableops.load_library() == path  # and through the package loader
    import importlib

    importlib.reload(stableops)  # re-runs the package loader from scratch
    importlib.reload(stableops.ops)
    assert _registered_ops() == before
    _run_merge()


def test_runs_under_the_torch_bazel_asked_for() -> None:
    """stable_py_test runs each test under every image torch: check which."""
    expected = os.environ.get("STABLEOPS_EXPECT_TORCH")
    if not expected:
        pytest.skip("not run through stable_py_test (STABLEOPS_EXPECT_TORCH unset)")
    assert torch.__version__.split("+")[0] == expected


def test_source_tree_import_says_to_build(tmp_path: Path) -> None:
    """Importing a checkout's python/stableops (no generated _version.py, no
    library) fails with what to do, not with a missing private module."""
    src = tmp_path / "stableops"
    src.mkdir()
    for f in Path(stableops.__file__).parent.glob("*.py"):
        if f.name != "_version.py":
            shutil.copy(f, src / f.name)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-c", "import stableops"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert r.returncode != 0
    assert "is the source tree" in r.stderr and "//python:wheel" in r.stderr, r.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

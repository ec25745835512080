"""The ROCm shared object carries one AMDGPU code object per configured arch.

Extracts the .hip_fatbin section of _C.abi3.so (llvm-objcopy), splits it into
its clang offload bundles (one per .cu file with kernels), lists each bundle's
entries with clang-offload-bundler --list and asserts that every architecture
of --//bazel:rocm_archs (STABLEOPS_GPU_ARCHS, set by Bazel from the flag) is
present, and no other. The bundle headers are also parsed here, independently
of the tool, and every device entry must be an AMDGPU ELF code object.
Every kernel the host side can launch (a kernel handle: a data symbol of the
host code whose name demangles to a function) must have device code for every
architecture (its `.kd` descriptor in that architecture's code objects), and
no code object holds a kernel the host cannot launch: with no AMD GPU here,
this is what catches a kernel that the host pass instantiates and a device
pass does not (csrc/gpu_compat.h, STABLEOPS_DEVICE_PASS).

Environment (set by tests/BUILD.bazel): STABLEOPS_SO, STABLEOPS_GPU_ARCHS,
STABLEOPS_OFFLOAD_BUNDLER, STABLEOPS_LLVM_NM, STABLEOPS_LLVM_OBJCOPY.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
HOST = "host-x86_64-unknown-linux-gnu-"
DEVICE_PREFIX = "hipv4-amdgcn-amd-amdhsa--"
EM_AMDGPU = 224


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    assert value, f"{name} is not set (run through Bazel: //tests:test_rocm_code_objects)"
    return value


def _archs() -> list[str]:
    return [a.strip() for a in _env("STABLEOPS_GPU_ARCHS").split(",") if a.strip()]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("fatbin")
    fatbin = tmp / "hip_fatbin.bin"
    subprocess.run(
        [_env("STABLEOPS_LLVM_OBJCOPY"), f"--dump-section=.hip_fatbin={fatbin}", _env("STABLEOPS_SO"), str(tmp / "discard.so")],
        check=True,
    )
    data = fatbin.read_bytes()
    starts = []
    pos = data.find(MAGIC)
    while pos != -1:
        starts.append(pos)
        pos = data.find(MAGIC, pos + 1)
    assert starts, ".hip_fatbin holds no clang offload bundle"
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        path = tmp / f"bundle{i}.o"
        path.write_bytes(data[start:end])
        out.append(path)
    return out


def _list(bundle: Path) -> list[str]:
    res = subprocess.run(
        [_env("STABLEOPS_OFFLOAD_BUNDLER"), "--list", "--type=o", f"--input={bundle}"],
        check=True, capture_output=True, text=True,
    )
    return [line.strip() for line in res.stdout.splitlines() if line.strip()]


def _parse(bundle: Path) -> dict[str, bytes]:
    """Own reader of the bundle format: magic, u64 count, (u64 offset, u64 size, u64 len, triple)*."""
    data = bundle.read_bytes()
    assert data.startswith(MAGIC)
    (count,) = struct.unpack_from("<Q", data, len(MAGIC))
    pos = len(MAGIC) + 8
    entries = {}
    for _ in range(count):
        offset, size, tlen = struct.unpack_from("<QQQ", data, pos)
        pos += 24
        triple = data[pos : pos + tlen].decode()
        pos += tlen
        entries[triple] = data[offset : offset + size]
    return entries


def test_shared_object_has_hip_fatbin(bundles: list[Path]) -> None:
    print(f"{len(bundles)} offload bundle(s) in .hip_fatbin; configured archs: {_archs()}")
    assert bundles


def test_every_configured_arch_present(bundles: list[Path]) -> None:
    want = sorted(DEVICE_PREFIX + a for a in _archs())
    for bundle in bundles:
        listed = _list(bundle)
        print(bundle.name, listed)
        assert HOST in listed, listed
        assert sorted(t for t in listed if t != HOST) == want, (
            f"{bundle.name}: code objects {listed}, configured --//bazel:rocm_archs={_archs()}"
        )


def test_code_objects_are_amdgpu_elf(bundles: list[Path]) -> None:
    for bundle in bundles:
        entries = _parse(bundle)
        assert sorted(entries) == sorted(_list(bundle)), "own parser and clang-offload-bundler disagree"
        for triple, blob in entries.items():
            if triple == HOST:
                continue
            assert blob[:4] == b"\x7fELF", f"{triple}: not an ELF code object"
            (machine,) = struct.unpack_from("<H", blob, 18)
            assert machine == EM_AMDGPU, f"{triple}: e_machine {machine}, expected EM_AMDGPU ({EM_AMDGPU})"


# nm's letters for data symbols (a HIP kernel handle is one, named as its kernel).
DATA_TYPES = set("BbDdRrVv")
NOT_KERNELS = ("_ZT", "_ZGV", "_ZZ")


def _nm(path: Path, *flags: str) -> list[tuple[str, str]]:
    """(type letter, name) of every defined symbol, in symbol-table order."""
    res = subprocess.run(
        [_env("STABLEOPS_LLVM_NM"), "--defined-only", "--no-sort", *flags, str(path)],
        check=True, capture_output=True, text=True,
    )
    out = []
    for line in res.stdout.splitlines():
        parts = line.split(" ", 2)  # address, type, name (a demangled name has spaces)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def _host_kernel_handles() -> set[str]:
    so = Path(_env("STABLEOPS_SO"))
    raw = _nm(so)
    demangled = _nm(so, "--demangle")
    assert len(raw) == len(demangled), "llvm-nm listed the symbols twice differently"
    # Not kernels: vtables and typeinfo (_ZT), guard variables (_ZGV), function-
    # local statics (_ZZ, whose names also end in "...)::name"), and symbols
    # with a compiler suffix (".0").
    return {name for (kind, name), (_, pretty) in zip(raw, demangled)
            if kind in DATA_TYPES and name.startswith("_Z") and not name.startswith(NOT_KERNELS)
            and "." not in name and pretty.endswith(")")}


def test_every_host_kernel_has_device_code(bundles: list[Path], tmp_path: Path) -> None:
    host = _host_kernel_handles()
    assert host, "no kernel handle found in the host code of the shared object"
    device: dict[str, set[str]] = {a: set() for a in _archs()}
    for bundle in bundles:
        for triple, blob in _parse(bundle).items():
            if triple == HOST:
                continue
            elf = tmp_path / f"{bundle.stem}.{triple}.elf"
            elf.write_bytes(blob)
            arch = triple[len(DEVICE_PREFIX):]
            device[arch] |= {name[: -len(".kd")] for _, name in _nm(elf) if name.endswith(".kd")}
    print(f"{len(host)} kernels launchable from the host; device kernels per arch: "
          f"{ {a: len(k) for a, k in device.items()} }")
    for arch, kernels in device.items():
        missing = sorted(host - kernels)
        extra = sorted(kernels - host)
        assert not missing, f"{arch}: {len(missing)} kernel(s) with no device code, e.g. {missing[:3]}"
        assert not extra, f"{arch}: {len(extra)} device kernel(s) the host cannot launch, e.g. {extra[:3]}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

"""The CUDA shared object carries device code for every kernel it can launch.

The CUDA counterpart of test_rocm_code_objects.py, with no GPU and no CUDA
tool: the host ELF's `.nv_fatbin` section is parsed here. It holds one fatbin
container per .cu file with kernels; each entry of a container is a cubin (an
ELF for one sm_XX of --//bazel:cuda_archs) or PTX (for a compute_XX), the
payload zstd-compressed by nvcc 13 (or stored plain).

Asserted:
- the SASS architectures and the PTX versions are exactly those of
  --//bazel:cuda_archs (STABLEOPS_GPU_ARCHS, set by Bazel from the flag);
- every kernel the host side can launch (nvcc's host stubs in the host
  symbol table, see _stub_kernel) has an entry function (STO_CUDA_ENTRY) in
  the cubin of every architecture and a `.entry` in the PTX, and no cubin
  holds an entry the host cannot launch. A kernel that a device pass did not
  instantiate (csrc/gpu_compat.h, STABLEOPS_DEVICE_PASS) fails here instead
  of at launch on a GPU ("invalid device function"). The names nvcc
  registers with the runtime (__cudaRegisterFunction) come from the device
  passes, so they cannot show such a kernel; the stubs come from the host
  pass.

The ELF reading is done here rather than with the pinned pyelftools
(test_auditwheel's dependency): pyelftools decodes st_other into visibility
and PowerPC bits and drops bit 0x10, STO_CUDA_ENTRY, which is what marks a
cubin's kernels, so half of the reading would stay hand-written anyway.

Environment (set by tests/BUILD.bazel): STABLEOPS_SO, STABLEOPS_GPU_ARCHS.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from dataclasses import dataclass

import pytest

FATBIN_MAGIC = 0xBA55ED50
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
STO_CUDA_ENTRY = 0x10
KIND_PTX, KIND_ELF = 1, 2
STT_FUNC_LOCAL = 0x02  # st_info: STB_LOCAL << 4 | STT_FUNC


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    assert value, f"{name} is not set (run through Bazel: //tests:test_cuda_code_objects)"
    return value


def _section_headers(elf: bytes) -> list[tuple[str, int, int, int]]:
    """(name, offset, size, link) of each section of a little-endian ELF64."""
    assert elf[:4] == ELF_MAGIC and elf[4] == 2, "expected a 64-bit ELF"
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQII", elf, shoff + i * shentsize) for i in range(shnum)]
    names_off = headers[shstrndx][4]
    out = []
    for name, _typ, _flags, _addr, offset, size, link, _info in headers:
        end = elf.index(b"\0", names_off + name)
        out.append((elf[names_off + name : end].decode(), offset, size, link))
    return out


def _section(elf: bytes, name: str) -> tuple[int, int, int]:
    """(offset, size, link) of the section `name`."""
    found = [h[1:] for h in _section_headers(elf) if h[0] == name]
    assert len(found) == 1, f"expected one {name} section, found {len(found)}"
    return found[0]


def _decompress(payload: bytes, size: int, what: str) -> bytes:
    if payload.startswith(ZSTD_MAGIC):
        try:
            from compression import zstd  # Python >= 3.14: the build image's
        except ImportError:
            pytest.fail(
                f"{what} is zstd-compressed and this interpreter (Python {sys.version.split()[0]}) "
                "has no compression.zstd; run the tests with the build image's Python 3.14 "
                "(tools/bazel does)"
            )
        data = zstd.decompress(payload)
        assert len(data) == size, f"{what}: {len(data)} bytes decompressed, header says {size}"
        return data
    assert payload[:4] == ELF_MAGIC or payload[:1] in b".\x2f\n", (
        f"{what}: expected a zstd frame, an ELF or PTX text, found {payload[:8].hex()}"
    )
    return payload


@dataclass
class Entry:
    kind: int  # KIND_PTX or KIND_ELF
    arch: int  # e.g. 90
    data: bytes  # the cubin or PTX text, decompressed


def _fatbin_entries(so: bytes) -> list[Entry]:
    """Every entry of every fatbin container in the host ELF's .nv_fatbin.

    NVIDIA does not document the layout; what is read here, as nvcc 13.0
    writes it (and as cuobjdump 13.2 lists the same shared object: the
    same cubins and the same 309 entry functions): a container header
    (u32 magic 0xBA55ED50, u16 version, u16 header size, u64 body size),
    then entries, each a header (u16 kind, u16 version, u32 header size,
    u64 padded payload size, then u32 words: [4] payload size, [7] the
    arch number, [14] the uncompressed size) and its payload.
    """
    assert any(h[0] == ".nv_fatbin" for h in _section_headers(so)), (
        "the shared object has no .nv_fatbin section (not a CUDA build?)"
    )
    offset, size, _ = _section(so, ".nv_fatbin")
    fatbin = so[offset : offset + size]
    entries: list[Entry] = []
    pos = 0
    containers = 0
    while pos + 16 <= len(fatbin):
        magic, _version, header_size, body_size = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != FATBIN_MAGIC:
            assert not any(fatbin[pos : pos + 8]), f"unexpected bytes at .nv_fatbin + {pos}"
            pos += 8  # alignment padding between containers
            continue
        containers += 1
        e, end = pos + header_size, pos + header_size + body_size
        while e < end:
            kind, _ev, entry_header, padded = struct.unpack_from("<HHIQ", fatbin, e)
            words = struct.unpack_from(f"<{entry_header // 4}I", fatbin, e)
            payload_size, arch, uncompressed = words[4], words[7], words[14]
            payload = fatbin[e + entry_header : e + entry_header + payload_size]
            what = f"fatbin {containers} entry kind {kind} arch {arch}"
            assert kind in (KIND_PTX, KIND_ELF), f"{what}: unknown entry kind"
            size = uncompressed if payload.startswith(ZSTD_MAGIC) else payload_size
            entries.append(Entry(kind, arch, _decompress(payload, size, what)))
            e += entry_header + padded
        pos = end
    assert containers, ".nv_fatbin holds no fatbin container"
    return entries


def _cubin_entries(cubin: bytes) -> set[str]:
    assert struct.unpack_from("<H", cubin, 0x12)[0] == EM_CUDA, "cubin is not an EM_CUDA ELF"
    symoff, symsize, strndx = _section(cubin, ".symtab")
    stroff = _section_headers(cubin)[strndx][1]
    names = set()
    for off in range(symoff, symoff + symsize, 24):
        name, _info, other, _shndx, _value, _size = struct.unpack_from("<IBBHQQ", cubin, off)
        if other & STO_CUDA_ENTRY:
            start = stroff + name
            names.add(cubin[start : cubin.index(b"\0", start)].decode())
    return names


def _ptx_entries(ptx: bytes) -> set[str]:
    return {n.decode() for n in re.findall(rb"\.entry\s+([\w$]+)\s*\(", ptx)}


def _stub_kernel(name: str) -> str | None:
    """The kernel whose host-side stub `name` is, else None.

    nvcc 13 turns each `__global__` function into a host function that
    launches it (the handle passed to cudaLaunchKernel). Observed forms: a
    template kernel's is a local function with the kernel's mangled name
    plus an `L` (internal linkage) before its unqualified name
    (`_ZN9stableops9quant_gpuL11rows_kernelI...`; a static non-template
    function has the `L` too, so only templates count); a non-template
    kernel's
    calls a local `__device_stub_<kernel mangled name>` function
    (`_Z63__device_stub__ZN9stableops...`).
    """
    m = re.match(r"_Z(\d+)__device_stub_", name)
    if m:
        ident = name[2 + len(m.group(1)) :][: int(m.group(1))]
        return ident[len("__device_stub_") :]
    if not name.startswith("_ZN"):
        return None
    i = 3
    while i < len(name):
        local = name[i] == "L"
        m = re.match(r"\d+", name[i + local :])
        if not m:
            return None
        end = i + local + len(m.group()) + int(m.group())
        if local:
            # A template (its arguments follow): static non-template helpers
            # (e.g. torch's throw_exception) have the `L` too.
            return name[:i] + name[i + 1 :] if name[end : end + 1] == "I" else None
        i = end
    return None


def _host_kernels(so: bytes) -> set[str]:
    """Kernels the host code can launch: its stubs (see _stub_kernel)."""
    symoff, symsize, strndx = _section(so, ".symtab")
    stroff = _section_headers(so)[strndx][1]
    kernels = set()
    for off in range(symoff, symoff + symsize, 24):
        name, info, _other, _shndx, _value, _size = struct.unpack_from("<IBBHQQ", so, off)
        if info != STT_FUNC_LOCAL:
            continue
        start = stroff + name
        kernel = _stub_kernel(so[start : so.index(b"\0", start)].decode())
        if kernel:
            kernels.add(kernel)
    return kernels


def _configured() -> tuple[set[int], set[int]]:
    sass, ptx = set(), set()
    for arch in (a.strip() for a in _env("STABLEOPS_GPU_ARCHS").split(",") if a.strip()):
        m = re.fullmatch(r"(sm|compute)_(\d+)[af]?", arch)
        assert m, f"unexpected CUDA arch '{arch}' in STABLEOPS_GPU_ARCHS"
        (sass if m.group(1) == "sm" else ptx).add(int(m.group(2)))
    return sass, ptx


@pytest.fixture(scope="module")
def so() -> bytes:
    with open(_env("STABLEOPS_SO"), "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def entries(so: bytes) -> list[Entry]:
    return _fatbin_entries(so)


def test_every_configured_arch_present(entries: list[Entry]) -> None:
    sass, ptx = _configured()
    found_sass = {e.arch for e in entries if e.kind == KIND_ELF}
    found_ptx = {e.arch for e in entries if e.kind == KIND_PTX}
    print(f"{len(entries)} fatbin entries; SASS {sorted(found_sass)}, PTX {sorted(found_ptx)}")
    assert found_sass == sass, f"cubins for sm {sorted(found_sass)}, configured {sorted(sass)}"
    assert found_ptx == ptx, f"PTX for compute {sorted(found_ptx)}, configured {sorted(ptx)}"


def test_every_host_kernel_has_device_code(so: bytes, entries: list[Entry]) -> None:
    host = _host_kernels(so)
    assert host, "no kernel stubs found in the host symbol table (stripped?)"
    sass, ptx = _configured()
    per_arch: dict[tuple[int, int], set[str]] = {(KIND_ELF, a): set() for a in sass}
    per_arch.update({(KIND_PTX, a): set() for a in ptx})
    for e in entries:
        names = _cubin_entries(e.data) if e.kind == KIND_ELF else _ptx_entries(e.data)
        per_arch[(e.kind, e.arch)] |= names
    print(f"{len(host)} kernels launchable from the host; device entries per arch: "
          + ", ".join(f"{'sm' if k == KIND_ELF else 'compute'}_{a}: {len(v)}"
                      for (k, a), v in sorted(per_arch.items())))
    for (kind, arch), device in sorted(per_arch.items()):
        label = f"{'sm' if kind == KIND_ELF else 'compute'}_{arch}"
        missing = sorted(host - device)
        extra = sorted(device - host)
        assert not missing, f"{len(missing)} kernel(s) with no device code for {label}: {missing[:5]}"
        assert not extra, f"{len(extra)} device kernel(s) for {label} the host cannot launch: {extra[:5]}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))

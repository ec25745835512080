"""ABI audit of the built stableops library (see bazel/private/abi_audit.py).

The audited file is the package's ``_C.abi3.so`` as found by stableops'
loader, or $STABLEOPS_SO. Bounds default to GLIBC 2.17 / GLIBCXX 3.4.24 and
can be overridden with $STABLEOPS_MAX_GLIBC / $STABLEOPS_MAX_GLIBCXX; extra
allowed NEEDED regexes (comma separated) come from $STABLEOPS_ALLOW_NEEDED.
A build on a new host without the project's sysroot fails the GLIBC bound:
that is expected.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import abi_audit  # //bazel/private:abi_audit

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) not installed")


def _so_path() -> str:
    env = os.environ.get("STABLEOPS_SO")
    if env:
        return env
    import stableops

    return stableops.load_library()


def _extra_needed() -> list[str]:
    return [p for p in os.environ.get("STABLEOPS_ALLOW_NEEDED", "").split(",") if p]


def _is_rocm() -> bool:
    """ROCm builds link libamdhip64 dynamically (the audit allows it there)."""
    return os.environ.get("STABLEOPS_EXPECT_BACKEND") == "rocm"


@pytest.fixture(scope="module")
def report() -> abi_audit.AuditReport:
    r = abi_audit.audit(
        _so_path(),
        max_glibc=os.environ.get("STABLEOPS_MAX_GLIBC", abi_audit.DEFAULT_MAX_GLIBC),
        max_glibcxx=os.environ.get("STABLEOPS_MAX_GLIBCXX", abi_audit.DEFAULT_MAX_GLIBCXX),
        extra_needed=_extra_needed(),
        allow_hip_runtime=_is_rocm(),
    )
    print(r.format())
    return r


def _errors(report: abi_audit.AuditReport, *needles: str) -> list[str]:
    return [e for e in report.errors if any(n in e for n in needles)]


def test_needed_libraries(report: abi_audit.AuditReport) -> None:
    assert "libtorch_cpu.so" in report.needed
    assert not _errors(report, "NEEDED", "libtorch_cpu.so is not NEEDED")


def test_undefined_symbols_only_stable_shim_and_system(report: abi_audit.AuditReport) -> None:
    assert not _errors(report, "undefined")
    shim = [s for s in report.undefined if s.version is None and s.name.startswith(abi_audit.SHIM_PREFIXES)]
    assert shim, "expected stable shim symbols (aoti_torch_*/torch_*) to be referenced"


def test_glibc_bound(report: abi_audit.AuditReport) -> None:
    print("highest GLIBC:", report.max_versions.get("GLIBC"))
    assert not _errors(report, "GLIBC version"), report.format()


def test_glibcxx_bound(report: abi_audit.AuditReport) -> None:
    print("highest GLIBCXX:", report.max_versions.get("GLIBCXX"))
    assert not _errors(report, "GLIBCXX version"), report.format()


def test_no_textrel(report: abi_audit.AuditReport) -> None:
    assert not report.textrel


# --- the audit logic itself, on canned readelf output ---------------------------

_DYNSYMS = """
Symbol table '.dynsym' contains 9 entries:
   Num:    Value          Size Type    Bind   Vis      Ndx Name
     0: 0000000000000000     0 NOTYPE  LOCAL  DEFAULT  UND
     1: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND memcpy@GLIBC_2.14 (3)
     2: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND aoti_torch_get_sizes
     3: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND _ZN3c105ErrorC1Ev
     4: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND some_random_symbol
     5: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND __libc_single_threaded@GLIBC_2.32 (4)
     6: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND _ZSt28__throw_bad_array_new_lengthv@GLIBCXX_3.4.29 (5)
     7: 0000000000000000     0 NOTYPE  WEAK   DEFAULT  UND __gmon_start__
     8: 0000000000001000    10 FUNC    GLOBAL DEFAULT   12 my_exported@@VERS_1
     9: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND foo@LIBFOO_1.0 (6)
"""
_DYNAMIC = """
 0x0000000000000001 (NEEDED)             Shared library: [libtorch_cpu.so]
 0x0000000000000001 (NEEDED)             Shared library: [libc10.so]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000001d (RUNPATH)            Library runpath: [$ORIGIN:/x]
"""
_VERSIONS = """
Version needs section '.gnu.version_r' contains 2 entries:
 Addr: 0x0000000000001ae8  Offset: 0x00001ae8  Link: 4 (.dynstr)
  000000: Version: 1  File: libc.so.6  Cnt: 2
  0x0010:   Name: GLIBC_2.14  Flags: none  Version: 3
  0x0020:   Name: GLIBC_2.32  Flags: none  Version: 4
  0x0030: Version: 1  File: libstdc++.so.6  Cnt: 1
  0x0040:   Name: GLIBCXX_3.4.29  Flags: none  Version: 5
"""


def test_audit_logic_flags_every_violation() -> None:
    r = abi_audit.check("fake.so", _DYNSYMS, _DYNAMIC, _VERSIONS)
    text = "\n".join(r.errors)
    assert "NEEDED library not allowed: libc10.so" in text
    assert "_ZN3c105ErrorC1Ev" in text
    assert "some_random_symbol" in text
    assert "foo@LIBFOO_1.0" in text
    assert "highest GLIBC version 2.32 exceeds 2.17" in text
    assert "__libc_single_threaded@GLIBC_2.32" in text
    assert "highest GLIBCXX version 3.4.29 exceeds 3.4.24" in text
    assert "memcpy" not in text and "aoti_torch_get_sizes" not in text
    assert "__gmon_start__" not in text and "my_exported" not in text
    assert r.runpath == ["$ORIGIN", "/x"]
    assert r.version_needs == {"libc.so.6": ["GLIBC_2.14", "GLIBC_2.32"], "libstdc++.so.6": ["GLIBCXX_3.4.29"]}
    assert not r.ok


def test_audit_logic_accepts_clean_library() -> None:
    dynsyms = "\n".join(
        line for line in _DYNSYMS.splitlines()
        if not any(bad in line for bad in ("c105Error", "random", "single_threaded", "bad_array", "LIBFOO"))
    )
    dynamic = _DYNAMIC.replace("libc10.so", "libm.so.6")
    versions = _VERSIONS.replace("GLIBC_2.32", "GLIBC_2.2.5").replace("GLIBCXX_3.4.29", "GLIBCXX_3.4.21")
    r = abi_audit.check("fake.so", dynsyms, dynamic, versions)
    assert r.ok, r.errors
    assert r.max_versions == {"GLIBC": "2.14", "GLIBCXX": "3.4.21"}
    r2 = abi_audit.check("fake.so", _DYNSYMS, _DYNAMIC, _VERSIONS, max_glibc=None, max_glibcxx=None,
                         extra_needed=[r"libc10\.so"], extra_unversioned=["some_random_symbol"])
    assert [e for e in r2.errors if "GLIBC" in e or "NEEDED" in e or "random" in e] == []


def test_hip_runtime_needs_explicit_allowance() -> None:
    dynsyms = _DYNSYMS.replace(
        "     9: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND foo@LIBFOO_1.0 (6)",
        "     9: 0000000000000000     0 FUNC    GLOBAL DEFAULT  UND hipGetLastError@hip_4.2 (6)",
    )
    dynamic = " 0x0000000000000001 (NEEDED)             Shared library: [libtorch_cpu.so]\n" \
        " 0x0000000000000001 (NEEDED)             Shared library: [libamdhip64.so.6]\n"
    strict = abi_audit.check("x.so", dynsyms, dynamic, "", max_glibc=None, max_glibcxx=None)
    assert any("libamdhip64.so.6" in e for e in strict.errors), strict.errors
    assert any("hipGetLastError@hip_4.2" in e for e in strict.errors), strict.errors
    rocm = abi_audit.check("x.so", dynsyms, dynamic, "", max_glibc=None, max_glibcxx=None, allow_hip_runtime=True)
    assert not [e for e in rocm.errors if "hip" in e], rocm.errors
    # Still only the HIP runtime: other libraries stay forbidden.
    assert any("c10" in e for e in rocm.errors), rocm.errors


# --- shim versions against the torch builds' own symbol tables -----------------


def _shim_specs() -> list[str]:
    """VERSION=PATH for every symbol list of @stableops_torch//:shim_symbols."""
    paths = os.environ.get("STABLEOPS_SHIM_SYMBOLS", "").split()
    assert paths, "STABLEOPS_SHIM_SYMBOLS is not set (run through Bazel: //tests:test_abi_audit)"
    return [f"{Path(p).parent.name}={p}" for p in paths]


def _target() -> str:
    return os.environ.get("STABLEOPS_TORCH_TARGET", "2.11")


def test_shim_reference_choice() -> None:
    known = ["2.13.0", "2.11.0"]
    assert abi_audit.shim_reference("2.11", known) == "2.11.0"
    assert abi_audit.shim_reference("2.12", known) == "2.11.0"  # newest below the target
    assert abi_audit.shim_reference("2.13", known) == "2.13.0"
    assert abi_audit.shim_reference("2.10", known) is None


def test_shim_versions_logic() -> None:
    tables = {
        "2.11.0": {"libtorch_cpu": frozenset({"aoti_torch_a"}), "libtorch_cuda": frozenset({"aoti_torch_s"})},
        "2.13.0": {"libtorch_cpu": frozenset({"aoti_torch_a", "aoti_torch_b"}), "libtorch_cuda": frozenset({"aoti_torch_s"})},
    }
    ref, errors = abi_audit.check_shim_versions(["aoti_torch_a"], ["aoti_torch_s"], tables, "2.11")
    assert errors == [] and ref and "2.11.0" in ref
    _, errors = abi_audit.check_shim_versions(["aoti_torch_a", "aoti_torch_b", "aoti_torch_z"], [], tables, "2.11")
    assert len(errors) == 2, errors
    assert "aoti_torch_b" in errors[0] and "first appears in torch 2.13.0" in errors[0]
    assert "aoti_torch_z" in errors[1] and "no known torch build exports it" in errors[1]
    _, errors = abi_audit.check_shim_versions([], ["aoti_torch_t"], tables, "2.11")
    assert len(errors) == 1 and "looked up at run time aoti_torch_t" in errors[0] and "libtorch_cuda.so" in errors[0]
    _, errors = abi_audit.check_shim_versions(["aoti_torch_b"], [], tables, "2.13")
    assert errors == []


def test_rodata_shim_names() -> None:
    text = """
String dump of section '.rodata':
  [     0]  libtorch_cuda.so
  [    11]  aoti_torch_get_current_cuda_stream
  [    34]  stableops: aoti_torch_get_current_cuda_stream failed
"""
    assert abi_audit.parse_rodata_shim_names(text) == ["aoti_torch_get_current_cuda_stream"]


def test_library_uses_only_shim_symbols_of_the_target() -> None:
    """The real shared object against the real torch builds' symbol tables."""
    r = abi_audit.audit(
        _so_path(),
        max_glibc=None,
        max_glibcxx=None,
        allow_hip_runtime=_is_rocm(),
        target_torch=_target(),
        shim_tables=abi_audit.load_shim_tables(_shim_specs()),
    )
    print(r.format())
    assert r.ok, r.format()
    assert r.shim_reference and f"(target {_target()})" in r.shim_reference
    if os.environ.get("STABLEOPS_EXPECT_BACKEND", "cpu") != "cpu":
        assert r.runtime_lookups == ["aoti_torch_get_current_cuda_stream"], r.runtime_lookups


def test_shim_symbol_newer_than_target_fails(tmp_path: Path) -> None:
    """A library using a 2.13-only shim symbol fails at a 2.11 target, naming it and 2.13."""
    import subprocess

    probe = os.environ.get("STABLEOPS_SHIM_PROBE")
    assert probe, "STABLEOPS_SHIM_PROBE is not set (run through Bazel: //tests:test_abi_audit)"
    args = [sys.executable, str(Path(abi_audit.__file__)), f"--so={probe}", "--max_glibc=", "--max_glibcxx="]
    args += ["--target_torch=2.11"] + [f"--shim_symbols={s}" for s in _shim_specs()]
    out = subprocess.run(args, capture_output=True, text=True)
    print(out.stdout, out.stderr)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "aoti_torch_dtype_float8_e8m0fnu" in out.stdout
    assert "first appears in torch 2.13" in out.stdout
    # At a 2.13 target the same library passes the shim check.
    args[-len(_shim_specs()) - 1] = "--target_torch=2.13"
    out = subprocess.run(args, capture_output=True, text=True)
    assert "aoti_torch_dtype_float8_e8m0fnu" not in out.stdout, out.stdout


def test_cli_exit_code(tmp_path: Path) -> None:
    import subprocess

    script = Path(abi_audit.__file__)
    ok = subprocess.run(
        [sys.executable, str(script), f"--so={_so_path()}", "--max_glibc=", "--max_glibcxx="]
        + (["--allow_hip_runtime"] if _is_rocm() else []),
        capture_output=True, text=True,
    )
    assert "ABI audit of" in ok.stdout, ok.stderr
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert bad.returncode != 0


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

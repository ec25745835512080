"""PyPA's `auditwheel show` on the built wheel: its manylinux tag is honest.

auditwheel derives a platform tag from two things:

* the symbol versions the wheel's shared objects need from the libraries every
  manylinux system provides (glibc, libstdc++, libgcc_s): `sym_tag`;
* external libraries outside that whitelist, which `auditwheel repair` would
  copy into the wheel.

Our one external library is libtorch_cpu.so, which torch provides at run time
(a stable-ABI extension must not vendor it), so `overall_tag` is
`linux_x86_64` and auditwheel says the only library to eliminate for every
manylinux policy is libtorch_cpu.so. The test asserts exactly that, and that
the symbol-version tag is no newer than the manylinux tag in the wheel's file
name (manylinux_2_28_x86_64).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: Libraries auditwheel may find outside its whitelist: provided by torch.
TORCH_PROVIDED = {"libtorch_cpu.so"}

_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_x86_64")

# A ROCm build links the HIP runtime (libamdhip64.so.6) dynamically, as ROCm
# builds of torch do; at run time it comes from the user's ROCm. auditwheel
# resolves it from the build image (Debian sid, glibc 2.38) and folds that
# library's own dependencies and symbol versions into the report, so its
# verdict describes the image's ROCm, not our shared object. There, the
# symbol-version bounds of our .so are checked by //tests:abi_audit instead.
_ROCM_REASON = ("ROCm build: auditwheel follows libamdhip64.so.6 into the build image's ROCm "
                "(glibc 2.38); our .so's own bounds are checked by //tests:abi_audit")
rocm_build = pytest.mark.skipif(os.environ.get("STABLEOPS_EXPECT_BACKEND") == "rocm", reason=_ROCM_REASON)


def _wheel() -> Path:
    rel = os.environ.get("STABLEOPS_WHEEL")
    if not rel:
        pytest.fail("STABLEOPS_WHEEL is not set: run this test through Bazel (//tests:test_auditwheel)")
    return Path(rel).resolve()


def _glibc(tag: str) -> tuple[int, int]:
    m = _MANYLINUX.fullmatch(tag)
    assert m, f"expected a manylinux_X_Y_x86_64 tag, got {tag!r}"
    return int(m.group(1)), int(m.group(2))


def _show(*args: str) -> subprocess.CompletedProcess[str]:
    # Never search the host's or torch's libraries: libtorch_cpu.so must show
    # up as external (not found), not as something to graft.
    env = dict(os.environ, AUDITWHEEL_LD_LIBRARY_PATH="")
    return subprocess.run([sys.executable, "-m", "auditwheel", "show", *args, str(_wheel())],
                          capture_output=True, text=True, env=env, check=False)


def test_auditwheel_show_text() -> None:
    proc = _show()
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r'This constrains the platform tag to\s+"(manylinux_\d+_\d+_x86_64)"', proc.stdout)
    assert m, proc.stdout


@rocm_build
def test_symbol_versions_allow_the_wheel_tag() -> None:
    proc = _show("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    print(json.dumps({k: v for k, v in report.items() if k != "policy_upgrades"}, indent=2))

    wheel_platform = _wheel().name.removesuffix(".whl").split("-")[-1]
    assert wheel_platform == "manylinux_2_28_x86_64", wheel_platform
    sym_tag = report["sym_tag"]
    assert _glibc(sym_tag) <= _glibc(wheel_platform), (
        f"auditwheel derives {sym_tag} from the symbol versions, newer than the wheel's {wheel_platform}: "
        f"{report['versioned_symbols']}")
    assert not report["unsupported_isa"]
    assert not report["pure"]


@rocm_build
def test_only_torch_libraries_are_external() -> None:
    report = json.loads(_show("--json").stdout)
    assert set(report["external_libs"]) == TORCH_PROVIDED, report["external_libs"]
    # linux_x86_64 only because of libtorch_cpu.so: for the wheel's policy the
    # one library auditwheel would have to remove is torch's.
    upgrade = report["policy_upgrades"].get("manylinux_2_28_x86_64")
    assert upgrade is not None, sorted(report["policy_upgrades"])
    assert set(upgrade["libs_to_eliminate"]) == TORCH_PROVIDED, upgrade


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs", "-s"]))

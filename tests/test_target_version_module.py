"""A module built at torch target 2.12 derives everything from it.

Copies examples/consumer into a temporary directory, raises its torch target
with `torch.configure(target_version = "2.12")` in its MODULE.bazel, and runs
a nested Bazel (the same Bazel, the same stableops checkout, `--config=cpu`,
its own output root and caches) to build its wheel and run its tests. Then:

* the wheel requires `torch>=2.12`;
* the target-version guard test compiled its probe at 2.12 (must fail) and
  2.13 (must compile), and passed;
* the ABI audit checked the shim symbols against torch 2.11's tables, the
  newest build not newer than 2.12;
* tests ran under the torch 2.13 runtime only: the torch 2.11 variants are
  SKIPPED (incompatible through //bazel:torch_runtime_older_than_target).

Needs the source tree (examples/consumer is not a Bazel package of this
module) and runs Bazel: tagged `local` and `no-remote` in tests/BUILD.bazel.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TARGET = "2.12"


def _source_root() -> Path:
    anchor = os.environ.get("STABLEOPS_SOURCE_ANCHOR")
    assert anchor, "STABLEOPS_SOURCE_ANCHOR is not set (run through Bazel: //tests:test_target_version_module)"
    root = Path(anchor).resolve().parent
    assert (root / "MODULE.bazel").is_file() and (root / "examples/consumer").is_dir(), root
    return root


@pytest.fixture(scope="module")
def nested(tmp_path_factory: pytest.TempPathFactory):
    bazel = shutil.which("bazel")
    if bazel is None:
        pytest.skip("no `bazel` on PATH to run the nested build with")
    root = _source_root()
    work = tmp_path_factory.mktemp("target_2_12")
    module = work / "consumer"
    shutil.copytree(root / "examples/consumer", module, ignore=shutil.ignore_patterns("bazel-*"))
    text = (module / "MODULE.bazel").read_text()
    text = re.sub(r'path = "\.\./\.\."', f'path = "{root}"', text)
    assert str(root) in text, "examples/consumer/MODULE.bazel no longer has local_path_override(path = \"../..\")"
    text += (
        "\n# Added by //tests:test_target_version_module.\n"
        'torch = use_extension("@stableops//toolchains/torch:extension.bzl", "torch")\n'
        f'torch.configure(target_version = "{TARGET}")\n'
    )
    (module / "MODULE.bazel").write_text(text)
    (module / ".bazelrc").write_text(f"import {root}/bazel/stableops.bazelrc\n")

    cache = Path(os.environ.get("STABLEOPS_NESTED_CACHE", "/var/tmp/stableops-nested-bazel"))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        # pip (which fetches the pinned PyPI tools) keeps its cache there.
        "HOME": os.environ.get("STABLEOPS_NESTED_HOME", "/root"),
        "LANG": "C.UTF-8",
    }
    startup = [bazel, f"--output_user_root={work / 'root'}", "--max_idle_secs=60"]
    flags = ["--config=cpu", f"--disk_cache={cache / 'disk'}", f"--repository_cache={cache / 'repos'}",
             "--color=no", "--curses=no"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*startup, *args], cwd=module, env=env, capture_output=True, text=True, timeout=1500)
        print(f"$ bazel {' '.join(args)}\n{proc.stderr[-6000:]}\n{proc.stdout[-4000:]}")
        return proc

    try:
        build = run("build", "//python:wheel", *flags)
        assert build.returncode == 0, build.stderr[-3000:]
        test = run("test", "//tests:all", *flags, "--test_summary=short", "--test_output=all")
        assert test.returncode == 0, test.stderr[-3000:] + test.stdout[-3000:]
        wheels = list((module / "bazel-bin/python").glob("stableops_example-*.whl"))
        yield {"build": build, "test": test, "wheels": wheels, "module": module}
    finally:
        subprocess.run([*startup, "shutdown"], cwd=module, env=env, capture_output=True, timeout=120)


def test_wheel_requires_the_target(nested) -> None:
    assert len(nested["wheels"]) == 1, nested["wheels"]
    with zipfile.ZipFile(nested["wheels"][0]) as whl:
        meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line for line in whl.read(meta).decode().splitlines() if line.startswith("Requires-Dist:")]
    assert requires == [f"Requires-Dist: torch>={TARGET}"], requires


def test_guard_checks_the_target(nested) -> None:
    out = nested["test"].stdout
    assert re.search(r"//tests:target_version_guard\s+(?:\(cached\)\s+)?PASSED", out), out[-3000:]
    assert f"=== compile at torch {TARGET} (must fail) ===" in out
    assert "=== compile at torch 2.13 (must succeed) ===" in out


def test_audit_uses_the_newest_build_at_or_below_the_target(nested) -> None:
    out = nested["test"].stdout
    assert re.search(r"//python:abi_audit\s+(?:\(cached\)\s+)?PASSED", out), out[-3000:]
    assert f"shim symbols checked against torch 2.11.0's libtorch_cpu.so / libtorch_cuda.so (target {TARGET})" in out


def test_tests_run_only_under_runtimes_not_older_than_the_target(nested) -> None:
    out = nested["test"].stdout + nested["test"].stderr
    assert re.search(r"//tests:test_scale_torch2_13\s+(?:\(cached\)\s+)?PASSED", out), out[-3000:]
    assert re.search(r"//tests:test_scale_torch2_11\s+SKIPPED", out), out[-3000:]
    assert "torch 2.11.0 is older than the target version 2.12" in nested["build"].stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs", "-s"]))

"""The built wheel pip-installs into a fresh venv, and the CPU test files pass there.

Bazel runs this once per torch runtime of the image (2.11 and 2.13), so these
are the compatibility cells "wheel installed with pip --no-deps into a fresh
venv, CPU test files run there" of docs/COMPATIBILITY.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

_CHECK = """
import importlib.metadata, pathlib, sys, torch, stableops
assert stableops.__version__ == importlib.metadata.version("stableops"), (stableops.__version__, importlib.metadata.version("stableops"))
assert pathlib.Path(stableops.__file__).resolve().is_relative_to(pathlib.Path(sys.prefix).resolve()), stableops.__file__
T, H, D = 3, 2, 8
p, s = torch.randn(T, H, D), torch.randn(T, H, D)
pl, sl = torch.zeros(H, T), torch.zeros(H, T)
out = torch.empty(T, H, D)
stableops.ops.merge_attn_states(out, None, p, pl, s, sl)
torch.testing.assert_close(out, (p + s) / 2)
print("ok", stableops.__file__)
"""


def _wheel() -> Path:
    rel = os.environ.get("STABLEOPS_WHEEL")
    if not rel:
        pytest.fail("STABLEOPS_WHEEL is not set: run this test through Bazel (//tests:test_wheel_install)")
    path = Path(rel).resolve()
    assert path.name.startswith("stableops-") and path.name.endswith("-cp310-abi3-manylinux_2_28_x86_64.whl"), path.name
    return path


def _files() -> list[Path]:
    """//tests:wheel_test_files: the test files run against the installed wheel
    (GPU tests in them skip without a GPU, saying why) and what they read."""
    listed = os.environ.get("STABLEOPS_WHEEL_TEST_FILES", "").split()
    if not listed:
        pytest.fail("STABLEOPS_WHEEL_TEST_FILES is not set: run this test through Bazel (//tests:test_wheel_install)")
    return [Path(p) for p in listed]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; torch comes from this interpreter."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # torch itself comes from this test's interpreter (no network needed);
    # stableops comes only from the wheel.
    purelib = subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    Path(purelib, "_torch_from_runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", str(_wheel())],
        check=True,
    )
    return python


def _clean_env() -> dict[str, str]:
    # No PYTHONPATH: the runfiles copy of stableops must not be importable.
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_wheel_imports_from_fresh_venv(installed: Path, tmp_path: Path) -> None:
    result = subprocess.run([installed, "-c", _CHECK], check=True, capture_output=True, text=True, cwd=tmp_path,
                            env=_clean_env())
    assert result.stdout.startswith("ok"), result.stdout + result.stderr
    assert str(installed.parent.parent) in result.stdout


def test_cpu_test_files_pass_against_installed_wheel(installed: Path, tmp_path: Path) -> None:
    files = _files()
    for path in files:
        shutil.copyfile(path, tmp_path / path.name)
    tests = sorted(p.name for p in files if p.name.startswith("test_"))
    assert tests, files
    env = _clean_env()
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    result = subprocess.run(
        [installed, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    print(f"against the installed wheel ({installed}): {summary}")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary, summary


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs", "-s"]))

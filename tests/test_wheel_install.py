"""The built wheel pip-installs into a fresh venv and its ops work there."""

from __future__ import annotations

import os
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


def test_wheel_installs_into_fresh_venv(tmp_path: Path) -> None:
    wheel = _wheel()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # torch itself comes from this test's interpreter (no network needed);
    # stableops comes only from the wheel.
    purelib = subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    Path(purelib, "_torch_from_runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)],
        check=True,
    )
    result = subprocess.run([python, "-c", _CHECK], check=True, capture_output=True, text=True, cwd=tmp_path,
                            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert result.stdout.startswith("ok"), result.stdout + result.stderr
    assert str(env_dir) in result.stdout


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

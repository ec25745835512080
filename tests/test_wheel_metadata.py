"""The built wheel's contents and metadata: one version source, RECORD, tags.

The expected version and torch floor come from the build (module_version() of
MODULE.bazel and TORCH_TARGET_VERSION of toolchains/torch/version.bzl, passed
by tests/BUILD.bazel), not from a copy here.
"""

from __future__ import annotations

import base64
import email.parser
import hashlib
import os
import re
import sys
import zipfile
from pathlib import Path

import pytest

_TAGS = "cp310-abi3-manylinux_2_28_x86_64"
#: Local versions by GPU backend: none for CUDA (the default), +rocm, +cpu.
_LOCAL = {"": "cuda", "rocm": "rocm", "cpu": "cpu"}


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run this test through Bazel (//tests:test_wheel_metadata)")
    return value


@pytest.fixture(scope="module")
def wheel() -> zipfile.ZipFile:
    with zipfile.ZipFile(Path(_env("STABLEOPS_WHEEL")).resolve()) as zf:
        yield zf


def _version(wheel: zipfile.ZipFile) -> str:
    name = Path(wheel.filename).name
    m = re.fullmatch(r"stableops-(?P<version>[^-]+)-(?P<tags>.+)\.whl", name)
    assert m, name
    assert m.group("tags") == _TAGS, name
    return m.group("version")


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    return email.parser.Parser().parsestr(wheel.read(f"stableops-{_version(wheel)}.dist-info/METADATA").decode())


def test_version_comes_from_module_version(wheel: zipfile.ZipFile) -> None:
    version = _version(wheel)
    public, _, local = version.partition("+")
    assert public == _env("STABLEOPS_MODULE_VERSION"), version
    assert local in _LOCAL, version
    assert _LOCAL[local] == _env("STABLEOPS_EXPECT_BACKEND"), (version, _env("STABLEOPS_EXPECT_BACKEND"))
    assert _metadata(wheel)["Version"] == version
    assert f'__version__ = "{version}"' in wheel.read("stableops/_version.py").decode()


def test_metadata_fields(wheel: zipfile.ZipFile) -> None:
    meta = _metadata(wheel)
    assert meta["Name"] == "stableops"
    assert meta["Requires-Python"] == ">=3.10"
    assert meta.get_all("Requires-Dist") == [f"torch>={_env('STABLEOPS_TORCH_TARGET')}"]
    info = f"stableops-{_version(wheel)}.dist-info"
    wheel_file = email.parser.Parser().parsestr(wheel.read(f"{info}/WHEEL").decode())
    assert wheel_file.get_all("Tag") == [_TAGS]
    assert wheel_file["Root-Is-Purelib"] == "false"


def test_contents(wheel: zipfile.ZipFile) -> None:
    info = f"stableops-{_version(wheel)}.dist-info"
    names = set(wheel.namelist())
    for required in ("stableops/__init__.py", "stableops/_C.abi3.so", "stableops/py.typed",
                     "stableops/_version.py", f"{info}/LICENSE", f"{info}/METADATA", f"{info}/WHEEL",
                     f"{info}/RECORD"):
        assert required in names, (required, sorted(names))
    assert all(n.startswith(("stableops/", info + "/")) for n in names), sorted(names)
    assert wheel.getinfo("stableops/_C.abi3.so").external_attr >> 16 & 0o777 == 0o755


def test_record_lists_every_file_with_its_hash(wheel: zipfile.ZipFile) -> None:
    info = f"stableops-{_version(wheel)}.dist-info"
    rows = [line.split(",") for line in wheel.read(f"{info}/RECORD").decode().splitlines() if line]
    listed = {path: (digest, size) for path, digest, size in rows}
    assert set(listed) == set(wheel.namelist()), set(listed) ^ set(wheel.namelist())
    assert listed.pop(f"{info}/RECORD") == ("", "")
    for path, (digest, size) in listed.items():
        data = wheel.read(path)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert (digest, size) == (want, str(len(data))), path


def test_fixed_timestamps(wheel: zipfile.ZipFile) -> None:
    # SOURCE_DATE_EPOCH of the stable_wheel rule: same inputs, same bytes.
    stamps = {info.date_time for info in wheel.infolist()}
    assert stamps == {(1980, 1, 1, 0, 0, 0)}, stamps


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v", "-rs"]))

"""Stages files and dist-info for one wheel, then packs it with `wheel pack`.

Run by the stable_wheel rule; PyPA's `wheel` package does the packing and
writes RECORD. Timestamps come from SOURCE_DATE_EPOCH, file modes are fixed,
so the same inputs give the same bytes.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from absl import app, flags
from wheel.cli.pack import pack

_OUTPUT = flags.DEFINE_string("output", None, "Wheel file to write.", required=True)
_DIST = flags.DEFINE_string("distribution", None, "Distribution name.", required=True)
_VERSION = flags.DEFINE_string("version", None, "Distribution version.", required=True)
_TAG = flags.DEFINE_string("tag", None, "python-abi-platform tag.", required=True)
_SUMMARY = flags.DEFINE_string("summary", "", "One-line summary.")
_REQUIRES_PYTHON = flags.DEFINE_string("requires_python", ">=3.10", "Requires-Python.")
_REQUIRES_DIST = flags.DEFINE_multi_string("requires_dist", [], "Requires-Dist entries.")
_LICENSE = flags.DEFINE_string("license", None, "License file.")
_README = flags.DEFINE_string("readme", None, "README (long description, Markdown).")
_FILES = flags.DEFINE_multi_string("file", [], "DEST=SRC: a file of the wheel.")


def _copy(src: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    dest.chmod(0o755 if dest.suffix == ".so" else 0o644)


def _metadata() -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {_DIST.value}",
        f"Version: {_VERSION.value}",
        f"Summary: {_SUMMARY.value}",
        f"Requires-Python: {_REQUIRES_PYTHON.value}",
    ]
    lines += [f"Requires-Dist: {req}" for req in _REQUIRES_DIST.value]
    body = ""
    if _README.value:
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + Path(_README.value).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def main(argv: list[str]) -> int:
    del argv
    python_tag, abi_tag, platform_tag = _TAG.value.split("-")
    dist = _DIST.value.replace("-", "_")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / f"{dist}-{_VERSION.value}"
        for spec in sorted(_FILES.value):
            dest, _, src = spec.partition("=")
            _copy(src, root / dest)
        info = root / f"{dist}-{_VERSION.value}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(_metadata(), encoding="utf-8")
        (info / "WHEEL").write_text(
            "Wheel-Version: 1.0\n"
            "Generator: stableops build_wheel (wheel pack)\n"
            "Root-Is-Purelib: false\n"
            f"Tag: {python_tag}-{abi_tag}-{platform_tag}\n",
            encoding="utf-8",
        )
        if _LICENSE.value:
            _copy(_LICENSE.value, info / Path(_LICENSE.value).name)
        for path in sorted(root.rglob("*")):
            os.utime(path, (0, 0))
        out_dir = Path(tmp) / "out"
        out_dir.mkdir()
        logging.getLogger("wheel").setLevel(logging.WARNING)
        with contextlib.redirect_stdout(io.StringIO()):
            pack(str(root), str(out_dir), None)
        built = list(out_dir.iterdir())
        expected = Path(_OUTPUT.value).name
        if [p.name for p in built] != [expected]:
            print(f"build_wheel: expected wheel pack to write {expected}, found {[p.name for p in built]}", file=sys.stderr)
            return 1
        shutil.copyfile(built[0], _OUTPUT.value)
    return 0


if __name__ == "__main__":
    app.run(main)

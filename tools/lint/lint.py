"""Runs buildifier and shellcheck over the checkout.

    lint.py --buildifier=PATH --shellcheck=PATH --root=DIR [--fix]

Checks (default) or fixes (--fix: buildifier rewrites files in place; shellcheck
only reports) every Starlark file of the checkout (BUILD.bazel, *.bzl,
MODULE.bazel, the *.BUILD.tpl repository templates, examples/consumer's too)
with `buildifier --lint=warn`, and every shell script (tools/**/*.sh,
tools/bazel, benchmarks/*.sh, .ci/run) with shellcheck. Exits non-zero on any
finding. //tests:lint runs it on the source tree; `bazel run //:buildifier`
runs it with --fix on the workspace.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from absl import app, flags

_BUILDIFIER = flags.DEFINE_string("buildifier", None, "buildifier binary.", required=True)
_SHELLCHECK = flags.DEFINE_string("shellcheck", None, "shellcheck binary (empty: skip shell scripts).")
_ROOT = flags.DEFINE_string(
    "root", None, "Checkout to lint, or a file at its top (its real location counts; default: $BUILD_WORKSPACE_DIRECTORY)."
)
_FIX = flags.DEFINE_bool("fix", False, "Let buildifier rewrite files in place.")

_SKIP_DIRS = {".git", "__pycache__", "node_modules"}


def _files(root: Path) -> tuple[list[Path], list[Path]]:
    starlark: list[Path] = []
    shell: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("bazel-"))
        here = Path(dirpath)
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if name in ("BUILD.bazel", "MODULE.bazel") or name.endswith((".bzl", ".BUILD.tpl")):
                starlark.append(path)
            elif rel.startswith(("tools/", "benchmarks/")) and name.endswith(".sh"):
                shell.append(path)
            elif rel in ("tools/bazel", ".ci/run"):
                shell.append(path)
    return starlark, shell


def _run(cmd: list[str], cwd: Path) -> int:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    out = (proc.stdout + proc.stderr).strip()
    if out:
        print(out)
    return proc.returncode


def main(argv: list[str]) -> int:
    del argv
    root = Path(_ROOT.value or os.environ.get("BUILD_WORKSPACE_DIRECTORY", "")).resolve()
    if root.is_file():
        root = root.parent
    if not (root / "MODULE.bazel").is_file():
        print(f"lint: expected a checkout with MODULE.bazel at --root, found {root}", file=sys.stderr)
        return 2
    starlark, shell = _files(root)
    rel = [str(p.relative_to(root)) for p in starlark]
    templates = [r for r in rel if r.endswith(".BUILD.tpl")]
    others = [r for r in rel if not r.endswith(".BUILD.tpl")]
    mode = ["--mode=fix", "--lint=fix"] if _FIX.value else ["--mode=check", "--lint=warn"]
    buildifier = str(Path(_BUILDIFIER.value).resolve())
    status = 0
    status |= _run([buildifier, *mode, *others], root)
    # Repository templates are BUILD files with {placeholders} in strings.
    status |= _run([buildifier, *mode, "--type=build", *templates], root) if templates else 0
    print(f"buildifier: {len(starlark)} Starlark files {'fixed' if _FIX.value else 'checked'}")
    if _SHELLCHECK.value:
        shellcheck = str(Path(_SHELLCHECK.value).resolve())
        status |= _run([shellcheck, "--external-sources", *[str(p.relative_to(root)) for p in shell]], root)
        print(f"shellcheck: {len(shell)} shell scripts checked")
    if status:
        print("lint: findings above; `./tools/bazel run //:buildifier` fixes formatting and the fixable warnings")
    return 1 if status else 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))

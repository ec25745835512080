#!/usr/bin/env bash
# tools/compat_host_python.sh: one cell of docs/COMPATIBILITY.md, outside the
# build image: the built wheel in a fresh venv of a host interpreter with a
# pip-installed torch, running the CPU test files.
#
#   tools/compat_host_python.sh [WHEEL]
#
# WHEEL defaults to the CUDA wheel in bazel-bin/python (build it first with
# ./tools/bazel build //python:wheel). Environment:
#   PYTHON         host interpreter (default: python3)
#   TORCH_VERSION  torch to pip-install (default: 2.13.0; pip's own
#                  configuration decides where it comes from)
#   KEEP_VENV=1    keep the venv and test directory (printed) afterwards
#
# The test files are copied to a scratch directory and run from there, so
# `import stableops` resolves to the installed wheel, never to the source tree.
# STABLEOPS_EXPECT_BACKEND=cuda: the wheel is the CUDA build; with no GPU the
# GPU tests skip and the registration test still checks every CUDA op.
set -euo pipefail

workspace=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
python=${PYTHON:-python3}
torch_version=${TORCH_VERSION:-2.13.0}
if [[ $# -ge 1 ]]; then
  wheel=$(readlink -f "$1")
else
  wheels=()
  for w in "$workspace"/bazel-bin/python/stableops-*-cp310-abi3-*.whl; do
    [[ -f $w && $(basename "$w") != *+* ]] && wheels+=("$w")  # +rocm / +cpu: other backends
  done
  [[ ${#wheels[@]} -eq 1 ]] || { echo "compat_host_python: expected one CUDA wheel in bazel-bin/python, found: ${wheels[*]:-none}; build //python:wheel or pass WHEEL" >&2; exit 2; }
  wheel=$(readlink -f "${wheels[0]}")
fi

scratch=$(mktemp -d /tmp/stableops-compat.XXXXXX)
[[ -n ${KEEP_VENV:-} ]] || trap 'rm -rf "$scratch"' EXIT
echo "compat_host_python: $("$python" --version) ($(command -v "$python")), torch==$torch_version, wheel $(basename "$wheel")"
echo "compat_host_python: sha256 $(sha256sum "$wheel" | cut -d' ' -f1)"

"$python" -m venv "$scratch/venv"
py="$scratch/venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check "torch==$torch_version" pytest absl-py numpy
"$py" -m pip install --quiet --disable-pip-version-check --no-deps "$wheel"

mkdir "$scratch/tests"
files=(test_registration.py test_merge_attn_states_cpu.py test_bad_inputs.py test_cuda_ops.py)
for f in "${files[@]}" op_manifest.json merge_reference.py; do cp "$workspace/tests/$f" "$scratch/tests/"; done
cd "$scratch/tests"
env -u PYTHONPATH "$py" - <<'PY'
import pathlib, sys, torch, stableops
where = pathlib.Path(stableops.__file__).resolve()
assert where.is_relative_to(pathlib.Path(sys.prefix).resolve()), f"stableops imported from {where}, not the venv"
print(f"compat_host_python: torch {torch.__version__} (CUDA available: {torch.cuda.is_available()}), "
      f"stableops {stableops.__version__} from {where.parent}")
PY
export STABLEOPS_EXPECT_BACKEND=cuda STABLEOPS_EXPECT_TORCH=$torch_version
export TORCHINDUCTOR_CACHE_DIR="$scratch/inductor"
env -u PYTHONPATH "$py" -m pytest -q -rs -p no:cacheprovider "${files[@]}"

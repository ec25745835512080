#!/usr/bin/env bash
# Validates a built wheel on a GPU machine that has torch but no Bazel:
#
#   bash tools/gpu_validate.sh WHEEL OUTDIR [tests] [bench:NAME[:FLAGS]]...
#
# Installs the wheel with pip --no-deps, then, in order, what the arguments
# ask for (default: tests and every benchmark):
#   tests        every test file of //tests:wheel_test_files with pytest (the
#                installed package is imported, not the source tree)
#   bench:NAME   benchmarks/NAME.py --json=OUTDIR/bench_NAME.json [FLAGS,
#                comma-separated]
# Logs and JSON go to OUTDIR. Exits non-zero if the tests failed.
# GPU_VALIDATE_TEST_TIMEOUT / GPU_VALIDATE_BENCH_TIMEOUT (seconds, default
# 1800 / 900) bound each step.
set -uo pipefail
wheel=${1:?usage: tools/gpu_validate.sh WHEEL OUTDIR [tests] [bench:NAME[:FLAGS]]...}
out=${2:?usage: tools/gpu_validate.sh WHEEL OUTDIR [tests] [bench:NAME[:FLAGS]]...}
shift 2
[[ -f $wheel ]] || {
  echo "gpu_validate: expected a wheel file, found no file at '$wheel' (on a device machine, pass the wheel's directory in the run's carry list: git-ignored paths are not copied otherwise)" >&2
  exit 2
}
steps=("$@")
if ((${#steps[@]} == 0)); then
  steps=(tests)
  for b in benchmarks/*.py; do
    name=$(basename "$b" .py)
    [[ $name == bench_util ]] || steps+=("bench:$name")
  done
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1 STABLEOPS_EXPECT_BACKEND=cuda TORCHINDUCTOR_CACHE_DIR=/tmp/stableops-inductor
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/env.txt"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())' | tee -a "$out/env.txt"
python3 -m pip install --no-deps --no-index --force-reinstall "$wheel" 2>&1 | tail -1
(cd /tmp && python3 -c 'import stableops; print("testing", stableops.__file__, stableops.__version__)') | tee -a "$out/env.txt"

status=0
for step in "${steps[@]}"; do
  case $step in
    tests)
      # The files //tests:wheel_test_files lists (tests/BUILD.bazel).
      mapfile -t files < <(python3 - <<'PY'
import re
text = open("tests/BUILD.bazel").read()
block = re.search(r'name = "wheel_test_files",\s*srcs = \[(.*?)\]', text, re.S).group(1)
print("\n".join("tests/" + f for f in re.findall(r'"(test_[^"]+\.py)"', block)))
PY
)
      echo "pytest: ${files[*]}"
      (cd tests && timeout "${GPU_VALIDATE_TEST_TIMEOUT:-1800}" python3 -m pytest -q -rs -p no:cacheprovider \
        --durations=15 "${files[@]#tests/}") 2>&1 |
        tee "$out/pytest.log" | tail -40
      ((PIPESTATUS[0] == 0)) || status=1
      ;;
    bench:*)
      spec=${step#bench:}
      name=${spec%%:*}
      flags=()
      [[ $spec == *:* ]] && IFS=, read -r -a flags <<<"${spec#*:}"
      echo "=== benchmark $name ${flags[*]}"
      (cd benchmarks && timeout "${GPU_VALIDATE_BENCH_TIMEOUT:-900}" python3 "$name.py" --json="$out/bench_$name.json" "${flags[@]}") 2>&1 |
        tee "$out/bench_$name.log" | tail -60
      ;;
    *)
      echo "gpu_validate: unknown step '$step'" >&2
      status=2
      ;;
  esac
done
exit $status

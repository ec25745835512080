#!/bin/bash
# Validates a built wheel on a GPU machine that has torch but no Bazel:
#   bash tools/gpu_validate.sh path/to/stableops-*.whl [OUTDIR]
# Installs the wheel with pip --no-deps, runs the GPU and CPU test files with
# pytest (the installed package, not the source tree, is imported), then the
# benchmarks. Logs go to OUTDIR (default: ./gpu-validation).
set -u
wheel=${1:?usage: tools/gpu_validate.sh WHEEL [OUTDIR]}
out=${2:-gpu-validation}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 STABLEOPS_EXPECT_BACKEND=cuda TORCHINDUCTOR_CACHE_DIR=/tmp/stableops-inductor
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/env.txt"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())' | tee -a "$out/env.txt"
python3 -m pip install --no-deps --no-index --force-reinstall "$wheel" 2>&1 | tail -1
(cd /tmp && python3 -c 'import stableops; print("testing", stableops.__file__)')
python3 -m pytest -q -rs -p no:cacheprovider tests/test_cuda_ops.py tests/test_registration.py \
  tests/test_merge_attn_states_cpu.py tests/test_bad_inputs.py 2>&1 | tee "$out/pytest.log" | tail -25
timeout 300 python3 benchmarks/merge_attn_states.py --json="$out/bench_merge.json" 2>&1 | tee "$out/bench_merge.log" | tail -45
timeout 120 python3 benchmarks/uva.py --json="$out/uva.json" 2>&1 | tee "$out/bench_uva.log" | tail -12

// The one registration file of stableops: every schema (m.def) and every
// kernel (m.impl) of the library is registered here, through the stable ABI
// (STABLE_TORCH_LIBRARY_* / TORCH_BOX, PyTorch >= 2.10 at
// TORCH_TARGET_VERSION 2.11).
//
// Namespaces:
//   stableops             - operators (CPU kernels always; CUDA kernels and
//                           GPU-only ops when STABLEOPS_WITH_GPU is defined).
//   stableops_cuda_utils  - GPU device queries (GPU builds only).
//
// tests/op_manifest.json lists the same schemas and dispatch keys; keep both
// in sync (tests/test_registration.py checks the loaded library against it).
#include <torch/csrc/stable/library.h>

#include "csrc/ops.h"

STABLE_TORCH_LIBRARY_FRAGMENT(stableops, m) {
  m.def(
      "merge_attn_states(Tensor! output, Tensor!? output_lse, "
      "Tensor prefix_output, Tensor prefix_lse, "
      "Tensor suffix_output, Tensor suffix_lse) -> ()");
#ifdef STABLEOPS_WITH_GPU
  m.def("get_cuda_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor");
#endif
  // Quantization (csrc/quantization/).
  m.def(
      "static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale, "
      "int[]? group_shape=None) -> ()");
  m.def(
      "dynamic_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale) "
      "-> ()");
  m.def(
      "dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, "
      "Tensor! scale, Tensor? scale_ub) -> ()");
  m.def(
      "static_scaled_int8_quant(Tensor! result, Tensor input, Tensor scale, "
      "Tensor? azp) -> ()");
  m.def(
      "dynamic_scaled_int8_quant(Tensor! result, Tensor input, Tensor! scale, "
      "Tensor!? azp) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(stableops, CPU, m) {
  m.impl("merge_attn_states", TORCH_BOX(&stableops::merge_attn_states_cpu));
#ifdef STABLEOPS_WITH_GPU
  // Takes a (pinned) CPU tensor and returns a CUDA view of it, so the CPU key.
  m.impl(
      "get_cuda_view_from_cpu_tensor",
      TORCH_BOX(&stableops::get_cuda_view_from_cpu_tensor));
#endif
  m.impl(
      "static_scaled_fp8_quant",
      TORCH_BOX(&stableops::static_scaled_fp8_quant_cpu));
  m.impl(
      "dynamic_scaled_fp8_quant",
      TORCH_BOX(&stableops::dynamic_scaled_fp8_quant_cpu));
  m.impl(
      "dynamic_per_token_scaled_fp8_quant",
      TORCH_BOX(&stableops::dynamic_per_token_scaled_fp8_quant_cpu));
  m.impl(
      "static_scaled_int8_quant",
      TORCH_BOX(&stableops::static_scaled_int8_quant_cpu));
  m.impl(
      "dynamic_scaled_int8_quant",
      TORCH_BOX(&stableops::dynamic_scaled_int8_quant_cpu));
}

#ifdef STABLEOPS_WITH_GPU
// ROCm builds register under CUDA too (HIP tensors use the CUDA dispatch key).
STABLE_TORCH_LIBRARY_IMPL(stableops, CUDA, m) {
  m.impl("merge_attn_states", TORCH_BOX(&stableops::merge_attn_states_cuda));
  m.impl(
      "static_scaled_fp8_quant",
      TORCH_BOX(&stableops::static_scaled_fp8_quant_cuda));
  m.impl(
      "dynamic_scaled_fp8_quant",
      TORCH_BOX(&stableops::dynamic_scaled_fp8_quant_cuda));
  m.impl(
      "dynamic_per_token_scaled_fp8_quant",
      TORCH_BOX(&stableops::dynamic_per_token_scaled_fp8_quant_cuda));
  m.impl(
      "static_scaled_int8_quant",
      TORCH_BOX(&stableops::static_scaled_int8_quant_cuda));
  m.impl(
      "dynamic_scaled_int8_quant",
      TORCH_BOX(&stableops::dynamic_scaled_int8_quant_cuda));
}

STABLE_TORCH_LIBRARY_FRAGMENT(stableops_cuda_utils, m) {
  m.def("get_device_attribute(int attribute, int device_id) -> int");
  m.def(
      "get_max_shared_memory_per_block_device_attribute(int device_id) -> int");
}

// No tensor arguments: CompositeExplicitAutograd makes them callable anywhere.
STABLE_TORCH_LIBRARY_IMPL(stableops_cuda_utils, CompositeExplicitAutograd, m) {
  m.impl(
      "get_device_attribute", TORCH_BOX(&stableops::get_device_attribute));
  m.impl(
      "get_max_shared_memory_per_block_device_attribute",
      TORCH_BOX(&stableops::get_max_shared_memory_per_block_device_attribute));
}
#endif // STABLEOPS_WITH_GPU

// The one registration file of stableops: every schema (m.def) and every
// kernel (m.impl) of the library is registered here, through the stable ABI
// (STABLE_TORCH_LIBRARY_* / TORCH_BOX, PyTorch >= 2.10 at
// TORCH_TARGET_VERSION 2.11).
//
// Namespaces:
//   stableops             - operators (CPU kernels always; CUDA kernels and
//                           GPU-only ops when STABLEOPS_WITH_GPU is defined).
//   stableops_cuda_utils  - GPU device queries (GPU builds only).
//   stableops_cache_ops   - KV-cache ops (vLLM's _C_cache_ops), every build.
//
// tests/op_manifest.json lists the same schemas and dispatch keys; keep both
// in sync (tests/test_registration.py checks the loaded library against it).
#include <torch/csrc/stable/library.h>

#include "csrc/ops.h"

STABLE_TORCH_LIBRARY_FRAGMENT(stableops, m) {
  m.def(
      "merge_attn_states(Tensor! output, Tensor!? output_lse, "
      "Tensor prefix_output, Tensor prefix_lse, "
      "Tensor suffix_output, Tensor suffix_lse, "
      "int? prefill_tokens_with_context=None, Tensor? output_scale=None) -> ()");
#ifdef STABLEOPS_WITH_GPU
  m.def("get_cuda_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor");
#endif
  // RMSNorm family (csrc/norm/).
  m.def(
      "rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon) "
      "-> ()");
  m.def(
      "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, "
      "float epsilon) -> ()");
  m.def("rms_norm_weightless(Tensor! result, Tensor input, float epsilon) -> ()");
  m.def(
      "fused_add_rms_norm_weightless(Tensor! input, Tensor! residual, "
      "float epsilon) -> ()");
  // Activations (csrc/activation/).
  m.def("silu_and_mul(Tensor! result, Tensor input) -> ()");
  m.def("mul_and_silu(Tensor! out, Tensor input) -> ()");
  m.def("silu_and_mul_with_clamp(Tensor! result, Tensor input, float limit) -> ()");
  m.def("gelu_and_mul(Tensor! out, Tensor input) -> ()");
  m.def("gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()");
  m.def("fatrelu_and_mul(Tensor! out, Tensor input, float threshold) -> ()");
  m.def("swigluoai_and_mul(Tensor! out, Tensor input, float alpha=1.702, float limit=7.0) -> ()");
  m.def("gelu_new(Tensor! out, Tensor input) -> ()");
  m.def("gelu_fast(Tensor! out, Tensor input) -> ()");
  m.def("gelu_quick(Tensor! out, Tensor input) -> ()");
  m.def(
      "rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, "
      "int head_size, Tensor cos_sin_cache, bool is_neox, "
      "int rope_dim_offset=0, bool inverse=False) -> ()");
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
  // RMSNorm family (csrc/norm/).
  m.impl("rms_norm", TORCH_BOX(&stableops::rms_norm_cpu));
  m.impl("fused_add_rms_norm", TORCH_BOX(&stableops::fused_add_rms_norm_cpu));
  m.impl("rms_norm_weightless", TORCH_BOX(&stableops::rms_norm_weightless_cpu));
  m.impl(
      "fused_add_rms_norm_weightless",
      TORCH_BOX(&stableops::fused_add_rms_norm_weightless_cpu));
  // Activations.
  m.impl("silu_and_mul", TORCH_BOX(&stableops::silu_and_mul_cpu));
  m.impl("mul_and_silu", TORCH_BOX(&stableops::mul_and_silu_cpu));
  m.impl("silu_and_mul_with_clamp", TORCH_BOX(&stableops::silu_and_mul_with_clamp_cpu));
  m.impl("gelu_and_mul", TORCH_BOX(&stableops::gelu_and_mul_cpu));
  m.impl("gelu_tanh_and_mul", TORCH_BOX(&stableops::gelu_tanh_and_mul_cpu));
  m.impl("fatrelu_and_mul", TORCH_BOX(&stableops::fatrelu_and_mul_cpu));
  m.impl("swigluoai_and_mul", TORCH_BOX(&stableops::swigluoai_and_mul_cpu));
  m.impl("gelu_new", TORCH_BOX(&stableops::gelu_new_cpu));
  m.impl("gelu_fast", TORCH_BOX(&stableops::gelu_fast_cpu));
  m.impl("gelu_quick", TORCH_BOX(&stableops::gelu_quick_cpu));
  m.impl("rotary_embedding", TORCH_BOX(&stableops::rotary_embedding_cpu));
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
  // Also under CUDA, only to reject a GPU tensor with the kernel's own
  // message ("expected a CPU tensor, got a tensor on cuda:0") instead of the
  // dispatcher's "could not run ... with arguments from the 'CUDA' backend".
  m.impl(
      "get_cuda_view_from_cpu_tensor",
      TORCH_BOX(&stableops::get_cuda_view_from_cpu_tensor));
  // RMSNorm family (csrc/norm/).
  m.impl("rms_norm", TORCH_BOX(&stableops::rms_norm_cuda));
  m.impl("fused_add_rms_norm", TORCH_BOX(&stableops::fused_add_rms_norm_cuda));
  m.impl("rms_norm_weightless", TORCH_BOX(&stableops::rms_norm_weightless_cuda));
  m.impl(
      "fused_add_rms_norm_weightless",
      TORCH_BOX(&stableops::fused_add_rms_norm_weightless_cuda));
  // Activations.
  m.impl("silu_and_mul", TORCH_BOX(&stableops::silu_and_mul_cuda));
  m.impl("mul_and_silu", TORCH_BOX(&stableops::mul_and_silu_cuda));
  m.impl("silu_and_mul_with_clamp", TORCH_BOX(&stableops::silu_and_mul_with_clamp_cuda));
  m.impl("gelu_and_mul", TORCH_BOX(&stableops::gelu_and_mul_cuda));
  m.impl("gelu_tanh_and_mul", TORCH_BOX(&stableops::gelu_tanh_and_mul_cuda));
  m.impl("fatrelu_and_mul", TORCH_BOX(&stableops::fatrelu_and_mul_cuda));
  m.impl("swigluoai_and_mul", TORCH_BOX(&stableops::swigluoai_and_mul_cuda));
  m.impl("gelu_new", TORCH_BOX(&stableops::gelu_new_cuda));
  m.impl("gelu_fast", TORCH_BOX(&stableops::gelu_fast_cuda));
  m.impl("gelu_quick", TORCH_BOX(&stableops::gelu_quick_cuda));
  m.impl("rotary_embedding", TORCH_BOX(&stableops::rotary_embedding_cuda));
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

// ---------------------------------------------------------------------------
// stableops_cache_ops: the KV-cache ops (vLLM's _C_cache_ops), csrc/cache/.
// swap_blocks has a CPU kernel (CPU -> CPU) and a CUDA kernel: vLLM
// registers only CUDA, but the dispatcher picks CUDA whenever src or dst is
// a CUDA tensor (block_mapping lives on the CPU), so the CPU kernel only
// adds the all-CPU case (and gives the fake its validation, as for every
// op).
// ---------------------------------------------------------------------------
STABLE_TORCH_LIBRARY_FRAGMENT(stableops_cache_ops, m) {
  m.def(
      "reshape_and_cache_flash(Tensor key, Tensor value, Tensor! key_cache, "
      "Tensor! value_cache, Tensor slot_mapping, str kv_cache_dtype, "
      "Tensor k_scale, Tensor v_scale) -> ()");
  m.def(
      "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor! kv_cache, "
      "Tensor slot_mapping, str kv_cache_dtype, Tensor scale) -> ()");
  m.def(
      "swap_blocks(Tensor src, Tensor! dst, int block_size_in_bytes, "
      "Tensor block_mapping) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(stableops_cache_ops, CPU, m) {
  m.impl(
      "reshape_and_cache_flash",
      TORCH_BOX(&stableops::reshape_and_cache_flash_cpu));
  m.impl(
      "concat_and_cache_mla", TORCH_BOX(&stableops::concat_and_cache_mla_cpu));
  m.impl("swap_blocks", TORCH_BOX(&stableops::swap_blocks_cpu));
}

#ifdef STABLEOPS_WITH_GPU
STABLE_TORCH_LIBRARY_IMPL(stableops_cache_ops, CUDA, m) {
  m.impl(
      "reshape_and_cache_flash",
      TORCH_BOX(&stableops::reshape_and_cache_flash_cuda));
  m.impl(
      "concat_and_cache_mla", TORCH_BOX(&stableops::concat_and_cache_mla_cuda));
  m.impl("swap_blocks", TORCH_BOX(&stableops::swap_blocks_cuda));
}
#endif // STABLEOPS_WITH_GPU

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
}

STABLE_TORCH_LIBRARY_IMPL(stableops, CPU, m) {
  m.impl("merge_attn_states", TORCH_BOX(&stableops::merge_attn_states_cpu));
#ifdef STABLEOPS_WITH_GPU
  // Takes a (pinned) CPU tensor and returns a CUDA view of it, so the CPU key.
  m.impl(
      "get_cuda_view_from_cpu_tensor",
      TORCH_BOX(&stableops::get_cuda_view_from_cpu_tensor));
#endif
}

#ifdef STABLEOPS_WITH_GPU
// ROCm builds register under CUDA too (HIP tensors use the CUDA dispatch key).
STABLE_TORCH_LIBRARY_IMPL(stableops, CUDA, m) {
  m.impl("merge_attn_states", TORCH_BOX(&stableops::merge_attn_states_cuda));
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

// Shared input validation for the KV-cache ops (stableops_cache_ops::
// reshape_and_cache_flash, concat_and_cache_mla, swap_blocks).
//
// One check function per op. The op's CPU kernel, its CUDA/ROCm kernel and
// its fake (through the CPU kernel on meta tensors, csrc/core/check.h) call it
// before touching any data, so every backend accepts the same inputs with the
// same messages ("<op>: <argument> ... <value>").
//
// What no check on meta tensors can see (the fake cannot read data) is
// checked by the kernels themselves, before anything is written:
//   * slot values: the CPU kernels raise on a slot < -1 or >= num_blocks *
//     block_size (check_slots_in_range); the GPU kernels skip such a slot
//     (they never write outside the cache, and cannot raise without a host
//     synchronisation);
//   * swap_blocks: block indices out of range (both kernels raise) and, on the
//     GPU, a CPU tensor in pageable memory.
#pragma once

#include <cstdint>
#include <string>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>

namespace stableops {

// What a cache write stores: the source dtype unchanged ("auto"), or FP8
// E4M3 bits of x / scale in one of the two formats ("fp8" / "fp8_e4m3": a
// uint8 cache holds e4m3fn bits; a float8 cache names its format).
enum class CacheMode : uint8_t { kAuto, kFp8E4m3fn, kFp8E4m3fnuz };

// reshape_and_cache_flash (contract: csrc/ops.h).
struct FlashCacheDims {
  int64_t num_tokens;  // slot_mapping.size(0): key rows past it are padding
  int64_t num_heads;
  int64_t head_size;
  int64_t num_blocks;
  int64_t block_size;
  CacheMode mode;
};

FlashCacheDims check_reshape_and_cache_flash(
    const torch::stable::Tensor& key,
    const torch::stable::Tensor& value,
    const torch::stable::Tensor& key_cache,
    const torch::stable::Tensor& value_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& k_scale,
    const torch::stable::Tensor& v_scale,
    torch::headeronly::DeviceType expected_device_type);

// concat_and_cache_mla (contract: csrc/ops.h).
struct MlaCacheDims {
  int64_t num_tokens;  // slot_mapping.size(0)
  int64_t kv_lora_rank;  // L = kv_c.size(1)
  int64_t pe_dim;  // R = k_pe.size(1)
  int64_t num_blocks;
  int64_t block_size;
  CacheMode mode;
};

MlaCacheDims check_concat_and_cache_mla(
    const torch::stable::Tensor& kv_c,
    const torch::stable::Tensor& k_pe,
    const torch::stable::Tensor& kv_cache,
    const torch::stable::Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const torch::stable::Tensor& scale,
    torch::headeronly::DeviceType expected_device_type);

// swap_blocks (contract: csrc/ops.h). `kernel` is the calling kernel's
// device type: CPU (src, dst CPU), CUDA (src, dst on one GPU, or one of them
// on the CPU), Meta (the fake: devices were checked in Python, see
// python/stableops/_fake.py).
enum class SwapKind : uint8_t {
  kHostToHost,
  kDeviceToDevice,
  kHostToDevice,
  kDeviceToHost
};

struct SwapBlocksPlan {
  int64_t num_pairs;  // block_mapping.size(0)
  int64_t src_block_stride_bytes;
  int64_t dst_block_stride_bytes;
  SwapKind kind;
};

SwapBlocksPlan check_swap_blocks(
    const torch::stable::Tensor& src,
    const torch::stable::Tensor& dst,
    int64_t block_size_in_bytes,
    const torch::stable::Tensor& block_mapping,
    torch::headeronly::DeviceType kernel);

// Data checks of real (not meta) tensors, run by the kernels after the op's
// check and before anything is written.
//
// Every slot_mapping[i], i < num_tokens, is -1 or in [0, num_slots):
//   "<op>: slot_mapping[i] = s is out of range for a cache of <n> blocks of
//    <b> slots (valid: -1 to <n*b-1>)"
// slot_mapping must be a CPU int64 tensor here.
void check_slots_in_range(
    const char* op,
    const torch::stable::Tensor& slot_mapping,
    int64_t num_tokens,
    int64_t num_blocks,
    int64_t block_size);

// Every block_mapping[i] = (s, d) has 0 <= s < src.size(0) and
// 0 <= d < dst.size(0) (block_mapping: CPU int64 [N, 2]).
void check_block_mapping_in_range(
    const torch::stable::Tensor& src,
    const torch::stable::Tensor& dst,
    const torch::stable::Tensor& block_mapping);

// block_mapping[i][j] of a CPU int64 [N, 2] tensor (any strides).
inline int64_t block_mapping_at(
    const torch::stable::Tensor& block_mapping,
    int64_t i,
    int64_t j) {
  const auto* p = static_cast<const int64_t*>(block_mapping.const_data_ptr());
  return p[i * block_mapping.stride(0) + j * block_mapping.stride(1)];
}

} // namespace stableops

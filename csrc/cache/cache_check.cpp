// Shared input validation of the KV-cache ops (see cache_check.h).
// Stable ABI only.
#include "csrc/cache/cache_check.h"

#include <cstdint>
#include <string>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"

namespace stableops {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

constexpr const char* kFlash = "reshape_and_cache_flash";
constexpr const char* kMla = "concat_and_cache_mla";
constexpr const char* kSwap = "swap_blocks";

// The kv_cache_dtype string: "auto" or one of the FP8 spellings. The format
// of an FP8 cache comes from the cache's dtype later (cache_mode).
bool is_fp8_spelling(const std::string& s) {
  return s == "fp8" || s == "fp8_e4m3";
}

void check_kv_cache_dtype_string(const char* op, const std::string& s) {
  STD_TORCH_CHECK(
      s == "auto" || is_fp8_spelling(s),
      op,
      ": kv_cache_dtype must be \"auto\", \"fp8\" or \"fp8_e4m3\", got \"",
      s,
      "\"");
}

// What the cache stores, given the (already validated) kv_cache_dtype string
// and the dtypes of the cache and of the source values.
CacheMode cache_mode(
    const char* op,
    const std::string& kv_cache_dtype,
    const Tensor& cache,
    const char* cache_name,
    const Tensor& src,
    const char* src_name) {
  const ScalarType dtype = cache.scalar_type();
  if (kv_cache_dtype == "auto") {
    STD_TORCH_CHECK(
        dtype == src.scalar_type(),
        op,
        ": kv_cache_dtype \"auto\" stores ",
        src_name,
        " unchanged, so ",
        cache_name,
        " must have the dtype of ",
        src_name,
        " (",
        scalar_type_name(src.scalar_type()),
        "), got ",
        scalar_type_name(dtype));
    return CacheMode::kAuto;
  }
  switch (dtype) {
    case ScalarType::Byte:
    case ScalarType::Float8_e4m3fn:
      return CacheMode::kFp8E4m3fn;
    case ScalarType::Float8_e4m3fnuz:
      return CacheMode::kFp8E4m3fnuz;
    default:
      STD_TORCH_CHECK(
          false,
          op,
          ": kv_cache_dtype \"",
          kv_cache_dtype,
          "\" needs ",
          cache_name,
          " of dtype Byte (uint8, holding e4m3fn bits), Float8_e4m3fn or "
          "Float8_e4m3fnuz, got ",
          scalar_type_name(dtype));
  }
  return CacheMode::kAuto; // unreachable
}

void check_shape_like(
    const char* op,
    const Tensor& t,
    const char* name,
    const Tensor& ref,
    const char* ref_name) {
  bool same = t.dim() == ref.dim();
  for (int64_t i = 0; same && i < t.dim(); ++i) {
    same = t.size(i) == ref.size(i);
  }
  STD_TORCH_CHECK(
      same,
      op,
      ": ",
      name,
      " shape ",
      shape_str(t),
      " does not match ",
      ref_name,
      " shape ",
      shape_str(ref));
}

void check_dim(
    const char* op,
    const Tensor& t,
    const char* name,
    int64_t dim,
    const char* layout) {
  STD_TORCH_CHECK(
      t.dim() == dim,
      op,
      ": ",
      name,
      " must be ",
      dim,
      "-D ",
      layout,
      ", got ",
      t.dim(),
      "-D tensor of shape ",
      shape_str(t));
}

// slot_mapping: int64 [T'] with T' <= num_rows (rows past T' are padding).
void check_slot_mapping(
    const char* op,
    const Tensor& slot_mapping,
    int64_t num_rows,
    const char* rows_name) {
  check_dtype(op, slot_mapping, "slot_mapping", {ScalarType::Long});
  check_dim(op, slot_mapping, "slot_mapping", 1, "[num_tokens]");
  STD_TORCH_CHECK(
      slot_mapping.size(0) <= num_rows,
      op,
      ": slot_mapping has ",
      slot_mapping.size(0),
      " entries but ",
      rows_name,
      " has only ",
      num_rows,
      " rows");
}

// A one-element float32 tensor (read on the kernel's device).
void check_scale(const char* op, const Tensor& scale, const char* name) {
  check_dtype(op, scale, name, {ScalarType::Float});
  STD_TORCH_CHECK(
      scale.numel() == 1,
      op,
      ": ",
      name,
      " must have exactly one element, got shape ",
      shape_str(scale));
}

// A cache is written: no two of its elements may share memory (a stride of 0
// in a dimension of size > 1, e.g. an expanded tensor).
void check_writable(const char* op, const Tensor& t, const char* name) {
  if (t.numel() == 0) {
    return;
  }
  for (int64_t i = 0; i < t.dim(); ++i) {
    STD_TORCH_CHECK(
        t.size(i) == 1 || t.stride(i) != 0,
        op,
        ": ",
        name,
        " has stride 0 in dim ",
        i,
        " of size ",
        t.size(i),
        " (strides ",
        strides_str(t),
        "): its elements would overlap");
  }
}

} // namespace

FlashCacheDims check_reshape_and_cache_flash(
    const Tensor& key,
    const Tensor& value,
    const Tensor& key_cache,
    const Tensor& value_cache,
    const Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const Tensor& k_scale,
    const Tensor& v_scale,
    DeviceType expected_device_type) {
  // 1. Devices (schema order; key is the reference).
  check_devices(
      kFlash,
      {{"key", &key},
       {"value", &value},
       {"key_cache", &key_cache},
       {"value_cache", &value_cache},
       {"slot_mapping", &slot_mapping},
       {"k_scale", &k_scale},
       {"v_scale", &v_scale}},
      expected_device_type);
  check_kv_cache_dtype_string(kFlash, kv_cache_dtype);

  // 2. Sources.
  check_dtype(
      kFlash,
      key,
      "key",
      {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
  check_same_dtype(kFlash, value, "value", key, "key");
  check_dim(kFlash, key, "key", 3, "[num_tokens, num_heads, head_size]");
  check_shape_like(kFlash, value, "value", key, "key");
  const int64_t num_heads = key.size(1);
  const int64_t head_size = key.size(2);

  // 3. Caches.
  check_dim(
      kFlash,
      key_cache,
      "key_cache",
      4,
      "[num_blocks, block_size, num_heads, head_size]");
  STD_TORCH_CHECK(
      key_cache.size(2) == num_heads && key_cache.size(3) == head_size,
      "reshape_and_cache_flash: key_cache shape ",
      shape_str(key_cache),
      " does not match key: expected [num_blocks, block_size, ",
      num_heads,
      ", ",
      head_size,
      "]");
  check_shape_like(kFlash, value_cache, "value_cache", key_cache, "key_cache");
  const CacheMode mode =
      cache_mode(kFlash, kv_cache_dtype, key_cache, "key_cache", key, "key");
  check_same_dtype(kFlash, value_cache, "value_cache", key_cache, "key_cache");

  // 4. Slots and scales.
  check_slot_mapping(kFlash, slot_mapping, key.size(0), "key");
  check_scale(kFlash, k_scale, "k_scale");
  check_scale(kFlash, v_scale, "v_scale");

  // 5. Layouts: head_size contiguous everywhere, other strides free.
  check_last_dim_contiguous(kFlash, key, "key");
  check_last_dim_contiguous(kFlash, value, "value");
  check_last_dim_contiguous(kFlash, key_cache, "key_cache");
  check_last_dim_contiguous(kFlash, value_cache, "value_cache");
  check_writable(kFlash, key_cache, "key_cache");
  check_writable(kFlash, value_cache, "value_cache");

  return FlashCacheDims{
      slot_mapping.size(0),
      num_heads,
      head_size,
      key_cache.size(0),
      key_cache.size(1),
      mode};
}

MlaCacheDims check_concat_and_cache_mla(
    const Tensor& kv_c,
    const Tensor& k_pe,
    const Tensor& kv_cache,
    const Tensor& slot_mapping,
    const std::string& kv_cache_dtype,
    const Tensor& scale,
    DeviceType expected_device_type) {
  // 1. Devices (schema order; kv_c is the reference).
  check_devices(
      kMla,
      {{"kv_c", &kv_c},
       {"k_pe", &k_pe},
       {"kv_cache", &kv_cache},
       {"slot_mapping", &slot_mapping},
       {"scale", &scale}},
      expected_device_type);
  check_kv_cache_dtype_string(kMla, kv_cache_dtype);

  // 2. Sources.
  check_dtype(
      kMla,
      kv_c,
      "kv_c",
      {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16});
  check_same_dtype(kMla, k_pe, "k_pe", kv_c, "kv_c");
  check_dim(kMla, kv_c, "kv_c", 2, "[num_tokens, kv_lora_rank]");
  check_dim(kMla, k_pe, "k_pe", 2, "[num_tokens, pe_dim]");
  STD_TORCH_CHECK(
      k_pe.size(0) == kv_c.size(0),
      "concat_and_cache_mla: k_pe has ",
      k_pe.size(0),
      " tokens (shape ",
      shape_str(k_pe),
      ") but kv_c has ",
      kv_c.size(0),
      " (shape ",
      shape_str(kv_c),
      ")");
  const int64_t rank = kv_c.size(1);
  const int64_t pe_dim = k_pe.size(1);

  // 3. Cache.
  check_dim(
      kMla,
      kv_cache,
      "kv_cache",
      3,
      "[num_blocks, block_size, kv_lora_rank + pe_dim]");
  STD_TORCH_CHECK(
      kv_cache.size(2) == rank + pe_dim,
      "concat_and_cache_mla: kv_cache last dim (",
      kv_cache.size(2),
      ") must be kv_lora_rank + pe_dim = ",
      rank,
      " + ",
      pe_dim,
      " = ",
      rank + pe_dim,
      " (kv_cache shape ",
      shape_str(kv_cache),
      ")");
  const CacheMode mode =
      cache_mode(kMla, kv_cache_dtype, kv_cache, "kv_cache", kv_c, "kv_c");

  // 4. Slots and scale.
  check_slot_mapping(kMla, slot_mapping, kv_c.size(0), "kv_c");
  check_scale(kMla, scale, "scale");

  // 5. Layouts.
  check_last_dim_contiguous(kMla, kv_c, "kv_c");
  check_last_dim_contiguous(kMla, k_pe, "k_pe");
  check_last_dim_contiguous(kMla, kv_cache, "kv_cache");
  check_writable(kMla, kv_cache, "kv_cache");

  return MlaCacheDims{
      slot_mapping.size(0),
      rank,
      pe_dim,
      kv_cache.size(0),
      kv_cache.size(1),
      mode};
}

namespace {

bool is_cpu_or_cuda(DeviceType t) {
  return t == DeviceType::CPU || t == DeviceType::CUDA;
}

// swap_blocks' device rule (mirrored by python/stableops/_fake.py).
SwapKind check_swap_devices(
    const Tensor& src,
    const Tensor& dst,
    const Tensor& block_mapping,
    DeviceType kernel) {
  if (kernel == DeviceType::Meta) {
    return SwapKind::kHostToHost; // the fake checked the real devices
  }
  STD_TORCH_CHECK(
      block_mapping.device().type() == DeviceType::CPU,
      "swap_blocks: block_mapping must be a cpu tensor, got ",
      device_name(block_mapping.device()));
  const DeviceType s = src.device().type();
  const DeviceType d = dst.device().type();
  STD_TORCH_CHECK(
      is_cpu_or_cuda(s),
      "swap_blocks: src must be a cpu or cuda tensor, got ",
      device_name(src.device()));
  STD_TORCH_CHECK(
      is_cpu_or_cuda(d),
      "swap_blocks: dst must be a cpu or cuda tensor, got ",
      device_name(dst.device()));
  if (s == DeviceType::CUDA && d == DeviceType::CUDA) {
    STD_TORCH_CHECK(
        src.device() == dst.device(),
        "swap_blocks: src (",
        device_name(src.device()),
        ") and dst (",
        device_name(dst.device()),
        ") must be on the same GPU");
  }
  // Only reachable by calling a kernel directly: the dispatcher sends calls
  // with a CUDA tensor to the CUDA kernel and all-CPU calls to the CPU one.
  const bool any_cuda = s == DeviceType::CUDA || d == DeviceType::CUDA;
  STD_TORCH_CHECK(
      any_cuda == (kernel == DeviceType::CUDA),
      "swap_blocks: src (",
      device_name(src.device()),
      ") and dst (",
      device_name(dst.device()),
      ") do not belong to the ",
      device_type_name(kernel),
      " kernel");
  if (!any_cuda) {
    return SwapKind::kHostToHost;
  }
  if (s == DeviceType::CUDA) {
    return d == DeviceType::CUDA ? SwapKind::kDeviceToDevice
                                 : SwapKind::kDeviceToHost;
  }
  return SwapKind::kHostToDevice;
}

// Dims 1.. of `t` are contiguous (one block is one run of bytes).
bool blocks_contiguous(const Tensor& t) {
  int64_t expected = 1;
  for (int64_t i = t.dim() - 1; i >= 1; --i) {
    if (t.size(i) != 1 && t.stride(i) != expected) {
      return false;
    }
    expected *= t.size(i);
  }
  return true;
}

} // namespace

SwapBlocksPlan check_swap_blocks(
    const Tensor& src,
    const Tensor& dst,
    int64_t block_size_in_bytes,
    const Tensor& block_mapping,
    DeviceType kernel) {
  // 1. Devices.
  check_defined(kSwap, src, "src");
  check_defined(kSwap, dst, "dst");
  check_defined(kSwap, block_mapping, "block_mapping");
  const SwapKind kind = check_swap_devices(src, dst, block_mapping, kernel);

  // 2. src and dst: one dtype, one block shape (dims 1..), contiguous blocks.
  check_same_dtype(kSwap, dst, "dst", src, "src");
  check_min_dim(kSwap, src, "src", 1);
  bool same_blocks = dst.dim() == src.dim();
  for (int64_t i = 1; same_blocks && i < src.dim(); ++i) {
    same_blocks = dst.size(i) == src.size(i);
  }
  STD_TORCH_CHECK(
      same_blocks,
      "swap_blocks: dst shape ",
      shape_str(dst),
      " does not match src shape ",
      shape_str(src),
      " past dim 0 (the shape of one block)");
  STD_TORCH_CHECK(
      blocks_contiguous(src),
      "swap_blocks: the blocks of src must be contiguous (dims 1.. of shape ",
      shape_str(src),
      ", strides ",
      strides_str(src),
      ")");
  STD_TORCH_CHECK(
      blocks_contiguous(dst),
      "swap_blocks: the blocks of dst must be contiguous (dims 1.. of shape ",
      shape_str(dst),
      ", strides ",
      strides_str(dst),
      ")");

  // 3. block_mapping: int64 [N, 2].
  check_dtype(kSwap, block_mapping, "block_mapping", {ScalarType::Long});
  STD_TORCH_CHECK(
      block_mapping.dim() == 2 && block_mapping.size(1) == 2,
      "swap_blocks: block_mapping must have shape [num_pairs, 2], got ",
      shape_str(block_mapping));

  // 4. block_size_in_bytes: within one block of each, and within each block
  //    stride (blocks must not overlap what is copied).
  const int64_t elem = static_cast<int64_t>(src.element_size());
  int64_t block_elems = 1;
  for (int64_t i = 1; i < src.dim(); ++i) {
    block_elems *= src.size(i);
  }
  int64_t limit = block_elems * elem;
  if (src.size(0) > 1 && src.stride(0) * elem < limit) {
    limit = src.stride(0) * elem;
  }
  if (dst.size(0) > 1 && dst.stride(0) * elem < limit) {
    limit = dst.stride(0) * elem;
  }
  STD_TORCH_CHECK(
      block_size_in_bytes > 0 && block_size_in_bytes <= limit,
      "swap_blocks: block_size_in_bytes must be in [1, ",
      limit,
      "] (one block of src and dst: ",
      block_elems,
      " elements of ",
      scalar_type_name(src.scalar_type()),
      ", src block stride ",
      src.stride(0) * elem,
      " bytes, dst block stride ",
      dst.stride(0) * elem,
      " bytes), got ",
      block_size_in_bytes);

  return SwapBlocksPlan{
      block_mapping.size(0), src.stride(0) * elem, dst.stride(0) * elem, kind};
}

void check_slots_in_range(
    const char* op,
    const Tensor& slot_mapping,
    int64_t num_tokens,
    int64_t num_blocks,
    int64_t block_size) {
  const int64_t num_slots = num_blocks * block_size;
  const auto* slots = static_cast<const int64_t*>(slot_mapping.const_data_ptr());
  const int64_t stride = num_tokens > 1 ? slot_mapping.stride(0) : 0;
  for (int64_t i = 0; i < num_tokens; ++i) {
    const int64_t s = slots[i * stride];
    STD_TORCH_CHECK(
        s >= -1 && s < num_slots,
        op,
        ": slot_mapping[",
        i,
        "] = ",
        s,
        " is out of range for a cache of ",
        num_blocks,
        " blocks of ",
        block_size,
        " slots (valid: -1 to ",
        num_slots - 1,
        ")");
  }
}

void check_block_mapping_in_range(
    const Tensor& src,
    const Tensor& dst,
    const Tensor& block_mapping) {
  const int64_t n = block_mapping.size(0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = block_mapping_at(block_mapping, i, 0);
    const int64_t d = block_mapping_at(block_mapping, i, 1);
    STD_TORCH_CHECK(
        s >= 0 && s < src.size(0),
        "swap_blocks: block_mapping[",
        i,
        "] = (",
        s,
        ", ",
        d,
        "): src block ",
        s,
        " is out of range for src with ",
        src.size(0),
        " blocks");
    STD_TORCH_CHECK(
        d >= 0 && d < dst.size(0),
        "swap_blocks: block_mapping[",
        i,
        "] = (",
        s,
        ", ",
        d,
        "): dst block ",
        d,
        " is out of range for dst with ",
        dst.size(0),
        " blocks");
  }
}

} // namespace stableops

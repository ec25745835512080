// GPU utility ops of stableops (one source for CUDA and ROCm via gpu_compat.h):
//
//   stableops::get_cuda_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor
//   stableops_cuda_utils::get_device_attribute(int attribute, int device_id)
//       -> int
//   stableops_cuda_utils::get_max_shared_memory_per_block_device_attribute(
//       int device_id) -> int
//
// Host-only code (no kernels): a gpu_host_srcs entry of its
// stable_op_library, compiled by the GPU toolchain for the host only (nvcc
// -x c++, HIP --offload-host-only) with the GPU runtime's headers. Keep
// kernels out of this file.
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include <torch/csrc/stable/device.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/DeviceType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/core/check.h"
#include "csrc/gpu_compat.h"
#include "csrc/ops.h"

namespace stableops {
namespace {

// ---------------------------------------------------------------------------
// Device helpers
// ---------------------------------------------------------------------------

// Number of visible GPUs. Raises (never crashes) when the runtime reports no
// usable device: no driver, CUDA_VISIBLE_DEVICES="", ... Only a successful,
// non-zero answer is cached, so a failure is re-reported on every call.
int visible_device_count() {
  static std::atomic<int> cached{-1};
  int count = cached.load(std::memory_order_acquire);
  if (count > 0) return count;
  count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error state
    STD_TORCH_CHECK(false,
                    "stableops: no usable GPU: cudaGetDeviceCount failed with "
                    "\"", cudaGetErrorString(err), "\" (error ",
                    static_cast<int>(err), ")");
  }
  STD_TORCH_CHECK(count > 0,
                  "stableops: no usable GPU: cudaGetDeviceCount reported 0 "
                  "devices (is CUDA_VISIBLE_DEVICES empty?)");
  cached.store(count, std::memory_order_release);
  return count;
}

int current_device() {
  int device = -1;
  STABLEOPS_GPU_CHECK(cudaGetDevice(&device));
  return device;
}

// Resolves device_id (< 0 means the current device) and validates it.
int resolve_device(int64_t device_id) {
  const int count = visible_device_count();
  if (device_id < 0) return current_device();
  STD_TORCH_CHECK(device_id < count, "stableops: invalid device_id ",
                  device_id, ": ", count, " GPU(s) visible (valid ids are 0..",
                  count - 1, ", or -1 for the current device)");
  return static_cast<int>(device_id);
}

// The attribute's value, cached per (device, attribute) by gpu_compat.h's
// cached_device_attribute (the one attribute cache of stableops).
int query_device_attribute(int attribute, int device) {
  int value = 0;
  const cudaError_t err = cached_device_attribute(
      static_cast<cudaDeviceAttr>(attribute), device, &value);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    STD_TORCH_CHECK(false, "stableops: cudaDeviceGetAttribute(attribute=",
                    attribute, ", device=", device, ") failed with \"",
                    cudaGetErrorString(err), "\" (error ",
                    static_cast<int>(err), ")",
                    err == cudaErrorInvalidValue
                        ? ": invalid device attribute " +
                              std::to_string(attribute)
                        : std::string());
  }
  return value;
}

}  // namespace

// ---------------------------------------------------------------------------
// Device attributes
// ---------------------------------------------------------------------------

int64_t get_device_attribute(int64_t attribute, int64_t device_id) {
  STD_TORCH_CHECK(attribute >= 0 &&
                      attribute <= std::numeric_limits<int32_t>::max(),
                  "stableops: invalid device attribute ", attribute,
                  " (not a cudaDeviceAttr/hipDeviceAttribute_t value)");
  const int device = resolve_device(device_id);
  return query_device_attribute(static_cast<int>(attribute), device);
}

int64_t get_max_shared_memory_per_block_device_attribute(int64_t device_id) {
  // Opt-in maximum (what a kernel may request through
  // cudaFuncSetAttribute(..., MaxDynamicSharedMemorySize, ...)), not the
  // 48 KiB default per-block limit.
  return get_device_attribute(
      static_cast<int64_t>(cudaDevAttrMaxSharedMemoryPerBlockOptin),
      device_id);
}

// ---------------------------------------------------------------------------
// UVA view of pinned host memory
// ---------------------------------------------------------------------------

torch::stable::Tensor get_cuda_view_from_cpu_tensor(
    const torch::stable::Tensor& cpu_tensor) {
  STD_TORCH_CHECK(cpu_tensor.is_cpu(),
                  "get_cuda_view_from_cpu_tensor: expected a CPU tensor, got "
                  "a tensor on ",
                  device_name(cpu_tensor.device()));
  // Clear RuntimeError (not a crash) when no GPU is usable at all.
  visible_device_count();
  // The view lives on the current device, with an explicit index.
  const int device = current_device();
  const torch::stable::Device cuda_device(torch::headeronly::DeviceType::CUDA,
                                          device);

  if (cpu_tensor.numel() == 0) {
    // Nothing to alias: a fresh empty CUDA tensor with the same
    // sizes/strides/dtype (from_blob with a null pointer = empty_strided).
    return torch::stable::from_blob(nullptr, cpu_tensor.sizes(),
                                    cpu_tensor.strides(), cuda_device,
                                    cpu_tensor.scalar_type());
  }

  // data_ptr() already includes the storage offset and, for a non-empty
  // tensor, lies inside the host allocation. The runtime decides whether it
  // is mappable (pinned by cudaHostAlloc/cudaHostRegister), not is_pinned().
  void* host_ptr = cpu_tensor.data_ptr();
  void* device_ptr = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&device_ptr, host_ptr, 0);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the caller may catch and go on
    STD_TORCH_CHECK(false,
                    "get_cuda_view_from_cpu_tensor: the CPU tensor must be in "
                    "pinned (page-locked) memory, e.g. created with "
                    "pin_memory=True or tensor.pin_memory(); "
                    "cudaHostGetDevicePointer failed with \"",
                    cudaGetErrorString(err), "\" (error ",
                    static_cast<int>(err),
                    "). No copy is made: a view must alias the host memory.");
  }

  // Map the data pointer, then step back to the storage base in device
  // address space so the view keeps sizes, strides AND storage_offset.
  const int64_t storage_offset = cpu_tensor.storage_offset();
  const int64_t elem_size = static_cast<int64_t>(cpu_tensor.element_size());
  void* device_base =
      static_cast<char*>(device_ptr) - storage_offset * elem_size;

  // The deleter owns a reference to the CPU tensor (hence to its storage),
  // released only when the CUDA view's storage dies: deleting the CPU tensor
  // first cannot free the memory under the view.
  // (torch::stable::from_blob heap-allocates this capturing lambda and
  // destroys it right after calling it, which releases keep_alive.)
  return torch::stable::from_blob(
      device_base, cpu_tensor.sizes(), cpu_tensor.strides(), cuda_device,
      cpu_tensor.scalar_type(), [keep_alive = cpu_tensor](void*) {},
      storage_offset);
}

}  // namespace stableops

// The GPU kernel, one source for CUDA and ROCm: stableops/gpu_compat.h maps
// the runtime names and finds torch's current stream.
#include <cstdint>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>

#include "ops.h"
#include "stableops/gpu_compat.h"

namespace stableops_example {
namespace {

__global__ void scale_kernel(float* x, float alpha, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= alpha;
}

}  // namespace

void scale_gpu(torch::stable::Tensor& x, double alpha) {
  check_scale_input(x, torch::headeronly::DeviceType::CUDA);
  const int64_t n = x.numel();
  if (n == 0) return;
  const int32_t device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  const auto stream = static_cast<cudaStream_t>(stableops::current_gpu_stream(device));
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  scale_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<float*>(x.data_ptr()), static_cast<float>(alpha), n);
  STABLEOPS_GPU_CHECK_LAUNCH();
}

}  // namespace stableops_example

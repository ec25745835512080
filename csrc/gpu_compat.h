// Minimal CUDA <-> HIP compatibility layer for the GPU sources of stableops.
//
// Every .cu file in csrc/ is written once against the CUDA runtime spelling
// (cudaStream_t, cudaGetLastError, ...). When the same file is compiled by
// hipcc for ROCm (USE_ROCM or __HIP_PLATFORM_AMD__ defined) this header maps
// exactly the names we use onto their HIP equivalents, so there is no second
// copy of any kernel source and no #ifdef forest inside the kernels.
//
// Keep this header small: add a mapping only when a source starts using the
// name. It may include nothing from libtorch except torch/headeronly/*.
//
// Also provides STABLEOPS_GPU_CHECK(expr): evaluates a runtime call and turns
// a non-success return code into STD_TORCH_CHECK (std::runtime_error, seen as
// RuntimeError in Python) carrying cudaGetErrorString and the call text.
#pragma once

#include <torch/headeronly/util/Exception.h>

#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__)
#define STABLEOPS_ROCM 1
#else
#define STABLEOPS_ROCM 0
#endif

// 1 while the compiler parses a .cu for one GPU architecture (nvcc's device
// passes, one per architecture; HIP's device compilations), 0 in the host
// pass and in plain C++. Torch's stable-ABI headers (the AOTI C shim pulls
// Half, BFloat16, Float8 and complex) cost about 4.5 s per .cu over nvcc's
// six device passes (docs/PERFORMANCE.md, 2026-12-04) and no kernel needs
// them: a .cu keeps its torch includes and its Tensor-taking entry points
// under `#if !STABLEOPS_DEVICE_PASS`, and the code that instantiates its
// kernels (launchers and the dtype dispatch, on plain structs and
// cudaStream_t) outside it, so every pass instantiates the same kernels.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define STABLEOPS_DEVICE_PASS 1
#else
#define STABLEOPS_DEVICE_PASS 0
#endif

#if STABLEOPS_ROCM
// ----------------------------------------------------------------- ROCm/HIP
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

// Types.
using cudaError_t = hipError_t;
using cudaStream_t = hipStream_t;
using cudaDeviceAttr = hipDeviceAttribute_t;
// Element types used by the kernels.
using stableops_half = __half;
using stableops_half2 = __half2;
using stableops_bf16 = __hip_bfloat16;
using stableops_bf162 = __hip_bfloat162;

// HIP 6.4 has __float22bfloat162_rn but not CUDA's two-float
// __floats2bfloat162_rn (later HIP releases add it). Route the CUDA name to
// one definition of ours, so the sources compile against either.
__host__ __device__ inline __hip_bfloat162 stableops_floats2bfloat162_rn(
    float lo, float hi) {
  return __float22bfloat162_rn(make_float2(lo, hi));
}
#define __floats2bfloat162_rn stableops_floats2bfloat162_rn

// Constants.
#define cudaSuccess hipSuccess
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorInvalidDevice hipErrorInvalidDevice
#define cudaErrorNoDevice hipErrorNoDevice
// Opt-in maximum of dynamic shared memory per block. HIP spells it
// differently from CUDA (cudaDevAttrMaxSharedMemoryPerBlockOptin).
#define cudaDevAttrMaxSharedMemoryPerBlockOptin \
  hipDeviceAttributeSharedMemPerBlockOptin
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount

// Functions.
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor \
  hipOccupancyMaxActiveBlocksPerMultiprocessor
// KV-cache ops (csrc/cache/swap_blocks.cu): async copies, pinned-ness.
using cudaMemcpyKind = hipMemcpyKind;
using cudaPointerAttributes = hipPointerAttribute_t;
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaPointerGetAttributes hipPointerGetAttributes
#define cudaMemoryTypeHost hipMemoryTypeHost

// Wavefront size of the compile target (64 on CDNA/MI-series, 32 on RDNA).
#if defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define STABLEOPS_WARP_SIZE 32
#else
#define STABLEOPS_WARP_SIZE 64
#endif

// Read-only global load. A plain load on AMD (no separate non-coherent path).
#define STABLEOPS_LDG(ptr) (*(ptr))
// HIP's second __launch_bounds__ argument means "min waves per EU", not
// "min blocks per SM": drop it rather than mistranslate it.
#define STABLEOPS_LAUNCH_BOUNDS(max_threads, min_blocks) \
  __launch_bounds__(max_threads)

#else
// ----------------------------------------------------------------- CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

using stableops_half = __half;
using stableops_half2 = __half2;
using stableops_bf16 = __nv_bfloat16;
using stableops_bf162 = __nv_bfloat162;

#define STABLEOPS_WARP_SIZE 32

// Read-only global load through the non-coherent (texture) path.
#define STABLEOPS_LDG(ptr) __ldg(ptr)
#define STABLEOPS_LAUNCH_BOUNDS(max_threads, min_blocks) \
  __launch_bounds__(max_threads, min_blocks)
#endif

// Fast float32 math of known accuracy, for kernels whose tolerance allows it
// (device code only):
//   stableops_exp_approx(x)      e^x within 2 + 1.2|x| ulp (CUDA: the SFU's
//                                2^x of x * log2(e); results below 2^-126
//                                flush to 0; HIP: expf, more accurate);
//   stableops_rcp_approx(x)      1 / x within 1 ulp, subnormal results kept
//                                (CUDA: rcp.approx.f32; HIP: 1.0f / x), so
//                                a * stableops_rcp_approx(b) is a / b within
//                                2 ulp for every b, also |b| > 2^126 where
//                                __fdividef returns 0;
//   stableops_rcp_approx_ftz(x)  1 / x within 1 ulp for normal x and
//                                results, subnormal results flushed to 0
//                                (CUDA: rcp.approx.ftz.f32, one SFU
//                                instruction where the form above costs
//                                seven; HIP: 1.0f / x).
#if defined(__CUDACC__) || defined(__HIPCC__)
#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__)
__device__ __forceinline__ float stableops_exp_approx(float x) {
  return expf(x);
}
__device__ __forceinline__ float stableops_rcp_approx(float x) {
  return 1.0f / x;
}
__device__ __forceinline__ float stableops_rcp_approx_ftz(float x) {
  return 1.0f / x;
}
#else
__device__ __forceinline__ float stableops_exp_approx(float x) {
  return __expf(x);
}
__device__ __forceinline__ float stableops_rcp_approx(float x) {
  float r;
  asm("rcp.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float stableops_rcp_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
#endif
#endif

// Evaluates a CUDA/HIP runtime call once; on failure clears the runtime's
// last-error state (so a caught exception cannot make a later, unrelated
// cudaGetLastError() fail) and raises with the error string and the call text.
#define STABLEOPS_GPU_CHECK(expr)                                    \
  do {                                                               \
    const cudaError_t stableops_gpu_err_ = (expr);                   \
    if (stableops_gpu_err_ != cudaSuccess) {                         \
      (void)cudaGetLastError();                                      \
      STD_TORCH_CHECK(                                               \
          false,                                                     \
          "GPU runtime call failed: ",                               \
          cudaGetErrorString(stableops_gpu_err_),                    \
          " (error ",                                                \
          static_cast<int>(stableops_gpu_err_),                      \
          ") from `" #expr "`");                                     \
    }                                                                \
  } while (0)

// Checks that the last kernel launch was accepted by the runtime
// (configuration errors, missing kernel image for this GPU, ...).
#define STABLEOPS_GPU_CHECK_LAUNCH() STABLEOPS_GPU_CHECK(cudaGetLastError())

// The current stream of a device, from the stable C shim's
// aoti_torch_get_current_cuda_stream (in the shim since before 2.9, so fine
// at TORCH_TARGET_VERSION 2.11). That function lives in libtorch_cuda.so
// (libtorch_hip.so on ROCm), which torch loads without RTLD_GLOBAL and which
// a CPU-only torch does not have. Linking against it would add a NEEDED entry
// and stop the library loading into CPU-only torch, so it is looked up at
// run time in the torch GPU library already loaded into the process.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <utility>

#if !STABLEOPS_DEVICE_PASS
#include <optional>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/headeronly/core/ScalarType.h>
#endif

namespace stableops {

// The floating element types of the kernels, named without torch's headers
// (a device pass has none): a .cu's dtype dispatch, which instantiates its
// kernels in every pass, switches on this; its host entry point maps the
// tensor's dtype with to_gpu_float (stableops' own sources use the raising
// gpu_float_of of csrc/core/gpu_float.h).
enum class GpuFloat { kFloat32, kFloat16, kBFloat16 };

// Calls f(T{}) with T the element type `dtype` names (float, stableops_half,
// stableops_bf16): the one dtype switch of every dispatch function.
template <class F>
void with_gpu_float(GpuFloat dtype, F&& f) {
  switch (dtype) {
    case GpuFloat::kFloat32:
      f(float{});
      return;
    case GpuFloat::kFloat16:
      f(stableops_half{});
      return;
    case GpuFloat::kBFloat16:
      f(stableops_bf16{});
      return;
  }
}

#if !STABLEOPS_DEVICE_PASS
// None for any other dtype (the caller raises, naming it).
inline std::optional<GpuFloat> to_gpu_float(torch::headeronly::ScalarType t) {
  switch (t) {
    case torch::headeronly::ScalarType::Float:
      return GpuFloat::kFloat32;
    case torch::headeronly::ScalarType::Half:
      return GpuFloat::kFloat16;
    case torch::headeronly::ScalarType::BFloat16:
      return GpuFloat::kBFloat16;
    default:
      return std::nullopt;
  }
}
#endif

#if STABLEOPS_DEVICE_PASS
// Host code: a device pass parses its callers but never generates them, and
// has no torch headers (see STABLEOPS_DEVICE_PASS).
inline void* current_gpu_stream(int32_t) { return nullptr; }
#else
inline void* current_gpu_stream(int32_t device_index) {
  using GetStreamFn = AOTITorchError (*)(int32_t, void**);
  static const GetStreamFn get_stream = []() -> GetStreamFn {
    for (const char* lib : {"libtorch_cuda.so", "libtorch_hip.so"}) {
      if (void* handle = dlopen(lib, RTLD_NOLOAD | RTLD_LAZY)) {
        return reinterpret_cast<GetStreamFn>(
            dlsym(handle, "aoti_torch_get_current_cuda_stream"));
      }
    }
    return nullptr;
  }();
  STD_TORCH_CHECK(
      get_stream != nullptr,
      "stableops: this torch has no GPU support loaded (libtorch_cuda.so / "
      "libtorch_hip.so with aoti_torch_get_current_cuda_stream not found in "
      "the process); GPU ops need a CUDA or ROCm build of torch");
  void* stream = nullptr;
  STD_TORCH_CHECK(
      get_stream(device_index, &stream) == AOTI_TORCH_SUCCESS,
      "stableops: aoti_torch_get_current_cuda_stream failed for device ",
      device_index);
  return stream;
}
#endif  // !STABLEOPS_DEVICE_PASS

// Attribute `attr` of `device` into *value: asked once per (device,
// attribute), then cached (attributes are immutable properties of a device;
// thread safe, lock free, no allocation: a fixed table of atomics, 64 KiB of
// zero-initialised BSS, one per shared object). Entry: bit 32 set = known,
// low 32 bits = value; 0 = not asked yet. Devices >= 64 and attribute ids
// >= 128 (HIP's AMD-specific ones start at 10000) are asked every time.
// Returns the runtime's error code when it cannot answer (nothing cached
// then; the caller decides whether that is an error). Every attribute query
// of stableops goes through here.
inline cudaError_t cached_device_attribute(cudaDeviceAttr attr, int device, int* value) {
  constexpr int kDevices = 64;
  constexpr int kAttributes = 128;
  static std::atomic<uint64_t> cache[kDevices][kAttributes];
  const int id = static_cast<int>(attr);
  const bool cacheable = device >= 0 && device < kDevices && id >= 0 && id < kAttributes;
  if (cacheable) {
    const uint64_t entry = cache[device][id].load(std::memory_order_relaxed);
    if (entry != 0) {
      *value = static_cast<int32_t>(static_cast<uint32_t>(entry));
      return cudaSuccess;
    }
  }
  const cudaError_t err = cudaDeviceGetAttribute(value, attr, device);
  if (err == cudaSuccess && cacheable) {
    cache[device][id].store((uint64_t{1} << 32) | static_cast<uint32_t>(*value),
                            std::memory_order_relaxed);
  }
  return err;
}

// Multiprocessors (compute units) of `device` (cached, see above).
inline int multiprocessor_count(int device) {
  int count = 0;
  STABLEOPS_GPU_CHECK(cached_device_attribute(cudaDevAttrMultiProcessorCount, device, &count));
  return std::max(count, 1);
}

// The grid of a grid-stride kernel meant to run in one wave: the blocks of
// `threads` threads (no dynamic shared memory) that every multiprocessor of
// the current device holds at once, as the occupancy calculator says for
// this kernel (its registers and launch bounds decide: a kernel of 40
// registers fits 6 blocks of 256 threads on an H100, not 2048 / 256 = 8),
// times the multiprocessors. Asked once per device, then cached, so keep one
// static object per kernel instantiation and block size. The caller has made
// `device` current (a DeviceGuard).
class ResidentGrid {
 public:
  template <class Kernel>
  int blocks(Kernel kernel, int threads, int device) {
    const bool cacheable = device >= 0 && device < kDevices;
    if (cacheable) {
      const int cached = cache_[device].load(std::memory_order_relaxed);
      if (cached > 0) return cached;
    }
    int per_multiprocessor = 0;
    STABLEOPS_GPU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_multiprocessor, kernel, threads, 0));
    const int blocks = multiprocessor_count(device) * std::max(per_multiprocessor, 1);
    if (cacheable) cache_[device].store(blocks, std::memory_order_relaxed);
    return blocks;
  }

 private:
  static constexpr int kDevices = 64;
  std::atomic<int> cache_[kDevices] = {};
};

// ------------------------------------------- programmatic dependent launch
// Back-to-back kernels on one stream normally run strictly one after the
// other: the next grid is launched and its blocks scheduled only once the
// previous one has finished, a gap of about half a microsecond on an H200,
// which is a third of a one-token op and a point or two of a 30 us one.
// With programmatic dependent launch (CUDA, compute capability >= 9.0) the
// next grid may be launched while the previous one runs its last blocks;
// each kernel then orders itself after its predecessor explicitly.
//
// The contract for every kernel of stableops (and of a module that embeds
// stableops and launches through gpu_launch):
//   * launched with gpu_launch(kernel, grid, block, shared_bytes, stream,
//     args...), which returns the launch's cudaError_t (wrap it in
//     STABLEOPS_GPU_CHECK);
//   * its first statement is pdl_enter(): it waits until the grid before it
//     on the stream has completed and its writes are visible
//     (griddepcontrol.wait), so no global load or store of the kernel can
//     race with the previous kernel, then lets the next kernel be launched
//     (griddepcontrol.launch_dependents), whose blocks wait the same way.
// Inside a CUDA graph the dependency is captured as a programmatic edge.
// A kernel launched without the attribute (older GPUs, HIP, or
// STABLEOPS_DISABLE_PDL set to anything but "" or "0" in the environment,
// read once per process: for comparisons and for debugging tools that
// want strictly serial kernels) runs exactly as a plain launch, and
// pdl_enter() returns at once.
#if defined(__CUDACC__) || defined(__HIPCC__)
__device__ __forceinline__ void pdl_enter() {
#if !STABLEOPS_ROCM && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches on the current device use programmatic dependent
// launch: compute capability >= 9.0 (asked once per device, then cached)
// and not turned off by STABLEOPS_DISABLE_PDL.
inline bool pdl_enabled() {
#if STABLEOPS_ROCM
  return false;
#else
  static const bool disabled = [] {
    const char* v = std::getenv("STABLEOPS_DISABLE_PDL");
    return v != nullptr && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
  }();
  if (disabled) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // the launch itself will report the problem
  }
  int major = 0;
  if (cached_device_attribute(cudaDevAttrComputeCapabilityMajor, device, &major) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;  // the launch itself will report the problem
  }
  return major >= 9;
#endif
}

// Launches kernel<<<grid, block, shared_bytes, stream>>>(args...) with
// programmatic dependent launch where pdl_enabled() (see above); returns the
// launch's error code.
template <typename... Params, typename... Args>
cudaError_t gpu_launch(void (*kernel)(Params...), dim3 grid, dim3 block,
                       size_t shared_bytes, cudaStream_t stream, Args&&... args) {
#if STABLEOPS_ROCM
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
#else
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#endif
}
#endif  // __CUDACC__ || __HIPCC__

}  // namespace stableops

// A gpu_host_srcs file of stable_op_library is compiled for the host only
// (STABLEOPS_GPU_HOST_ONLY set by the rule): a kernel there would have no
// device code. nvcc rejects one with a parse error; HIP's --offload-host-only
// would build it into a launch of nothing. From here on in such a file, any
// __global__ is a compile error that says so, on both backends.
#if defined(STABLEOPS_GPU_HOST_ONLY)
#undef __global__
#define __global__                                                      \
  static_assert(false,                                                  \
                "stableops: a __global__ kernel in a gpu_host_srcs file " \
                "(compiled for the host only, no device code); move it "  \
                "to gpu_srcs");
#endif

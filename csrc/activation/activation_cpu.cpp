// CPU kernels of the activation ops (contract: activation_check.h; the ops:
// activation_functors.h). Stable ABI only.
//
// * fp32 / fp16 / bf16 storage, all arithmetic in float32.
// * Work is split into tasks of at most kChunk elements of one row and run
//   with torch::stable::parallel_for, so many short rows and one long row
//   (an elementwise op on a contiguous tensor is one row) both spread over
//   the threads torch.set_num_threads() allows.
// * The inner loops are branch-free scalar code (csrc/core/cpu_math.h's
//   codecs and its libm-free exp) that Clang auto-vectorises, compiled
//   for AVX2 and the baseline (STABLEOPS_CPU_CLONES). target_clones does not
//   take templates, so there is one cloned function per dtype, which
//   switches on the op outside the loops.
// * float16 on a CPU with F16C (cpu::has_f16c()): rows go through float32
//   tiles of kTile elements converted by the F16C instructions (8 per
//   instruction, the same bits as the portable codec), the op running over
//   the tiles; the portable codec's bit operations cost more than the op's
//   math there.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include "csrc/activation/activation_check.h"
#include "csrc/activation/activation_functors.h"
#include "csrc/core/check.h"
#include "csrc/core/cpu_math.h"
#include "csrc/ops.h"

namespace stableops {
namespace {

using namespace activation;
using cpu::BF16Codec;
using cpu::F16Codec;
using cpu::F32Codec;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

struct CpuMath {
  static STABLEOPS_ALWAYS_INLINE float exp(float x) {
    return cpu::exp_f32(x);
  }
  static STABLEOPS_ALWAYS_INLINE float div(float a, float b) {
    return a / b;
  }
  static STABLEOPS_ALWAYS_INLINE float inv_ge1(float d) {
    return 1.0f / d;
  }
};

// Elements of one row per task.
constexpr int64_t kChunk = 4096;

struct Task {
  OpId id;
  // The functor, of the type id names. Built outside the cloned functions:
  // Clang does not emit inline functions (the constructors) called only from
  // target_clones functions, which would leave undefined symbols.
  const void* op;
  const void* in;
  void* out;
  int64_t in_stride;
  int64_t out_stride;
  int64_t d;
  int64_t chunks_per_row;
};

#if STABLEOPS_CPU_F16C
// The Codec of run_span's float16 path through F16C tiles.
struct F16CTiles {
  using storage_t = uint16_t;
};

// Output elements per tile of the F16C path.
constexpr int64_t kTile = 256;
#endif

// Output elements [j0, j1) of one row.
template <class Codec, class Op>
STABLEOPS_ALWAYS_INLINE void run_span(
    const Op& op,
    const typename Codec::storage_t* in,
    typename Codec::storage_t* out,
    int64_t d,
    int64_t j0,
    int64_t j1) {
  constexpr Layout kLayout = Op::kInfo.layout;
  for (int64_t j = j0; j < j1; ++j) {
    if constexpr (kLayout == Layout::kSplit) {
      out[j] = Codec::store(op(Codec::load(in[j]), Codec::load(in[d + j])));
    } else if constexpr (kLayout == Layout::kInterleaved) {
      out[j] = Codec::store(
          op(Codec::load(in[2 * j]), Codec::load(in[2 * j + 1])));
    } else {
      out[j] = Codec::store(op(Codec::load(in[j])));
    }
  }
}

#if STABLEOPS_CPU_F16C
// Output elements [j0, j1) of one float16 row, through float32 tiles: F16C
// converts a tile's inputs into a float32 row of the op's layout (split: the
// two halves' tiles back to back), run_span<F32Codec> applies the op, F16C
// converts the results. Only inlined into run_tasks_f16c (compiled for
// AVX2 + F16C).
template <class Op>
STABLEOPS_ALWAYS_INLINE void run_span_f16c(
    const Op& op, const uint16_t* in, uint16_t* out, int64_t d, int64_t j0, int64_t j1) {
  constexpr Layout kLayout = Op::kInfo.layout;
  alignas(32) float tile_in[2 * kTile];
  alignas(32) float tile_out[kTile];
  for (int64_t t = j0; t < j1; t += kTile) {
    const int64_t n = std::min(kTile, j1 - t);
    if constexpr (kLayout == Layout::kSplit) {
      cpu::f16_to_f32(in + t, tile_in, n);
      cpu::f16_to_f32(in + d + t, tile_in + n, n);
    } else if constexpr (kLayout == Layout::kInterleaved) {
      cpu::f16_to_f32(in + 2 * t, tile_in, 2 * n);
    } else {
      cpu::f16_to_f32(in + t, tile_in, n);
    }
    run_span<F32Codec>(op, tile_in, tile_out, n, 0, n);
    cpu::f32_to_f16(tile_out, out + t, n);
  }
}
#endif

template <class Codec, class Op>
STABLEOPS_ALWAYS_INLINE void run_tasks(const Task& t, int64_t begin, int64_t end) {
  using T = typename Codec::storage_t;
  const Op& op = *static_cast<const Op*>(t.op);
  for (int64_t task = begin; task < end; ++task) {
    const int64_t row = task / t.chunks_per_row;
    const int64_t j0 = (task - row * t.chunks_per_row) * kChunk;
    const int64_t j1 = std::min(j0 + kChunk, t.d);
    const T* in = static_cast<const T*>(t.in) + row * t.in_stride;
    T* out = static_cast<T*>(t.out) + row * t.out_stride;
#if STABLEOPS_CPU_F16C
    if constexpr (std::is_same_v<Codec, F16CTiles>) {
      run_span_f16c(op, in, out, t.d, j0, j1);
    } else
#endif
    {
      run_span<Codec>(op, in, out, t.d, j0, j1);
    }
  }
}

template <class Codec>
STABLEOPS_ALWAYS_INLINE void run_tasks_of_op(const Task& t, int64_t begin, int64_t end) {
  switch (t.id) {
    case OpId::kSiluAndMul:
      return run_tasks<Codec, SiluAndMul<CpuMath>>(t, begin, end);
    case OpId::kMulAndSilu:
      return run_tasks<Codec, MulAndSilu<CpuMath>>(t, begin, end);
    case OpId::kSiluAndMulWithClamp:
      return run_tasks<Codec, SiluAndMulWithClamp<CpuMath>>(t, begin, end);
    case OpId::kGeluAndMul:
      return run_tasks<Codec, GeluAndMul<CpuMath>>(t, begin, end);
    case OpId::kGeluTanhAndMul:
      return run_tasks<Codec, GeluTanhAndMul<CpuMath>>(t, begin, end);
    case OpId::kFatreluAndMul:
      return run_tasks<Codec, FatreluAndMul<CpuMath>>(t, begin, end);
    case OpId::kSwigluoaiAndMul:
      return run_tasks<Codec, SwigluoaiAndMul<CpuMath>>(t, begin, end);
    case OpId::kGeluNew:
      return run_tasks<Codec, GeluNew<CpuMath>>(t, begin, end);
    case OpId::kGeluFast:
      return run_tasks<Codec, GeluFast<CpuMath>>(t, begin, end);
    case OpId::kGeluQuick:
      return run_tasks<Codec, GeluQuick<CpuMath>>(t, begin, end);
  }
}

STABLEOPS_CPU_CLONES void run_tasks_f32(const Task& t, int64_t begin, int64_t end) {
  run_tasks_of_op<F32Codec>(t, begin, end);
}

STABLEOPS_CPU_CLONES void run_tasks_f16(const Task& t, int64_t begin, int64_t end) {
  run_tasks_of_op<F16Codec>(t, begin, end);
}

#if STABLEOPS_CPU_F16C
STABLEOPS_F16C_TARGET void run_tasks_f16c(const Task& t, int64_t begin, int64_t end) {
  run_tasks_of_op<F16CTiles>(t, begin, end);
}
#endif

STABLEOPS_CPU_CLONES void run_tasks_bf16(const Task& t, int64_t begin, int64_t end) {
  run_tasks_of_op<BF16Codec>(t, begin, end);
}

template <template <class> class OpT>
void activation_cpu(Tensor& out, const Tensor& input, const Scalars& scalars) {
  using Op = OpT<CpuMath>;
  const ActivationDims dims = check_activation(
      Op::kInfo, scalars, out, input, cpu_kernel_device(out));
  if (validation_only(out) || dims.rows == 0 || dims.d == 0) {
    return;
  }
  const int64_t chunks_per_row = (dims.d + kChunk - 1) / kChunk;
  const Op op(scalars);
  const Task task{
      Op::kId,
      &op,
      input.const_data_ptr(),
      out.mutable_data_ptr(),
      dims.in_stride,
      dims.out_stride,
      dims.d,
      chunks_per_row};

  using TaskFn = void (*)(const Task&, int64_t, int64_t);
  TaskFn fn = nullptr;
  switch (out.scalar_type()) {
    case ScalarType::Float:
      fn = &run_tasks_f32;
      break;
    case ScalarType::Half:
      fn = &run_tasks_f16;
#if STABLEOPS_CPU_F16C
      if (cpu::has_f16c()) {
        fn = &run_tasks_f16c;
      }
#endif
      break;
    case ScalarType::BFloat16:
      fn = &run_tasks_bf16;
      break;
    default:
      STD_TORCH_CHECK(false, Op::kInfo.name, ": unreachable dtype");
  }
  // About 16K output elements per parallel chunk.
  const int64_t task_elems = std::min(dims.d, kChunk);
  const int64_t grain = std::max<int64_t>(1, 16384 / task_elems);
  torch::stable::parallel_for(
      0,
      dims.rows * chunks_per_row,
      grain,
      [&task, fn](int64_t begin, int64_t end) { fn(task, begin, end); });
}

} // namespace

void silu_and_mul_cpu(Tensor& result, const Tensor& input) {
  activation_cpu<SiluAndMul>(result, input, {});
}

void mul_and_silu_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<MulAndSilu>(out, input, {});
}

void silu_and_mul_with_clamp_cpu(Tensor& result, const Tensor& input, double limit) {
  activation_cpu<SiluAndMulWithClamp>(result, input, Scalars{/*limit=*/limit, /*threshold=*/0.0, /*alpha=*/0.0});
}

void gelu_and_mul_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<GeluAndMul>(out, input, {});
}

void gelu_tanh_and_mul_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<GeluTanhAndMul>(out, input, {});
}

void fatrelu_and_mul_cpu(Tensor& out, const Tensor& input, double threshold) {
  activation_cpu<FatreluAndMul>(out, input, Scalars{/*limit=*/0.0, /*threshold=*/threshold, /*alpha=*/0.0});
}

void swigluoai_and_mul_cpu(
    Tensor& out,
    const Tensor& input,
    double alpha,
    double limit) {
  activation_cpu<SwigluoaiAndMul>(out, input, Scalars{/*limit=*/limit, /*threshold=*/0.0, /*alpha=*/alpha});
}

void gelu_new_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<GeluNew>(out, input, {});
}

void gelu_fast_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<GeluFast>(out, input, {});
}

void gelu_quick_cpu(Tensor& out, const Tensor& input) {
  activation_cpu<GeluQuick>(out, input, {});
}

} // namespace stableops

// The example's one registration table, shared by every backend.
#include <torch/csrc/stable/library.h>

#include "ops.h"

STABLE_TORCH_LIBRARY_FRAGMENT(stableops_example, m) {
  m.def("scale_(Tensor! x, float alpha) -> ()");
}

STABLE_TORCH_LIBRARY_IMPL(stableops_example, CPU, m) {
  m.impl("scale_", TORCH_BOX(&stableops_example::scale_cpu));
}

#ifdef STABLEOPS_WITH_GPU
// ROCm builds of torch dispatch HIP tensors under the CUDA key too.
STABLE_TORCH_LIBRARY_IMPL(stableops_example, CUDA, m) {
  m.impl("scale_", TORCH_BOX(&stableops_example::scale_gpu));
}
#endif

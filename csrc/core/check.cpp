// Validation helpers shared by every op (see check.h). Stable ABI only.
#include "csrc/core/check.h"

#include <sstream>
#include <string>

namespace stableops {

using torch::headeronly::DeviceType;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

std::string scalar_type_name(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float:
      return "Float";
    case ScalarType::Half:
      return "Half";
    case ScalarType::BFloat16:
      return "BFloat16";
    case ScalarType::Double:
      return "Double";
    case ScalarType::Byte:
      return "Byte";
    case ScalarType::Char:
      return "Char";
    case ScalarType::Short:
      return "Short";
    case ScalarType::Int:
      return "Int";
    case ScalarType::Long:
      return "Long";
    case ScalarType::Bool:
      return "Bool";
    case ScalarType::ComplexFloat:
      return "ComplexFloat";
    case ScalarType::ComplexDouble:
      return "ComplexDouble";
    case ScalarType::Float8_e4m3fn:
      return "Float8_e4m3fn";
    case ScalarType::Float8_e5m2:
      return "Float8_e5m2";
    case ScalarType::Float8_e4m3fnuz:
      return "Float8_e4m3fnuz";
    case ScalarType::Float8_e5m2fnuz:
      return "Float8_e5m2fnuz";
    default:
      return "ScalarType(" + std::to_string(static_cast<int>(dtype)) + ")";
  }
}

namespace {

const char* dtype_alias(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float:
      return "float32";
    case ScalarType::Half:
      return "float16";
    case ScalarType::BFloat16:
      return "bfloat16";
    case ScalarType::Double:
      return "float64";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Byte:
      return "uint8";
    default:
      return nullptr;
  }
}

} // namespace

std::string dtype_list_str(std::initializer_list<ScalarType> dtypes) {
  std::string out;
  size_t i = 0;
  for (ScalarType d : dtypes) {
    if (i > 0) {
      out += (i + 1 == dtypes.size()) ? " or " : ", ";
    }
    out += scalar_type_name(d);
    if (const char* alias = dtype_alias(d)) {
      out += std::string(" (") + alias + ")";
    }
    ++i;
  }
  return out;
}

std::string device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
    case DeviceType::HIP:
      return "hip";
    case DeviceType::Meta:
      return "meta";
    case DeviceType::XPU:
      return "xpu";
    case DeviceType::MPS:
      return "mps";
    case DeviceType::PrivateUse1:
      return "privateuseone";
    default:
      return "DeviceType(" + std::to_string(static_cast<int>(type)) + ")";
  }
}

std::string device_name(const torch::stable::Device& device) {
  std::string name = device_type_name(device.type());
  if (device.has_index() && device.type() != DeviceType::CPU) {
    name += ":" + std::to_string(static_cast<int>(device.index()));
  }
  return name;
}

std::string shape_str(const Tensor& t) {
  std::ostringstream oss;
  oss << '[';
  const auto sizes = t.sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    oss << (i ? ", " : "") << sizes[i];
  }
  oss << ']';
  return oss.str();
}

std::string strides_str(const Tensor& t) {
  std::ostringstream oss;
  oss << '[';
  const auto strides = t.strides();
  for (size_t i = 0; i < strides.size(); ++i) {
    oss << (i ? ", " : "") << strides[i];
  }
  oss << ']';
  return oss.str();
}

void check_defined(const char* op, const Tensor& t, const char* name) {
  STD_TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
}

void check_devices(
    const char* op,
    std::initializer_list<NamedTensor> tensors,
    DeviceType expected) {
  const NamedTensor* ref = nullptr;
  for (const NamedTensor& nt : tensors) {
    if (nt.second == nullptr) {
      continue; // an absent optional
    }
    check_defined(op, *nt.second, nt.first);
    if (ref == nullptr) {
      ref = &nt;
      continue;
    }
    const torch::stable::Device dev = nt.second->device();
    const torch::stable::Device ref_dev = ref->second->device();
    STD_TORCH_CHECK(
        dev == ref_dev,
        op,
        ": ",
        nt.first,
        " must be on the same device as ",
        ref->first,
        " (",
        device_name(ref_dev),
        "), got ",
        device_name(dev));
  }
  STD_TORCH_CHECK(ref != nullptr, op, ": internal error: no tensor argument");
  const torch::stable::Device dev = ref->second->device();
  STD_TORCH_CHECK(
      dev.type() == expected,
      op,
      ": ",
      ref->first,
      " must be a ",
      device_type_name(expected),
      " tensor for this kernel, got ",
      device_name(dev));
}

void check_dtype(
    const char* op,
    const Tensor& t,
    const char* name,
    std::initializer_list<ScalarType> allowed) {
  const ScalarType dtype = t.scalar_type();
  for (ScalarType a : allowed) {
    if (a == dtype) {
      return;
    }
  }
  STD_TORCH_CHECK(
      false,
      op,
      ": ",
      name,
      " must have dtype ",
      dtype_list_str(allowed),
      ", got ",
      scalar_type_name(dtype));
}

void check_same_dtype(
    const char* op,
    const Tensor& t,
    const char* name,
    const Tensor& ref,
    const char* ref_name) {
  STD_TORCH_CHECK(
      t.scalar_type() == ref.scalar_type(),
      op,
      ": ",
      name,
      " must have the same dtype as ",
      ref_name,
      " (",
      scalar_type_name(ref.scalar_type()),
      "), got ",
      scalar_type_name(t.scalar_type()));
}

void check_last_dim_contiguous(const char* op, const Tensor& t, const char* name) {
  if (t.dim() == 0 || t.numel() == 0 || t.size(t.dim() - 1) == 1) {
    return;
  }
  STD_TORCH_CHECK(
      t.stride(t.dim() - 1) == 1,
      op,
      ": ",
      name,
      " must be contiguous in its last dim, got strides ",
      strides_str(t));
}

void check_min_dim(const char* op, const Tensor& t, const char* name, int64_t min_dim) {
  STD_TORCH_CHECK(
      t.dim() >= min_dim,
      op,
      ": ",
      name,
      " must have at least ",
      min_dim,
      " dims, got ",
      t.dim(),
      "-D tensor of shape ",
      shape_str(t));
}

} // namespace stableops

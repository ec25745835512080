// Declaration-only stand-in for rocThrust's <thrust/complex.h>, used by
// @stableops_rocm when the ROCm installation has no rocThrust (the build
// image's Debian packages do not).
//
// torch/headeronly/util/complex.h includes <thrust/complex.h> whenever
// __HIPCC__ (or __CUDACC__) is defined, only to declare conversions between
// c10::complex and thrust::complex inside templates. stableops' GPU sources
// never use thrust::complex; declaring the names is enough for those
// templates to parse, and leaving them undefined turns any real use into a
// compile error (incomplete type / undefined function) rather than a
// miscompile.
#pragma once

namespace thrust {

template <typename T>
struct complex;

template <typename T>
complex<T> polar(const T& m, const T& theta = T());

}  // namespace thrust

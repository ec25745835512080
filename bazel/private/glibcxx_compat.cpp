// Keeps every stable_extension inside manylinux_2_28's libstdc++ (GCC 8:
// GLIBCXX <= 3.4.24, CXXABI <= 1.3.11).
//
// Since GCC 9 the default constructors of std::ostringstream and
// std::stringstream are separate exported symbols, versioned GLIBCXX_3.4.26.
// torch's own stable-ABI headers call them (STD_TORCH_CHECK's message builder
// in torch/headeronly/util/Exception.h, torch_call_dispatcher's error path in
// shim_utils.h), so every object that includes them references 3.4.26 and
// auditwheel derives manylinux_2_31 from the symbol versions.
//
// GCC 8's libstdc++ implements the default constructor as the openmode
// constructor with its default argument (GLIBCXX_3.4.21). Defining the two
// 3.4.26 symbols here, hidden, makes the static linker bind every reference to
// these definitions instead of libstdc++.so.6; they construct exactly what the
// GCC 9+ inline constructors construct (the same mode), via the 3.4.21
// constructors. This is what the manylinux devtoolset's libstdc++_nonshared.a
// does for newer symbols. The ABI audit (max_glibcxx) and auditwheel check
// that no 3.4.26 reference is left.
#include <ios>
#include <new>
#include <sstream>

#if defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI

namespace stableops_glibcxx_compat {

// std::__cxx11::basic_ostringstream<char>::basic_ostringstream() [C1]
__attribute__((visibility("hidden"), used)) void ostringstream_default(std::ostringstream* self) __asm__(
    "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev");
void ostringstream_default(std::ostringstream* self) {
  ::new (static_cast<void*>(self)) std::ostringstream(std::ios_base::out);
}

// std::__cxx11::basic_stringstream<char>::basic_stringstream() [C1]
__attribute__((visibility("hidden"), used)) void stringstream_default(std::stringstream* self) __asm__(
    "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev");
void stringstream_default(std::stringstream* self) {
  ::new (static_cast<void*>(self)) std::stringstream(std::ios_base::out | std::ios_base::in);
}

}  // namespace stableops_glibcxx_compat

#endif

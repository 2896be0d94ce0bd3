// One C++ exception type for everything the core reports; module.cpp maps it to
// pybench.errors.NativeError so Python sees a single named exception family.
#pragma once

#include <stdexcept>
#include <string>

namespace pybench {

class NativeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_native(const std::string& what, const char* file, int line);

}  // namespace pybench

#define PYBENCH_FAIL(msg) ::pybench::throw_native((msg), __FILE__, __LINE__)
#define PYBENCH_REQUIRE(cond, msg) \
  do {                             \
    if (!(cond)) PYBENCH_FAIL(msg); \
  } while (0)

#include "common/native_error.hpp"

#include <cstring>

namespace pybench {

[[noreturn]] void throw_native(const std::string& what, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  throw NativeError(what + " [" + (base ? base + 1 : file) + ":" + std::to_string(line) + "]");
}

}  // namespace pybench

#include <map>

#include "mpi/collective.hpp"
#include "common/native_error.hpp"

namespace pybench {
namespace {
std::map<std::string, CollectiveDesc>& registry() {
  static std::map<std::string, CollectiveDesc> r;  // function-local: safe across static-init order
  return r;
}
}  // namespace

void register_collective(const CollectiveDesc& desc) { registry()[desc.name] = desc; }

const CollectiveDesc& find_collective(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const auto& kv : registry()) known += (known.empty() ? "" : ", ") + kv.first;
    PYBENCH_FAIL("unknown collective '" + name + "'; known: " + known);
  }
  return it->second;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> names;
  for (const auto& kv : registry()) names.push_back(kv.first);
  return names;
}

}  // namespace pybench

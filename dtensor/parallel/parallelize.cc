#include "dtensor/parallel/parallelize.h"

#include <vector>

#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Glob match of one component: '*' matches any (possibly empty) run of characters.
bool glob(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (pi < p.size() && p[pi] == s[si]) {
      ++pi;
      ++si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace

bool fqn_matches(std::string_view pattern, std::string_view fqn) {
  const auto pp = split_dots(pattern);
  const auto ff = split_dots(fqn);
  if (pp.size() != ff.size()) return false;
  for (size_t i = 0; i < pp.size(); ++i) {
    if (!glob(pp[i], ff[i])) return false;
  }
  return true;
}

nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelizePlan& plan) {
  DT_CHECK(mesh.defined(), "[parallelize_module] the mesh is an empty handle");
  const auto modules = module.named_modules();
  std::vector<std::vector<std::pair<std::string, nn::Module*>>> matches(plan.size());
  for (size_t e = 0; e < plan.size(); ++e) {
    DT_CHECK(plan[e].style != nullptr, "[parallelize_module] plan entry '%s' has no style",
             plan[e].fqn);
    DT_CHECK(!plan[e].fqn.empty(),
             "[parallelize_module] plan entry with an empty name (use the overload taking a "
             "style to parallelize the module itself)");
    for (const auto& [name, m] : modules) {
      if (!name.empty() && fqn_matches(plan[e].fqn, name)) matches[e].emplace_back(name, m);
    }
    DT_CHECK(!matches[e].empty(), "[parallelize_module] plan entry '%s' matches no submodule",
             plan[e].fqn);
  }
  for (size_t e = 0; e < plan.size(); ++e) {
    for (const auto& [name, m] : matches[e]) plan[e].style->apply(*m, name, mesh);
  }
  for (const auto& [name, m] : modules) m->check_parallel();
  return module;
}

nn::Module& parallelize_module(nn::Module& module, const DeviceMesh& mesh,
                               const ParallelStyle& style) {
  DT_CHECK(mesh.defined(), "[parallelize_module] the mesh is an empty handle");
  style.apply(module, "", mesh);
  for (const auto& [name, m] : module.named_modules()) m->check_parallel();
  return module;
}

}  // namespace dtensor

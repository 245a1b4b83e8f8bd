#include "dtensor/parallel/data_parallel/grouping.h"

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include <algorithm>

#include "dtensor/tensor/shape.h"

namespace dtensor {

namespace {

std::string parent_of(const std::string& fqn) {
  const size_t dot = fqn.rfind('.');
  return dot == std::string::npos ? std::string() : fqn.substr(0, dot);
}

// The longest common dotted prefix of two module names ("" is the root).
std::string common_ancestor(const std::string& a, const std::string& b) {
  std::string out;
  size_t i = 0;
  while (true) {
    const size_t ea = a.find('.', i);
    const size_t eb = b.find('.', i);
    const std::string pa = a.substr(i, ea == std::string::npos ? std::string::npos : ea - i);
    const std::string pb = b.substr(i, eb == std::string::npos ? std::string::npos : eb - i);
    if (pa.empty() || pa != pb) return out;
    out = a.substr(0, ea == std::string::npos ? a.size() : ea);
    if (ea == std::string::npos || eb == std::string::npos) return out;
    i = ea + 1;
  }
}

}  // namespace

std::vector<Unit> group_modules(nn::Module& root, const GroupingPolicy& policy) {
  const auto modules = root.named_modules();  // pre-order
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < modules.size(); ++i) index[modules[i].first] = i;

  // Units, bottom-up (reverse pre-order visits children before parents).
  std::vector<bool> is_unit(modules.size(), false);
  std::vector<int64_t> remaining(modules.size(), 0);
  for (size_t j = modules.size(); j-- > 0;) {
    const auto& [fqn, m] = modules[j];
    for (const auto& [n, p] : m->own_parameters()) remaining[j] += p.numel();
    const bool listed = std::find(policy.module_types.begin(), policy.module_types.end(),
                                  m->type_name()) != policy.module_types.end();
    is_unit[j] =
        j == 0 || listed || (policy.min_unit_numel > 0 && remaining[j] >= policy.min_unit_numel);
    if (j > 0 && !is_unit[j]) remaining[index.at(parent_of(fqn))] += remaining[j];
  }

  // Distinct parameters (tied ones share their autograd state), in pre-order of first use.
  struct Found {
    UnitParam param;
    std::string ancestor;  // lowest common ancestor of the modules holding it
  };
  std::vector<Found> found;
  absl::flat_hash_map<const void*, size_t> by_identity;
  for (const auto& [fqn, m] : modules) {
    for (const auto& [n, p] : m->own_parameters()) {
      const void* id = p.autograd_meta() != nullptr
                           ? static_cast<const void*>(p.autograd_meta().get())
                           : static_cast<const void*>(&p);
      auto [it, fresh] = by_identity.emplace(id, found.size());
      if (fresh) {
        found.push_back({{fqn.empty() ? n : fqn + "." + n, {}}, fqn});
      } else {
        found[it->second].ancestor = common_ancestor(found[it->second].ancestor, fqn);
      }
      found[it->second].param.slots.push_back({m, n});
    }
  }

  std::vector<Unit> units;
  absl::flat_hash_map<size_t, size_t> unit_of_module;
  for (size_t j = 0; j < modules.size(); ++j) {
    if (!is_unit[j]) continue;
    unit_of_module[j] = units.size();
    units.push_back({modules[j].first, modules[j].second, {}});
  }
  for (Found& f : found) {
    size_t j = index.at(f.ancestor);
    while (!is_unit[j]) j = index.at(parent_of(modules[j].first));
    units[unit_of_module.at(j)].params.push_back(std::move(f.param));
  }
  return units;
}

std::string grouping_str(const std::vector<Unit>& units) {
  std::string out;
  for (const Unit& u : units) {
    int64_t numel = 0;
    std::string names;
    for (const UnitParam& p : u.params) {
      const DTensor& t = p.slots.front().module->param(p.slots.front().name);
      numel += t.numel();
      absl::StrAppend(&names, names.empty() ? "" : ", ", p.fqn, " ", shape_str(t.shape()));
      if (p.slots.size() > 1) absl::StrAppend(&names, " (tied x", p.slots.size(), ")");
    }
    absl::StrAppendFormat(&out, "unit '%s' (%s): %d params, %d elements: %s\n",
                          u.fqn.empty() ? "<root>" : u.fqn, u.module->type_name(), u.params.size(),
                          numel, names);
  }
  return out;
}

}  // namespace dtensor

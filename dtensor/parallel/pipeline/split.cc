#include "dtensor/parallel/pipeline/split.h"

#include <algorithm>
#include <map>

#include "dtensor/tensor/error.h"

namespace dtensor::pipelining {

namespace {

bool is_chain(const nn::Module& m) {
  return m.type_name() == "ModuleList";
}

void collect(const nn::ModulePtr& m, const std::string& prefix,
             std::vector<std::pair<std::string, nn::ModulePtr>>& out) {
  for (const auto& [name, child] : m->named_children()) {
    const std::string fqn = prefix.empty() ? name : prefix + "." + name;
    if (is_chain(*child)) {
      collect(child, fqn, out);
    } else {
      out.emplace_back(fqn, child);
    }
  }
}

// A container with no forward of its own: keeps a stage's units under their original names.
class Container : public nn::Module {
 public:
  std::string type_name() const override { return "PipelineContainer"; }
};

// One stage: runs its units in order; its module tree mirrors the model's FQNs.
class StageModule : public nn::Module {
 public:
  explicit StageModule(const std::vector<std::pair<std::string, nn::ModulePtr>>& units) {
    for (const auto& [fqn, unit] : units) units_.push_back(register_at_fqn(*this, fqn, unit));
  }
  std::string type_name() const override { return "PipelineStage"; }
  DTensor forward(const DTensor& x) override {
    DTensor h = x;
    for (const nn::ModulePtr& u : units_) h = (*u)(h);
    return h;
  }

 private:
  std::vector<nn::ModulePtr> units_;
};

std::string unit_names(const std::vector<std::pair<std::string, nn::ModulePtr>>& units) {
  std::string s;
  for (const auto& [fqn, unit] : units) s += (s.empty() ? "" : ", ") + fqn;
  return s;
}

std::vector<nn::ModulePtr> cut(const std::vector<std::pair<std::string, nn::ModulePtr>>& units,
                               const std::vector<size_t>& starts) {
  std::vector<nn::ModulePtr> stages;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : units.size();
    stages.push_back(
        std::make_shared<StageModule>(std::vector<std::pair<std::string, nn::ModulePtr>>(
            units.begin() + starts[i], units.begin() + end)));
  }
  return stages;
}

}  // namespace

nn::ModulePtr register_at_fqn(nn::Module& root, const std::string& fqn, nn::ModulePtr module) {
  nn::Module* parent = &root;
  size_t start = 0;
  for (size_t dot = fqn.find('.'); dot != std::string::npos; dot = fqn.find('.', start)) {
    const std::string part = fqn.substr(start, dot - start);
    nn::ModulePtr next;
    for (const auto& [name, child] : parent->named_children()) {
      if (name == part) next = child;
    }
    if (!next) next = parent->register_module(part, std::make_shared<Container>());
    parent = next.get();
    start = dot + 1;
  }
  parent->register_module(fqn.substr(start), module);
  return module;
}

std::vector<std::pair<std::string, nn::ModulePtr>> chain_units(const nn::ModulePtr& model) {
  DT_CHECK(model != nullptr, "[pipeline_split] the model is null");
  std::vector<std::pair<std::string, nn::ModulePtr>> units;
  if (is_chain(*model)) {
    collect(model, "", units);
  } else {
    units.emplace_back("", model);
  }
  return units;
}

std::vector<nn::ModulePtr> pipeline_split(const nn::ModulePtr& model,
                                          const std::vector<std::string>& split_points) {
  const auto units = chain_units(model);
  std::vector<size_t> starts{0};
  for (const std::string& point : split_points) {
    // A nested ModuleList's name splits before its first unit.
    size_t at = units.size();
    for (size_t i = 0; i < units.size(); ++i) {
      const std::string& fqn = units[i].first;
      if (fqn == point || fqn.rfind(point + ".", 0) == 0) {
        at = i;
        break;
      }
    }
    DT_CHECK(at < units.size(),
             "[pipeline_split] split point '%s' is not a unit of the chain (units: %s)",
             point.c_str(), unit_names(units).c_str());
    DT_CHECK(at > starts.back(),
             "[pipeline_split] split point '%s' (unit %zu) would leave an empty stage: split "
             "points must follow the execution order, with none at the first unit '%s'",
             point.c_str(), at, units[0].first.c_str());
    starts.push_back(at);
  }
  return cut(units, starts);
}

std::vector<nn::ModulePtr> pipeline_split(const nn::ModulePtr& model, int64_t n_stages) {
  const auto units = chain_units(model);
  const auto n = static_cast<int64_t>(units.size());
  DT_CHECK(n_stages >= 1 && n_stages <= n,
           "[pipeline_split] cannot cut a chain of %lld units (%s) into %lld stages",
           static_cast<long long>(n), unit_names(units).c_str(), static_cast<long long>(n_stages));
  // Stage s starts at floor(s * n / k): no stage is empty (n >= k), sizes differ by at most one,
  // and the larger stages come last (the first holds the cheap embedding in a language model).
  std::vector<size_t> starts;
  for (int64_t s = 0; s < n_stages; ++s) {
    starts.push_back(static_cast<size_t>(s * n / n_stages));
  }
  return cut(units, starts);
}

}  // namespace dtensor::pipelining

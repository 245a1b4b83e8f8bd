#include "dtensor/nn/container.h"

#include "dtensor/tensor/error.h"

namespace dtensor::nn {

Sequential::Sequential(std::vector<ModulePtr> modules) {
  for (ModulePtr& m : modules) append(std::move(m));
}

Sequential::Sequential(std::vector<std::pair<std::string, ModulePtr>> named_modules) {
  for (auto& [name, m] : named_modules) {
    for (const auto& [n, c] : named_children()) {
      DT_CHECK(n != name, "[Sequential] two modules are named '%s'", name);
    }
    register_module(std::move(name), std::move(m));
  }
}

Sequential& Sequential::append(ModulePtr module) {
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

const ModulePtr& Sequential::ptr(int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  DT_CHECK(i >= -n && i < n, "[Sequential] index %d is out of range for a Sequential of %d modules",
           i, n);
  return named_children()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

DTensor Sequential::forward(const DTensor& x) {
  DTensor y = x;
  for (const auto& [name, m] : named_children()) y = (*m)(y);
  return y;
}

ModuleDict::ModuleDict(std::vector<std::pair<std::string, ModulePtr>> modules) {
  for (auto& [name, m] : modules) insert(std::move(name), std::move(m));
}

ModuleDict& ModuleDict::insert(std::string name, ModulePtr module) {
  register_module(std::move(name), std::move(module));
  return *this;
}

bool ModuleDict::contains(std::string_view name) const {
  for (const auto& [n, c] : named_children()) {
    if (n == name) return true;
  }
  return false;
}

Module& ModuleDict::operator[](std::string_view name) const {
  for (const auto& [n, c] : named_children()) {
    if (n == name) return *c;
  }
  DT_FAIL("[ModuleDict] no module named '%s'", name);
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> k;
  for (const auto& [n, c] : named_children()) k.push_back(n);
  return k;
}

ParameterList::ParameterList(const std::vector<DTensor>& values) {
  for (const DTensor& v : values) append(v);
}

ParameterList& ParameterList::append(const DTensor& value) {
  register_parameter(std::to_string(size()), value);
  return *this;
}

const DTensor& ParameterList::operator[](int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  DT_CHECK(i >= -n && i < n,
           "[ParameterList] index %d is out of range for a ParameterList of %d parameters", i, n);
  return own_parameters()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

ParameterDict::ParameterDict(const std::vector<std::pair<std::string, DTensor>>& values) {
  for (const auto& [name, v] : values) insert(name, v);
}

ParameterDict& ParameterDict::insert(std::string name, const DTensor& value) {
  if (has_param(name)) {
    set_parameter(name, value);
  } else {
    register_parameter(std::move(name), value);
  }
  return *this;
}

std::vector<std::string> ParameterDict::keys() const {
  std::vector<std::string> k;
  for (const auto& [n, p] : own_parameters()) k.push_back(n);
  return k;
}

}  // namespace dtensor::nn

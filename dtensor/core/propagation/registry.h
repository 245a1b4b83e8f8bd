// The op registry: OpInfo (schema info, strategy, meta function) per op, looked up by name
// once and then held by reference. Registration is explicit: each op family exposes
// register_<family>_ops(Registry&) and the ops layer's register_all() calls them all once
// (no static initialisers that a static link could drop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/core/propagation/op_schema.h"

namespace dtensor {

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registers `info` under info.name and assigns its OpId (small, unique in the process).
  // Throws "[Registry] op 'add' is already registered" and "[Registry] op 'x' needs a strategy
  // and a meta function". The returned reference stays valid for the registry's lifetime.
  // Thread-safe (dispatch holds OpInfo references, so it never looks ops up by name).
  const OpInfo& add(OpInfo info);
  // nullptr when no op has this name.
  const OpInfo* find(std::string_view name) const;
  // Throws "[Registry] unknown op 'x'".
  const OpInfo& get(std::string_view name) const;
  const OpInfo& get(OpId id) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  int64_t size() const;
  std::vector<std::string> names() const;  // in registration (OpId) order

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide registry. The ops layer fills it; tests may add test-only ops under their own
// names.
Registry& op_registry();

}  // namespace dtensor

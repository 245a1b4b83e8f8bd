#include "dtensor/collectives/comm_debug.h"

#include <absl/strings/str_format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "dtensor/tensor/detail/capture_hook.h"

namespace dtensor {

namespace detail {
std::atomic<int> g_alive_modes{0};
}  // namespace detail

namespace {
// Innermost active scope on this thread; each scope links to the one it was opened inside.
thread_local CommDebugMode* t_top = nullptr;

// The labels pushed by higher layers while a scope is alive (see comm_debug.h).
struct Labels {
  std::string module;  // dotted path
  std::string op;
  bool backward = false;
};
thread_local Labels t_labels;

std::string_view phase_name(bool backward) {
  return backward ? "backward" : "forward";
}
}  // namespace

CommDebugMode::CommDebugMode() : parent_(t_top) {
  t_top = this;
  detail::g_alive_modes.fetch_add(1, std::memory_order_relaxed);
}

CommDebugMode::~CommDebugMode() {
  // Scopes are RAII objects, so they close in reverse order of opening.
  if (t_top == this) t_top = parent_;
  detail::g_alive_modes.fetch_sub(1, std::memory_order_relaxed);
}

// Silence hides this thread's scopes (and restores them): record() then finds none.
CommDebugMode::Silence::Silence() : saved_(std::exchange(t_top, nullptr)) {}
CommDebugMode::Silence::~Silence() {
  t_top = saved_;
}

bool CommDebugMode::active() {
  return t_top != nullptr;
}

std::string CommDebugMode::current_module() {
  return t_labels.module;
}

int64_t CommDebugMode::count(CollectiveKind kind) const {
  return counts_[static_cast<size_t>(kind)];
}

int64_t CommDebugMode::total_count() const {
  int64_t total = 0;
  for (int64_t c : counts_) total += c;
  return total;
}

int64_t CommDebugMode::bytes(CollectiveKind kind) const {
  return bytes_[static_cast<size_t>(kind)];
}

std::string CommDebugMode::str() const {
  std::string out;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    if (counts_[k] == 0) continue;
    if (!out.empty()) out += ", ";
    absl::StrAppendFormat(&out, "%s: %d (%d B)", collective_name(static_cast<CollectiveKind>(k)),
                          counts_[k], bytes_[k]);
  }
  return out.empty() ? "no collectives" : out;
}

void CommDebugMode::record(CollectiveKind kind, int64_t bytes, int64_t ranks) {
  // Every collective passes here: a step being captured notes it (or refuses it when no op or
  // redistribute issued it, since replay would not run it).
  detail::note_collective_in_capture(collective_name(kind), bytes);
  for (CommDebugMode* m = t_top; m != nullptr; m = m->parent_) m->add(kind, bytes, ranks);
}

void CommDebugMode::add(CollectiveKind kind, int64_t bytes, int64_t ranks) {
  if (ranks == 1) single_rank_count_ += 1;
  add_attributed(kind, 1, bytes, t_labels.module.empty() ? std::string("Global") : t_labels.module,
                 t_labels.backward, t_labels.op.empty() ? std::string("-") : t_labels.op);
}

void CommDebugMode::add_attributed(CollectiveKind kind, int64_t count, int64_t bytes,
                                   const std::string& module, bool backward,
                                   const std::string& op) {
  counts_[static_cast<size_t>(kind)] += count;
  bytes_[static_cast<size_t>(kind)] += bytes;
  for (Record& r : records_) {
    if (r.kind == kind && r.backward == backward && r.module == module && r.op == op) {
      r.count += count;
      r.bytes += bytes;
      return;
    }
  }
  records_.push_back(Record{module, backward, op, kind, count, bytes});
}

CommDebugMode::Attribution CommDebugMode::current_attribution() {
  return Attribution{t_labels.module, t_labels.op, t_labels.backward};
}

void CommDebugMode::replay(const std::vector<Record>& records) {
  for (CommDebugMode* m = t_top; m != nullptr; m = m->parent_) {
    for (const Record& r : records) {
      m->add_attributed(r.kind, r.count, r.bytes, r.module, r.backward, r.op);
    }
  }
}

int64_t CommDebugMode::single_rank_count() const {
  return single_rank_count_;
}

int64_t CommDebugMode::module_count(std::string_view module, bool backward,
                                    CollectiveKind kind) const {
  int64_t n = 0;
  for (const Record& r : records_) {
    const bool inside = r.module == module || (r.module.size() > module.size() &&
                                               r.module.compare(0, module.size(), module) == 0 &&
                                               r.module[module.size()] == '.');
    if (inside && r.backward == backward && r.kind == kind) n += r.count;
  }
  return n;
}

std::string CommDebugMode::table() const {
  std::string out = absl::StrFormat("%-48s %-8s %-24s %-14s %6s %12s\n", "module", "phase", "op",
                                    "collective", "count", "bytes");
  for (const Record& r : records_) {
    const int depth = static_cast<int>(std::count(r.module.begin(), r.module.end(), '.'));
    const std::string name = std::string(2 * depth, ' ') + r.module;
    absl::StrAppendFormat(&out, "%-48s %-8s %-24s %-14s %6d %12d\n", name, phase_name(r.backward),
                          r.op, collective_name(r.kind), r.count, r.bytes);
  }
  absl::StrAppendFormat(&out, "total: %s\n", str());
  return out;
}

std::string CommDebugMode::json(int indent) const {
  nlohmann::json totals = nlohmann::json::object();
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    if (counts_[k] == 0) continue;
    totals[std::string(collective_name(static_cast<CollectiveKind>(k)))] = {{"count", counts_[k]},
                                                                            {"bytes", bytes_[k]}};
  }
  nlohmann::json records = nlohmann::json::array();
  for (const Record& r : records_) {
    records.push_back({{"module", r.module},
                       {"phase", std::string(phase_name(r.backward))},
                       {"op", r.op},
                       {"collective", std::string(collective_name(r.kind))},
                       {"count", r.count},
                       {"bytes", r.bytes}});
  }
  return nlohmann::json{{"totals", totals}, {"records", records}}.dump(indent);
}

CommDebugMode::ModuleScope::ModuleScope(std::string_view name) {
  if (!active()) return;
  pushed_ = true;
  if (!t_labels.module.empty()) t_labels.module += '.';
  t_labels.module += name;
}

CommDebugMode::ModuleScope::~ModuleScope() {
  if (!pushed_) return;
  const size_t dot = t_labels.module.rfind('.');
  t_labels.module.resize(dot == std::string::npos ? 0 : dot);
}

void CommDebugMode::OpScope::push(std::string_view op) {
  // Another thread's mode keeps the counter above zero; this thread labels only under its own.
  if (!active()) return;
  saved_.emplace();
  saved_->op = std::exchange(t_labels.op, std::string(op));
}

CommDebugMode::OpScope::OpScope(std::string_view op, std::string module_path, bool backward)
    : OpScope(op) {
  if (!saved_) return;
  saved_->swapped_module = true;
  saved_->module = std::exchange(t_labels.module, std::move(module_path));
  saved_->backward = std::exchange(t_labels.backward, backward);
}

void CommDebugMode::OpScope::pop() {
  t_labels.op = std::move(saved_->op);
  if (saved_->swapped_module) {
    t_labels.module = std::move(saved_->module);
    t_labels.backward = saved_->backward;
  }
  saved_.reset();
}

}  // namespace dtensor

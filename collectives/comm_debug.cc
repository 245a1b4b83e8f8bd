#include "collectives/comm_debug.h"

#include <absl/strings/str_format.h>

namespace dtensor {

namespace {
// Innermost active scope on this thread; each scope links to the one it was opened inside.
thread_local CommDebugMode* t_top = nullptr;
}  // namespace

CommDebugMode::CommDebugMode() : parent_(t_top) {
  t_top = this;
}

CommDebugMode::~CommDebugMode() {
  // Scopes are RAII objects, so they close in reverse order of opening.
  if (t_top == this) t_top = parent_;
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
  for (CommDebugMode* m = t_top; m != nullptr; m = m->parent_) {
    m->counts_[static_cast<size_t>(kind)] += 1;
    m->bytes_[static_cast<size_t>(kind)] += bytes;
    if (ranks == 1) m->single_rank_count_ += 1;
  }
}

int64_t CommDebugMode::single_rank_count() const {
  return single_rank_count_;
}

}  // namespace dtensor

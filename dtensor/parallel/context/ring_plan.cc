#include "dtensor/parallel/context/ring_plan.h"

#include "dtensor/tensor/shape.h"

namespace dtensor::detail {

std::vector<CpSegment> cp_segments(int64_t seq_len, int64_t cp, int64_t rank, bool load_balance) {
  std::vector<CpSegment> out;
  if (!load_balance) {
    const ChunkBounds b = chunk_bounds(seq_len, cp, rank);
    if (b.size > 0) out.push_back({0, b.offset, b.size});
    return out;
  }
  const int64_t chunk = seq_len / (2 * cp);
  if (chunk == 0) return out;
  out.push_back({0, rank * chunk, chunk});
  out.push_back({chunk, (2 * cp - 1 - rank) * chunk, chunk});
  return out;
}

int64_t cp_local_length(int64_t seq_len, int64_t cp, int64_t rank, bool load_balance) {
  int64_t n = 0;
  for (const CpSegment& s : cp_segments(seq_len, cp, rank, load_balance)) n += s.length;
  return n;
}

namespace {

// Merges `b` into `a` when both are unmasked and together cover one rectangle of (q rows, keys).
bool try_merge(RingCall& a, const RingCall& b) {
  if (a.causal || b.causal) return false;
  if (a.q_start == b.q_start && a.q_len == b.q_len && a.k_start + a.k_len == b.k_start) {
    a.k_len += b.k_len;
    return true;
  }
  if (a.k_start == b.k_start && a.k_len == b.k_len && a.q_start + a.q_len == b.q_start) {
    a.q_len += b.q_len;
    return true;
  }
  return false;
}

}  // namespace

std::vector<RingCall> ring_calls(const std::vector<CpSegment>& q, const std::vector<CpSegment>& k,
                                 bool causal) {
  std::vector<RingCall> calls;
  if (!causal) {
    int64_t lq = 0, lk = 0;
    for (const CpSegment& s : q) lq += s.length;
    for (const CpSegment& s : k) lk += s.length;
    if (lq > 0 && lk > 0) calls.push_back({0, lq, 0, lk, false, 0});
    return calls;
  }
  // Segments are listed in local-row order, so q-major pairs come out sorted for merging.
  for (const CpSegment& qs : q) {
    for (const CpSegment& ks : k) {
      const int64_t last_q = qs.global_start + qs.length - 1;
      const int64_t last_k = ks.global_start + ks.length - 1;
      if (last_q < ks.global_start) continue;  // every key after every query
      RingCall c{qs.local_start, qs.length, ks.local_start, ks.length, false, 0};
      if (last_k > qs.global_start) {  // some key after some query: masked
        c.causal = true;
        c.q_offset = qs.global_start - ks.global_start;
      }
      calls.push_back(c);
    }
  }
  // Merge until nothing changes (at most four calls under load balancing).
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t i = 0; i < calls.size() && !merged; ++i) {
      for (size_t j = 0; j < calls.size() && !merged; ++j) {
        if (i != j && try_merge(calls[i], calls[j])) {
          calls.erase(calls.begin() + static_cast<std::ptrdiff_t>(j));
          merged = true;
        }
      }
    }
  }
  return calls;
}

}  // namespace dtensor::detail

// The pure planning half of ring attention (context_parallel.h): which global positions each
// rank of the cp ring holds, and which local attention calls one q block makes against one k/v
// block. No communication and no tensors, so tests check it without processes (as redistribute's
// planner is checked).
#pragma once

#include <cstdint>
#include <vector>

namespace dtensor::detail {

// A run of consecutive global sequence positions held by one rank: local rows
// [local_start, local_start + length) are global positions [global_start, + length).
struct CpSegment {
  int64_t local_start = 0;
  int64_t global_start = 0;
  int64_t length = 0;
};

// The segments of cp rank `rank`'s block of a sequence of `seq_len` positions over `cp` ranks.
// load_balance: the head-tail layout (seq_len split into 2 * cp equal chunks, rank r holding
// chunks r and 2 * cp - 1 - r, PyTorch's context_parallel; seq_len must be a multiple of
// 2 * cp, checked by the caller); otherwise the torch.chunk block of Shard (uneven allowed).
// Segments of zero length are dropped.
std::vector<CpSegment> cp_segments(int64_t seq_len, int64_t cp, int64_t rank, bool load_balance);

// Rows held by cp rank `rank` (the sum of its segments' lengths).
int64_t cp_local_length(int64_t seq_len, int64_t cp, int64_t rank, bool load_balance);

// One local attention call: q rows [q_start, + q_len) of the q block against k/v rows
// [k_start, + k_len) of the k/v block; causal with the first q row at global offset q_offset
// from the first key (attention.h's AttentionParams::q_offset), or every key visible.
struct RingCall {
  int64_t q_start = 0, q_len = 0;
  int64_t k_start = 0, k_len = 0;
  bool causal = false;
  int64_t q_offset = 0;
  bool operator==(const RingCall&) const = default;
};

// The calls of q block `q` against k/v block `k`: without causality one call over both blocks;
// with it, one per pair of segments whose keys some query sees (a pair whose keys all lie after
// its queries is skipped, one whose keys all lie at or before its first query needs no mask),
// then unmasked calls that share their q rows and have adjacent keys (or share their keys and
// have adjacent q rows) merged into one. Under load balancing each step then costs one half
// block of work on every rank: the causal work is even.
std::vector<RingCall> ring_calls(const std::vector<CpSegment>& q, const std::vector<CpSegment>& k,
                                 bool causal);

}  // namespace dtensor::detail

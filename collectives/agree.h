// Agreeing on an error across the ranks of a communicator, for checks that depend on data only
// one rank holds (an index out of range in one shard, an allocation that fails on one rank):
// instead of that rank raising alone while the others wait in (or pair with) the next
// collective, every rank raises the same error.
//
//   std::string err;
//   try { check_my_shard(...); } catch (const dtensor::Error& e) { err = e.what(); }
//   dtensor::agree_on_error(*comm, err);  // raises on every rank if any rank failed
//
// Where the op already has a collective, folding a flag into it costs nothing extra; this is
// the fallback (one small all_gather, computed inline by the consistency check).
#pragma once

#include <string_view>

#include "collectives/communicator.h"

namespace dtensor {

// Collective over `comm`: each rank passes the message of the error it found (empty: none).
// Returns normally on every rank when no rank found one; otherwise throws dtensor::Error on
// every rank with the first failing rank's message, followed by " (raised on rank R; ranks that
// failed: R, S)" (world ranks). Costs one all_gather of one int64 per rank when nobody failed,
// plus a broadcast of the message when someone did.
void agree_on_error(Communicator& comm, std::string_view local_error);

}  // namespace dtensor

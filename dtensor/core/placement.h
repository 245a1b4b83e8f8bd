// Placements: how a DTensor's data is laid out along ONE mesh dim.
//   Shard(d)      the tensor is split along tensor dim d (torch.chunk rule, uneven allowed)
//   Replicate()   every rank of the mesh dim holds the whole (local) value
//   Partial(op)   every rank holds a partial value; the logical value is op over the ranks
// Placements are immutable values: comparable, hashable (Abseil), printable ("S(0)", "R",
// "P(sum)").
#pragma once

#include <absl/container/inlined_vector.h>
#include <absl/types/span.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "dtensor/collectives/communicator.h"

namespace dtensor {

// Which of the three placements a Placement is.
enum class PlacementKind : uint8_t { kReplicate, kShard, kPartial };

// How a DTensor is laid out along one mesh dim: Replicate, Shard(dim) or Partial(op). A value
// type: comparable, hashable, printable.
class Placement {
 public:
  constexpr Placement() = default;  // Replicate

  // Replicate() / Shard(dim) (the free functions below are the usual spellings).
  static constexpr Placement replicate() { return Placement(); }
  static constexpr Placement shard(int64_t dim) {
    Placement p;
    p.kind_ = PlacementKind::kShard;
    p.dim_ = dim;
    return p;
  }
  // op must be sum, avg, max or min; throws otherwise.
  static Placement partial(ReduceOp op);

  // The kind, and tests for it (is_shard(dim): a Shard of exactly that tensor dim).
  constexpr PlacementKind kind() const { return kind_; }
  constexpr bool is_replicate() const { return kind_ == PlacementKind::kReplicate; }
  constexpr bool is_shard() const { return kind_ == PlacementKind::kShard; }
  constexpr bool is_shard(int64_t dim) const { return is_shard() && dim_ == dim; }
  constexpr bool is_partial() const { return kind_ == PlacementKind::kPartial; }
  // Tensor dim of a Shard (may be negative until normalised by a DTensorSpec).
  constexpr int64_t dim() const { return dim_; }
  // Reduce op of a Partial.
  constexpr ReduceOp reduce_op() const { return op_; }

  // Same kind, and the same dim (Shard) or reduce op (Partial).
  constexpr bool operator==(const Placement& o) const {
    return kind_ == o.kind_ && (kind_ != PlacementKind::kShard || dim_ == o.dim_) &&
           (kind_ != PlacementKind::kPartial || op_ == o.op_);
  }
  std::string str() const;  // "S(0)", "R", "P(sum)"

  template <typename H>
  friend H AbslHashValue(H h, const Placement& p) {
    return H::combine(std::move(h), static_cast<uint8_t>(p.kind_),
                      p.is_shard() ? p.dim_ : int64_t{-1},
                      p.is_partial() ? static_cast<uint8_t>(p.op_) : uint8_t{0});
  }

 private:
  PlacementKind kind_ = PlacementKind::kReplicate;
  int64_t dim_ = 0;
  ReduceOp op_ = ReduceOp::kSum;
};

// PyTorch's spellings: {dt::Shard(0), dt::Replicate(), dt::Partial()}.
constexpr Placement Shard(int64_t dim) {
  return Placement::shard(dim);
}
constexpr Placement Replicate() {
  return Placement::replicate();
}
inline Placement Partial(ReduceOp op = ReduceOp::kSum) {
  return Placement::partial(op);
}

// One placement per mesh dim.
using Placements = absl::InlinedVector<Placement, 4>;
// Any contiguous run of placements (braces, std::vector, Placements): what the API takes.
using PlacementSpan = absl::Span<const Placement>;

std::string placements_str(PlacementSpan placements);  // "[S(0), R]"

}  // namespace dtensor

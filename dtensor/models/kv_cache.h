// KVCache: the keys and values of the tokens a decoder has already seen, kept per layer so a
// decode step computes attention for its new tokens only (issue 43 item 4).
//
// Each layer has two buffers [B, n_kv_heads, max_len, head_dim], allocated once at
// construction (no growth by concatenation while decoding) with the mesh and placements of the
// layer's k / v (e.g. Shard(1) over the tensor-parallel ranks when the k/v projections are
// colwise, Replicate when the kv heads are replicated across them): a rank holds only its
// shard and update() writes it with no communication. The sequence dim (2) is never sharded,
// so [0, position) of the global buffer is [0, position) of every local one.
//
// Use (nn::Llama drives it; models::generate builds one with Llama::make_cache):
//   auto cache = model.make_cache(batch, max_len);
//   model.forward(prompt, &cache);          // prefill: positions [0, P)
//   model.forward(next_token, &cache);      // decode: position P, then P + 1, ...
// Inside a forward each attention layer calls update(layer, k_new, v_new) and gets the keys /
// values of [0, position() + S_new); after the last layer the model calls advance(S_new).
// Inference only: what update() returns carries no gradient to k_new / v_new.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dtensor/core/distributed_tensor.h"

namespace dtensor::models {

class KVCache {
 public:
  // Buffers for `num_layers` layers of [batch, num_kv_heads, max_len, head_dim] in `dtype`,
  // zero-filled, as DTensors on `mesh` with `placements` (the sequence dim 2 must not be
  // sharded; throws "[KVCache] ..." otherwise or for a negative size).
  KVCache(int64_t num_layers, int64_t batch, int64_t num_kv_heads, int64_t max_len,
          int64_t head_dim, DType dtype, const DeviceMesh& mesh, PlacementSpan placements);

  // Writes k_new / v_new [B, num_kv_heads, S_new, head_dim] at positions [position(),
  // position() + S_new) of `layer`'s buffers and returns the keys and values over
  // [0, position() + S_new), views of the buffers with their mesh and placements. Throws
  // "[KVCache::update] ..." when the layer is out of range, the positions pass max_len, or
  // k_new / v_new differ from the buffers in shape (but the sequence dim), dtype, mesh or
  // placements. No communication.
  std::pair<DTensor, DTensor> update(int64_t layer, const DTensor& k_new, const DTensor& v_new);
  // Moves position() on by `n` tokens (after every layer has been updated with them).
  void advance(int64_t n);
  // The number of tokens cached so far (the position of the next token).
  int64_t position() const { return position_; }
  // Forgets the cached tokens (position 0); the buffers are kept.
  void reset() { position_ = 0; }

  int64_t num_layers() const { return static_cast<int64_t>(k_.size()); }
  int64_t max_len() const { return max_len_; }
  int64_t batch() const { return batch_; }
  // Layer `layer`'s whole key / value buffer (for inspection and tests).
  const DTensor& key_buffer(int64_t layer) const { return k_.at(static_cast<size_t>(layer)); }
  const DTensor& value_buffer(int64_t layer) const { return v_.at(static_cast<size_t>(layer)); }

 private:
  std::vector<DTensor> k_, v_;
  int64_t batch_, max_len_;
  int64_t position_ = 0;
};

}  // namespace dtensor::models

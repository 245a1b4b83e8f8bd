#include "dtensor/models/kv_cache.h"

#include <string_view>

#include "dtensor/core/factories.h"
#include "dtensor/tensor/error.h"

namespace dtensor::models {

KVCache::KVCache(int64_t num_layers, int64_t batch, int64_t num_kv_heads, int64_t max_len,
                 int64_t head_dim, DType dtype, const DeviceMesh& mesh, PlacementSpan placements)
    : batch_(batch), max_len_(max_len) {
  DT_CHECK(num_layers >= 0 && batch >= 0 && num_kv_heads > 0 && max_len >= 0 && head_dim > 0,
           "[KVCache] num_layers %d, batch %d, num_kv_heads %d, max_len %d, head_dim %d: expected "
           "positive head counts and sizes, >= 0 layers, batch and max_len",
           num_layers, batch, num_kv_heads, max_len, head_dim);
  for (const Placement& p : placements) {
    // A sharded sequence dim would make [0, position) a different range on every rank.
    DT_CHECK(!p.is_shard(2) && !p.is_partial(),
             "[KVCache] placements %s: the sequence dim 2 must not be sharded and no placement "
             "may be Partial",
             placements_str(placements));
  }
  const int64_t shape[] = {batch, num_kv_heads, max_len, head_dim};
  for (int64_t i = 0; i < num_layers; ++i) {
    k_.push_back(zeros(shape, mesh, placements, dtype));
    v_.push_back(zeros(shape, mesh, placements, dtype));
  }
}

namespace {

// new_ [B, H, S_new, D] fits `buf` [B, H, max_len, D]: the same dims but the sequence, dtype,
// mesh and placements.
void check_fits(const DTensor& buf, const DTensor& fresh, std::string_view what, int64_t layer) {
  DT_CHECK(fresh.defined() && fresh.dim() == 4 && fresh.size(0) == buf.size(0) &&
               fresh.size(1) == buf.size(1) && fresh.size(3) == buf.size(3),
           "[KVCache::update] layer %d: %s has shape %s, expected [%d, %d, S_new, %d] (the "
           "cache's batch, kv heads and head_dim)",
           layer, what, fresh.defined() ? shape_str(fresh.shape()) : std::string("undefined"),
           buf.size(0), buf.size(1), buf.size(3));
  DT_CHECK(fresh.dtype() == buf.dtype(), "[KVCache::update] layer %d: %s is %s, the cache holds %s",
           layer, what, dtype_name(fresh.dtype()), dtype_name(buf.dtype()));
  DT_CHECK(fresh.device_mesh() == buf.device_mesh() && fresh.placements() == buf.placements(),
           "[KVCache::update] layer %d: %s is on mesh %s with placements %s, the cache on mesh "
           "%s with %s (build the cache with the model's make_cache after parallelizing it)",
           layer, what, fresh.device_mesh().str(), placements_str(fresh.placements()),
           buf.device_mesh().str(), placements_str(buf.placements()));
}

}  // namespace

std::pair<DTensor, DTensor> KVCache::update(int64_t layer, const DTensor& k_new,
                                            const DTensor& v_new) {
  DT_CHECK(layer >= 0 && layer < num_layers(),
           "[KVCache::update] layer %d is outside the cache's %d layers", layer, num_layers());
  const DTensor& kb = k_[static_cast<size_t>(layer)];
  const DTensor& vb = v_[static_cast<size_t>(layer)];
  check_fits(kb, k_new, "k_new", layer);
  check_fits(vb, v_new, "v_new", layer);
  const int64_t n = k_new.size(2);
  DT_CHECK(v_new.size(2) == n, "[KVCache::update] layer %d: k_new has %d positions, v_new %d",
           layer, n, v_new.size(2));
  DT_CHECK(position_ + n <= max_len_,
           "[KVCache::update] layer %d: positions [%d, %d) pass the cache's max_len %d", layer,
           position_, position_ + n, max_len_);
  const int64_t end = position_ + n;
  auto write_and_view = [&](const DTensor& buf, const DTensor& fresh) {
    // Local writes: the sequence dim is whole on every rank (see the constructor).
    buf.to_local().narrow(2, position_, n).copy_(fresh.to_local());
    const int64_t shape[] = {buf.size(0), buf.size(1), end, buf.size(3)};
    return DTensor::from_local(buf.to_local().narrow(2, 0, end), buf.device_mesh(),
                               buf.placements(), /*run_check=*/false, shape);
  };
  return {write_and_view(kb, k_new), write_and_view(vb, v_new)};
}

void KVCache::advance(int64_t n) {
  DT_CHECK(n >= 0 && position_ + n <= max_len_,
           "[KVCache::advance] %d tokens from position %d pass the cache's max_len %d", n,
           position_, max_len_);
  position_ += n;
}

}  // namespace dtensor::models

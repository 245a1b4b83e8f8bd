#include "dtensor/rng/rng_tracker.h"

#include <absl/strings/str_format.h>

#include <bit>
#include <string>
#include <vector>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

void check_random_placements(const DTensorSpec& spec, std::string_view op) {
  DT_CHECK(!spec.has_partial(),
           "[%s] random ops on a Partial DTensor are not supported (placements %s): redistribute "
           "to Replicate or Shard first",
           op, placements_str(spec.placements()));
}

Generator& OffsetBasedRNGTracker::generator(Device device) const {
  return gen_ != nullptr ? *gen_ : default_generator(device);
}

RNGRegion OffsetBasedRNGTracker::reserve(const DTensorSpec& spec, const RandomSpec& rspec,
                                         Device device, std::string_view op) {
  check_random_placements(spec, op);
  check_random_spec(rspec, op);
  Generator& gen = generator(device);
  if (gen_ == nullptr) gen.claim_thread(op);  // the default generators' thread rule
  const GeneratorState s = gen.reserve_state(words_to_reserve(rspec, spec.numel()));
  return RNGRegion{s.seed, s.offset, spec.local_shard()};
}

namespace {

void check_local(const Tensor& local, const LocalShard& shard, const DTensorSpec& spec,
                 std::string_view op, std::string_view what) {
  DT_CHECK(local.defined(), "[%s] the local %s is undefined", op, what);
  DT_CHECK(local.sizes() == shard.shape,
           "[%s] the local %s has shape %s but %s implies a local shard of shape %s", op, what,
           shape_str(local.sizes()), spec.str(), shape_str(shard.shape));
}

}  // namespace

void OffsetBasedRNGTracker::fill(const Tensor& local, const DTensorSpec& spec,
                                 const RandomSpec& rspec, std::string_view op) {
  DT_CHECK(local.defined(), "[%s] the local tensor is undefined", op);
  check_random_placements(spec, op);
  check_random_spec(rspec, op);
  check_local(local, spec.local_shard(), spec, op, "tensor");
  check_no_internal_overlap(local, op);
  local.storage().bump_version();  // an in-place write (Storage::version)
  const RNGRegion r = reserve(spec, rspec, local.device(), op);
  fill_random(local, rspec, r.seed, r.offset, spec.shape(), r.shard.offset);
}

void OffsetBasedRNGTracker::dropout(const Tensor& input, const Tensor& out, const Tensor& mask,
                                    const DTensorSpec& spec, double p, std::string_view op) {
  DT_CHECK(input.defined(), "[%s] the local input is undefined", op);
  const RandomSpec rspec = RandomSpec::dropout_mask(spec.dtype(), p);
  check_random_placements(spec, op);
  check_random_spec(rspec, op);
  check_local(input, spec.local_shard(), spec, op, "input");
  const RNGRegion r = reserve(spec, rspec, input.device(), op);
  dropout_block(input, out, mask, p, r.seed, r.offset, spec.shape(), r.shard.offset);
}

OffsetBasedRNGTracker& default_rng_tracker() {
  static OffsetBasedRNGTracker* tracker = new OffsetBasedRNGTracker();  // usable at exit
  return *tracker;
}

void manual_seed(uint64_t seed, const DeviceMesh& mesh) {
  DT_CHECK(mesh.defined(), "[manual_seed] the device mesh is an empty handle (expected a mesh)");
  if (mesh.contains_me()) {
    const Device device = local_device(mesh);
    // Gathering along the last mesh dim first, then the one before, ... leaves every rank with
    // the seeds of the whole mesh in row-major mesh order (the order of mesh.ranks()).
    std::vector<int64_t> seeds{std::bit_cast<int64_t>(seed)};
    for (int64_t d = mesh.ndim() - 1; d >= 0; --d) {
      if (mesh.size(d) == 1) continue;  // one member: nothing to gather
      const CommunicatorPtr& comm = mesh.communicator(d);
      const int64_t n = static_cast<int64_t>(seeds.size());
      const Tensor in = from_vector(seeds, {n}, device);
      const Tensor out = empty({n * comm->size()}, TensorOptions(DType::kInt64, device));
      comm->all_gather(out, in)->wait();
      seeds = out.to_vector<int64_t>();
    }
    bool same = true;
    for (int64_t s : seeds) same = same && s == seeds[0];
    if (!same) {
      constexpr size_t kMaxListed = 16;
      std::string list;
      const std::vector<int>& ranks = mesh.ranks();
      for (size_t i = 0; i < seeds.size() && i < kMaxListed; ++i) {
        absl::StrAppendFormat(&list, "%srank %d: %d", i == 0 ? "" : ", ", ranks[i],
                              std::bit_cast<uint64_t>(seeds[i]));
      }
      if (seeds.size() > kMaxListed) list += ", ...";
      DT_FAIL("[manual_seed] ranks passed different seeds: %s", list);
    }
  }
  manual_seed(seed);
}

}  // namespace dtensor

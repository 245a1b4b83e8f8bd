#include "dtensor/rng/dtensor_random.h"

#include <memory>
#include <string_view>

#include "dtensor/autograd/function.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/autograd/saved_versions.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/tensor/creation.h"

namespace dtensor {

namespace {

OffsetBasedRNGTracker tracker_for(Generator* gen) {
  return gen != nullptr ? OffsetBasedRNGTracker(gen) : default_rng_tracker();
}

// A new DTensor of `shape` on `mesh` filled by `rspec`.
DTensor generate(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements,
                 const RandomSpec& rspec, Generator* gen, std::string_view op) {
  check_random_spec(rspec, op);
  auto spec = std::make_shared<const DTensorSpec>(
      mesh, placements, TensorMeta(Shape(shape.begin(), shape.end()), rspec.dtype), op);
  check_random_placements(*spec, op);
  const Device device = local_device(mesh);
  Tensor local = empty(spec->local_shard().shape, TensorOptions(rspec.dtype, device));
  tracker_for(gen).fill(local, *spec, rspec, op);
  return DTensor(std::move(local), std::move(spec));
}

DTensor generate_(const DTensor& t, const RandomSpec& rspec, Generator* gen, std::string_view op) {
  DT_CHECK(t.defined(), "[%s] the DTensor is undefined", op);
  tracker_for(gen).fill(t.to_local(), t.spec(), rspec, op);
  return t;
}

void check_dropout_input(const DTensor& input, double p) {
  DT_CHECK(input.defined(), "[dropout] input is undefined");
  check_random_placements(input.spec(), "dropout");
  DT_CHECK(is_floating(input.dtype()), "[dropout] input must be floating, got %s",
           dtype_name(input.dtype()));
  DT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] expects p in [0, 1], got p=%g", p);
}

}  // namespace

DTensor rand(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements, DType dtype,
             Generator* gen) {
  return generate(shape, mesh, placements, RandomSpec::uniform(dtype), gen, "rand");
}

DTensor randn(IntSpan shape, const DeviceMesh& mesh, PlacementSpan placements, DType dtype,
              Generator* gen) {
  return generate(shape, mesh, placements, RandomSpec::normal(dtype), gen, "randn");
}

DTensor randint(int64_t low, int64_t high, IntSpan shape, const DeviceMesh& mesh,
                PlacementSpan placements, DType dtype, Generator* gen) {
  return generate(shape, mesh, placements, RandomSpec::randint(dtype, low, high), gen, "randint");
}

DTensor bernoulli(IntSpan shape, double p, const DeviceMesh& mesh, PlacementSpan placements,
                  DType dtype, Generator* gen) {
  return generate(shape, mesh, placements, RandomSpec::bernoulli(dtype, p), gen, "bernoulli");
}

DTensor uniform_(const DTensor& t, double low, double high, Generator* gen) {
  DT_CHECK(t.defined(), "[uniform_] the DTensor is undefined");
  return generate_(t, RandomSpec::uniform(t.dtype(), low, high), gen, "uniform_");
}

DTensor normal_(const DTensor& t, double mean, double stddev, Generator* gen) {
  DT_CHECK(t.defined(), "[normal_] the DTensor is undefined");
  return generate_(t, RandomSpec::normal(t.dtype(), mean, stddev), gen, "normal_");
}

DTensor bernoulli_(const DTensor& t, double p, Generator* gen) {
  DT_CHECK(t.defined(), "[bernoulli_] the DTensor is undefined");
  return generate_(t, RandomSpec::bernoulli(t.dtype(), p), gen, "bernoulli_");
}

DTensor random_(const DTensor& t, int64_t low, int64_t high, Generator* gen) {
  DT_CHECK(t.defined(), "[random_] the DTensor is undefined");
  return generate_(t, RandomSpec::randint(t.dtype(), low, high), gen, "random_");
}

namespace {

// The output of a dropout recorded for backward: its gradient is g * mask / (1 - p), the mask
// saved from forward (the random draw is not repeated).
DTensor record_dropout(const DTensor& input, DTensor out, DTensor mask, double p) {
  const DTensor* in[] = {&input};
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  // dropout_with_mask hands the mask to the caller: a write to it must make backward raise.
  const autograd::SavedVersions saved{mask.to_local()};
  return autograd::record_linear_function(
      "DropoutBackward", in, std::move(out),
      [mask = std::move(mask), scale, saved](absl::Span<const DTensor> g) -> DTensorList {
        saved.check("DropoutBackward");
        return {g[0] * cast(mask, g[0].dtype()) * scale};
      });
}

}  // namespace

DTensor dropout(const DTensor& input, double p, bool train, Generator* gen) {
  check_dropout_input(input, p);
  if (!train || p == 0.0) return input;
  if (autograd::grad_enabled() && input.requires_grad()) {
    DTensorDropoutResult r = dropout_with_mask(input, p, train, gen);
    return r.output;
  }
  const Tensor& in = input.to_local();
  Tensor out = empty(in.sizes(), TensorOptions(in.dtype(), in.device()));
  tracker_for(gen).dropout(in, out, Tensor(), input.spec(), p, "dropout");
  return DTensor(std::move(out), input.spec_ptr());
}

DTensorDropoutResult dropout_with_mask(const DTensor& input, double p, bool train, Generator* gen) {
  check_dropout_input(input, p);
  const Tensor& in = input.to_local();
  auto mask_spec = std::make_shared<const DTensorSpec>(
      input.spec().with_meta(TensorMeta(input.shape(), DType::kBool), "dropout"));
  if (!train || p == 0.0) {
    return {input, DTensor(full(in.sizes(), true, TensorOptions(DType::kBool, in.device())),
                           std::move(mask_spec))};
  }
  Tensor out = empty(in.sizes(), TensorOptions(in.dtype(), in.device()));
  Tensor mask = empty(in.sizes(), TensorOptions(DType::kBool, in.device()));
  tracker_for(gen).dropout(in, out, mask, input.spec(), p, "dropout");
  DTensor mask_dt(std::move(mask), std::move(mask_spec));
  return {record_dropout(input, DTensor(std::move(out), input.spec_ptr()), mask_dt, p), mask_dt};
}

DTensor rand_like(const DTensor& like, Generator* gen) {
  DT_CHECK(like.defined(), "[rand_like] the DTensor is undefined (expected a DTensor)");
  return rand(like.shape(), like.device_mesh(), without_partial(like.spec()), like.dtype(), gen);
}

DTensor randn_like(const DTensor& like, Generator* gen) {
  DT_CHECK(like.defined(), "[randn_like] the DTensor is undefined (expected a DTensor)");
  return randn(like.shape(), like.device_mesh(), without_partial(like.spec()), like.dtype(), gen);
}

}  // namespace dtensor

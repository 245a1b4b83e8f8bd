#include "dtensor/rng/random.h"

#include <string_view>

namespace dtensor {

namespace {

Generator& pick(Generator* gen, Device device) {
  return gen != nullptr ? *gen : default_generator(device);
}

// Generates `t` (the whole tensor) from spec, reserving its words on the generator. Checks `t`
// first: the in-place fillers build `spec` from t.dtype(), which an undefined tensor answers.
Tensor generate(const Tensor& t, const RandomSpec& spec, Generator* gen, std::string_view op) {
  DT_CHECK(t.defined(), "[%s] the tensor is undefined", op);
  check_random_spec(spec, op);
  check_no_internal_overlap(t, op);
  t.storage().bump_version();  // an in-place write (Storage::version)
  const GeneratorState s = pick(gen, t.device()).reserve_state(words_to_reserve(spec, t.numel()));
  const Shape zero(t.dim(), 0);
  fill_random(t, spec, s.seed, s.offset, t.sizes(), zero);
  return t;
}

}  // namespace

Tensor rand(IntSpan shape, TensorOptions opts, Generator* gen) {
  return generate(empty(shape, opts), RandomSpec::uniform(opts.dtype), gen, "rand");
}

Tensor randn(IntSpan shape, TensorOptions opts, Generator* gen) {
  return generate(empty(shape, opts), RandomSpec::normal(opts.dtype), gen, "randn");
}

Tensor randint(int64_t low, int64_t high, IntSpan shape, TensorOptions opts, Generator* gen) {
  const RandomSpec spec = RandomSpec::randint(opts.dtype, low, high);
  check_random_spec(spec, "randint");
  return generate(empty(shape, opts), spec, gen, "randint");
}

Tensor bernoulli(IntSpan shape, double p, TensorOptions opts, Generator* gen) {
  const RandomSpec spec = RandomSpec::bernoulli(opts.dtype, p);
  check_random_spec(spec, "bernoulli");
  return generate(empty(shape, opts), spec, gen, "bernoulli");
}

Tensor uniform_(const Tensor& t, double low, double high, Generator* gen) {
  return generate(t, RandomSpec::uniform(t.dtype(), low, high), gen, "uniform_");
}

Tensor normal_(const Tensor& t, double mean, double stddev, Generator* gen) {
  return generate(t, RandomSpec::normal(t.dtype(), mean, stddev), gen, "normal_");
}

Tensor bernoulli_(const Tensor& t, double p, Generator* gen) {
  return generate(t, RandomSpec::bernoulli(t.dtype(), p), gen, "bernoulli_");
}

Tensor random_(const Tensor& t, int64_t low, int64_t high, Generator* gen) {
  return generate(t, RandomSpec::randint(t.dtype(), low, high), gen, "random_");
}

DropoutResult dropout_with_mask(const Tensor& input, double p, bool train, Generator* gen) {
  DT_CHECK(input.defined(), "[dropout] input is undefined");
  DT_CHECK(is_floating(input.dtype()), "[dropout] input must be floating, got %s",
           dtype_name(input.dtype()));
  DT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] expects p in [0, 1], got p=%g", p);
  if (!train || p == 0.0) {
    return {input, full(input.sizes(), true, TensorOptions(DType::kBool, input.device()))};
  }
  const RandomSpec spec = RandomSpec::dropout_mask(input.dtype(), p);
  const GeneratorState s =
      pick(gen, input.device()).reserve_state(words_to_reserve(spec, input.numel()));
  DropoutResult r{empty(input.sizes(), {input.dtype(), input.device()}),
                  empty(input.sizes(), {DType::kBool, input.device()})};
  const Shape zero(input.dim(), 0);
  dropout_block(input, r.output, r.mask, p, s.seed, s.offset, input.sizes(), zero);
  return r;
}

Tensor dropout(const Tensor& input, double p, bool train, Generator* gen) {
  DT_CHECK(input.defined(), "[dropout] input is undefined");
  DT_CHECK(is_floating(input.dtype()), "[dropout] input must be floating, got %s",
           dtype_name(input.dtype()));
  DT_CHECK(p >= 0.0 && p <= 1.0, "[dropout] expects p in [0, 1], got p=%g", p);
  if (!train || p == 0.0) return input;
  const RandomSpec spec = RandomSpec::dropout_mask(input.dtype(), p);
  const GeneratorState s =
      pick(gen, input.device()).reserve_state(words_to_reserve(spec, input.numel()));
  Tensor out = empty(input.sizes(), {input.dtype(), input.device()});
  const Shape zero(input.dim(), 0);
  dropout_block(input, out, Tensor(), p, s.seed, s.offset, input.sizes(), zero);
  return out;
}

}  // namespace dtensor

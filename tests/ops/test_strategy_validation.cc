// Strategy validation (PyTorch's _ops/strategy_validation.py): for every registered op, every
// sample call it registers, and every mesh, each candidate the engine can expand from the op's
// strategy rows (every row, the Partial rows its linearity adds and the all-Replicate row, on
// every mesh dim) is run: the inputs are laid out as the candidate says, the op's kernel runs on
// each rank's shards with the KernelContext dispatch would give it, and the output, gathered,
// must equal the kernel on the full tensors. A wrong row cannot hide: the engine is not asked
// which candidate is cheapest. An op with a data-dependent output shape (masked_select) takes
// its output's shape from the kernel's result, as dispatch does (data_dependent_output_spec).
//
// Partial inputs are split adversarially, not "value on one rank, zeros elsewhere" (that split
// would let relu pass a Partial(sum) row): every rank holds a random integer share whose
// reduction is the value. Inputs are integer-valued float64, so the splits and sums are exact.
//
// Linearity is checked both ways (linear_in): an op whose math is linear in some inputs on every
// sample (real-valued probes) must have the Partial(sum) row its Linearity would add, unless
// kLinearWithoutRow says why not, so dropping the linearity of make_op(name, inputs, linearity)
// fails here; and an op declared linear must be linear on real values (integer-valued shares let
// a floor declared kLinear pass the candidates).
#include <absl/strings/str_join.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/sharding_propagation.h"
#include "dtensor/ops/ops_registry.h"
#include "examples/l2_normalize_op.h"
#include "tests/common/op_samples.h"
#include "tests/common/ops_dtensor_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::DTensor;
using dt::DTensorSpec;
using dt::Placement;
using dt::Placements;
using dt::Shape;
using dt::Tensor;

namespace {

// A full input: integers in [low, high] drawn from `seed` (the same on every rank).
Tensor make_full(const dt::SampleInput& in, uint64_t seed) {
  return tt::sample_values(in, seed, /*reals=*/false);
}

// One rank's share of `value` on a Partial mesh dim of `n` ranks (this rank is `k`): shares
// whose sum / mean / max / min over the n ranks is exactly `value`.
std::vector<double> partial_share(const std::vector<double>& value, dt::ReduceOp op, int64_t n,
                                  int64_t k, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> noise(-3, 3), gap(0, 3);
  std::vector<double> out(value.size());
  for (size_t e = 0; e < value.size(); ++e) {
    // Every rank draws every rank's share of element e, so the shares agree across ranks.
    std::vector<double> share(static_cast<size_t>(n));
    const int64_t exact = static_cast<int64_t>(e + seed) % n;  // who holds the extreme
    double rest = 0;
    for (int64_t r = 0; r < n; ++r) {
      switch (op) {
        case dt::ReduceOp::kSum:
        case dt::ReduceOp::kAvg:
          share[r] = static_cast<double>(noise(gen));
          rest += share[r];
          break;
        case dt::ReduceOp::kMax:
          share[r] = value[e] - (r == exact ? 0.0 : static_cast<double>(gap(gen)));
          break;
        default:  // min
          share[r] = value[e] + (r == exact ? 0.0 : static_cast<double>(gap(gen)));
          break;
      }
    }
    if (op == dt::ReduceOp::kSum) share[n - 1] += value[e] - rest;  // sum of shares == value
    if (op == dt::ReduceOp::kAvg) {
      // mean == value: shares value + d_r with sum d_r == 0.
      share[n - 1] -= rest;
      for (double& s : share) s += value[e];
    }
    out[e] = share[static_cast<size_t>(k)];
  }
  return out;
}

// This rank's local tensor of `full` laid out as `placements` (Shard chunks; Partial shares,
// nested in mesh-dim order).
Tensor lay_out(const Tensor& full, const dt::DeviceMesh& mesh, const Placements& placements,
               uint64_t seed) {
  const Shape& coord = mesh.get_coordinate();
  Placements sharded = placements;
  for (Placement& p : sharded) {
    if (p.is_partial()) p = dt::Replicate();
  }
  const dt::LocalShard sh =
      dt::compute_local_shape_and_offset(full.shape(), mesh.shape(), coord, sharded);
  Tensor piece = full;
  for (int64_t d = 0; d < full.dim(); ++d) piece = piece.narrow(d, sh.offset[d], sh.shape[d]);
  std::vector<double> v = piece.contiguous().to_vector<double>();
  for (int64_t m = 0; m < mesh.ndim(); ++m) {
    if (!placements[m].is_partial()) continue;
    v = partial_share(v, placements[m].reduce_op(), mesh.size(m), coord[m], seed * 31 + m);
  }
  return dt::from_vector<double>(v, sh.shape).to(full.dtype());
}

// The op's kernel on the full inputs (the self mesh: one rank, everything replicated).
dt::DTensorList reference(const dt::OpInfo& op, const std::vector<Tensor>& full,
                          absl::Span<const dt::ArgValue> args) {
  std::vector<DTensor> in;
  for (const Tensor& t : full) in.push_back(dt::local_dtensor(t.clone()));
  std::vector<const DTensor*> ptrs;
  for (const DTensor& t : in) ptrs.push_back(&t);
  return dt::dispatch_sharded(op, ptrs, args);
}

// Whether the op's math is linear in the inputs listed in `probe` (jointly) on one sample, found
// on the full tensors with real-valued inputs (integer values would let floor or round pass):
// those inputs are set to x, y, x + y and -3 x in turn (the other floating inputs hold other real
// values, the integer and bool ones keep `full`), and every output
// must be floating and satisfy f(x + y) = f(x) + f(y) and f(-3 x) = -3 f(x), with no NaN (kZero:
// every output is zero or empty, which proves nothing either way). Such an op may take
// Partial(sum) in those inputs (Replicate in the others) and give Partial(sum) outputs: the row
// its declared linearity adds.
enum class Probe { kNo, kYes, kZero };
Probe linear_in(const dt::OpInfo& op, const dt::OpSample& call, const std::vector<Tensor>& full,
                const std::vector<int64_t>& probe, uint64_t seed) {
  std::vector<Tensor> base = full;  // real values in the other floating inputs too
  for (size_t i = 0; i < full.size(); ++i) {
    if (dt::is_floating(full[i].dtype())) {
      base[i] = tt::sample_values(call.inputs[i], seed + 1000 + i, /*reals=*/true);
    }
  }
  std::vector<Tensor> x = base, y = base, sum = base, scaled = base;
  for (int64_t i : probe) {
    const dt::SampleInput& in = call.inputs[static_cast<size_t>(i)];
    x[i] = tt::sample_values(in, seed + 2 * i, /*reals=*/true);
    y[i] = tt::sample_values(in, seed + 2 * i + 1, /*reals=*/true);
    std::vector<double> a = x[i].to_vector<double>(), b = y[i].to_vector<double>();
    std::vector<double> c = a;
    for (size_t e = 0; e < a.size(); ++e) {
      b[e] += a[e];
      c[e] *= -3;
    }
    sum[i] = dt::from_vector<double>(b, in.meta.shape).to(in.meta.dtype);
    scaled[i] = dt::from_vector<double>(c, in.meta.shape).to(in.meta.dtype);
  }
  dt::DTensorList fx, fy, fsum, fscaled;
  try {
    fx = reference(op, x, call.args);
    fy = reference(op, y, call.args);
    fsum = reference(op, sum, call.args);
    fscaled = reference(op, scaled, call.args);
  } catch (const dt::Error&) {
    return Probe::kNo;  // the op refuses such inputs (a domain check): not linear there
  }
  bool nonzero = false;
  for (size_t o = 0; o < fx.size(); ++o) {
    const dt::DType dtype = fx[o].to_local().dtype();
    if (!dt::is_floating(dtype) || fsum[o].to_local().sizes() != fx[o].to_local().sizes()) {
      return Probe::kNo;
    }
    // Rounding to the dtype of x + y and -3 x, and of the kernel's own sums.
    const double tol = dtype == dt::kFloat64 ? 1e-9 : dtype == dt::kFloat32 ? 1e-4 : 3e-2;
    const std::vector<double> a = fx[o].to_local().to_vector<double>();
    const std::vector<double> b = fy[o].to_local().to_vector<double>();
    const std::vector<double> ab = fsum[o].to_local().to_vector<double>();
    const std::vector<double> a3 = fscaled[o].to_local().to_vector<double>();
    for (size_t e = 0; e < a.size(); ++e) {
      const double scale = 1 + std::abs(a[e]) + std::abs(b[e]);
      if (!(std::abs(ab[e] - a[e] - b[e]) <= tol * scale) ||
          !(std::abs(a3[e] + 3 * a[e]) <= 3 * tol * scale)) {
        return Probe::kNo;  // also for NaN
      }
      nonzero |= a[e] != 0;
    }
  }
  return nonzero ? Probe::kYes : Probe::kZero;
}

// Ops whose math is linear in some inputs on every sample but that register no Partial(sum) row
// there, on purpose (linear_in finds them; the test fails on any other, and on an entry here
// that no longer shows up, so the list cannot go stale).
const std::map<std::string, std::string> kLinearWithoutRow = {
    {"where (in self, other)",
     "linear in both values with the condition fixed; PyTorch 2.15 declares no linearity either"},
    {"xlogy (in self)",
     "x log y is linear in x except that xlogy(0, y) is 0 where y is 0 or NaN: shares summing "
     "to 0 there would give NaN"},
    {"nan_to_num (in self)",
     "the identity on finite values only: a share holding NaN or inf is replaced alone"},
    {"cast (in self)",
     "deliberate: PyTorch 2.15's _to_copy keeps Partial(sum / avg) unless it casts floating to "
     "integer or anything to bool; dtensor reduces first, since the sum of rounded shares is not "
     "the rounded sum (the single-device bits: docs/SEMANTICS.md, round 4)"},
    {"scatter (in self, src)", "linear in self and src together; PyTorch 2.15 has no Partial row"},
    {"index_put (in self, values)",
     "linear in self and values together; PyTorch 2.15 has no Partial row"},
    {"rms_norm (in weight)", "a weight is never Partial (parameters are Replicate or Shard)"},
    {"batch_norm_affine (in factors)",
     "the per-channel factors are never Partial (computed from Replicate statistics)"},
    {"binary_cross_entropy (in weight)", "a loss weight is never Partial"},
    {"nll_loss_backward (in weight)", "a loss weight is never Partial"},
};

// Whether `rows` (completed) hold [P(sum) ... | P(sum) on the `probe` inputs, R elsewhere].
bool has_partial_row(const dt::StrategyRows& rows, int64_t nout, int64_t nin,
                     const std::vector<int64_t>& probe) {
  Placements want(static_cast<size_t>(nout + nin), dt::Replicate());
  for (int64_t o = 0; o < nout; ++o) want[o] = dt::Partial();
  for (int64_t i : probe) want[nout + i] = dt::Partial();
  return std::find(rows.begin(), rows.end(), want) != rows.end();
}

std::vector<dt::DeviceMesh> meshes() {
  const int64_t w = dt::world_size();
  std::vector<dt::DeviceMesh> out = {tt::make_mesh({w})};
  out.push_back(tt::make_mesh(w % 2 == 0 ? tt::Ints{2, w / 2} : tt::Ints{1, w}));
  out.push_back(tt::make_mesh({w, 1}));  // a size-1 inner dim: every placement is a relabel
  return out;
}

// Whether any rank failed (so that a rank whose kernel threw does not leave the others waiting
// in the gather).
bool any_failed(const dt::DeviceMesh& world, bool failed) {
  Tensor flag = dt::full({1}, failed ? 1 : 0, dt::TensorOptions(dt::kInt64));
  world.communicator(0)->all_reduce(flag, dt::ReduceOp::kMax)->wait();
  return flag.to_vector<int64_t>()[0] != 0;
}

std::string describe(const dt::OpInfo& op, size_t sample, const dt::DeviceMesh& mesh,
                     const dt::PlacementStrategy& c) {
  std::string s = op.name + " sample " + std::to_string(sample) + " mesh " +
                  dt::shape_str(mesh.shape()) + " candidate";
  for (const Placements& p : c.placements) s += " " + dt::placements_str(p);
  return s;
}

}  // namespace

TEST_CASE("every strategy row of every registered op computes the op") {
  // A user-registered op (examples/l2_normalize_op.h, through register_op) is checked like
  // the library's own.
  l2_example::l2_normalize_op();
  const dt::Registry& reg = dt::registered_ops();
  const int64_t w = dt::world_size();
  const dt::DeviceMesh world = tt::make_mesh({w});
  int64_t ops = 0, samples = 0, candidates = 0, empty_candidates = 0;
  std::vector<std::string> missing;
  // Ops with a candidate that shards something, and those with one that leaves some rank an
  // empty shard of a non-empty input or output.
  std::set<std::string> sharding_ops, empty_shard_ops;
  // Every row an op's strategy registers must be checked numerically by some candidate of some
  // sample on some mesh: expand_rows drops a row whose Shard dim is out of range for the
  // sample, so a wrong row (a backward's placements in the wrong slots, say) would otherwise be
  // dropped in silence. op name -> rows registered, and rows checked.
  std::map<std::string, std::set<std::string>> registered_rows, checked_rows;
  // Ops whose math is linear in some inputs on every sample (linear_in) without the Partial(sum)
  // row that linearity gives on some sample: a dropped or missing Linearity in make_op, found
  // here and not only by the suites that happen to feed the op Partial inputs. Every sample must
  // agree, so that one whose reduced dim has one element (amax, logsumexp: the identity there)
  // does not make an op linear.
  std::vector<std::string> no_linear_row, declared_not_linear;
  std::set<std::string> exempt_found;  // the kLinearWithoutRow entries found
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.samples) {
      missing.push_back(name);
      continue;
    }
    const std::vector<dt::OpSample> calls = op.samples(w);
    if (calls.empty()) missing.push_back(name);
    ++ops;
    // Probed input set ("all": every floating input; else one input's index) -> whether the op
    // is linear there on every sample, and whether some sample's rows lack its Partial row.
    struct Linear {
      bool everywhere = true;  // no sample says kNo
      bool somewhere = false;  // some sample says kYes
      bool row_missing = false;
      std::string inputs;
    };
    std::map<std::string, Linear> linear;
    for (size_t si = 0; si < calls.size(); ++si) {
      const dt::OpSample& call = calls[si];
      ++samples;
      std::vector<Tensor> full;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        full.push_back(make_full(call.inputs[i], 1000 * si + i));
      }
      const dt::DTensorList want = reference(op, full, call.args);
      // The input sets the op's math may be linear in: all floating inputs together (add,
      // cat), and each one alone when there are several (mm, mul). An in-place op's output is
      // its first input, so only sets holding that input can give a row it may use.
      std::vector<int64_t> floating;
      for (size_t i = 0; i < full.size(); ++i) {
        if (dt::is_floating(full[i].dtype())) floating.push_back(static_cast<int64_t>(i));
      }
      std::vector<std::pair<std::string, std::vector<int64_t>>> linear_sets;
      if (!floating.empty() && !op.data_dependent_shape) {
        std::vector<std::pair<std::string, std::vector<int64_t>>> probes = {{"all", floating}};
        if (floating.size() > 1) {
          for (int64_t i : floating) probes.push_back({std::to_string(i), {i}});
        }
        for (const auto& [key, probe] : probes) {
          if (op.inplace && probe[0] != 0) continue;
          Linear& l = linear[key];
          if (l.inputs.empty()) {
            std::vector<std::string> inputs;
            for (int64_t i : probe) {
              inputs.push_back(static_cast<size_t>(i) < op.input_names.size()
                                   ? op.input_names[static_cast<size_t>(i)]
                                   : "input " + std::to_string(i));
            }
            l.inputs = absl::StrJoin(inputs, ", ");
          }
          const Probe r = linear_in(op, call, full, probe, 4243 * si);
          l.everywhere &= r != Probe::kNo;
          l.somewhere |= r == Probe::kYes;
          if (r == Probe::kYes) linear_sets.push_back({key, probe});
        }
      }
      for (const dt::DeviceMesh& mesh : meshes()) {
        // The candidates, as expand_to_full_mesh enumerates them.
        std::vector<DTensorSpec> specs;
        for (const Tensor& t : full) {
          specs.emplace_back(mesh, Placements(static_cast<size_t>(mesh.ndim()), dt::Replicate()),
                             dt::TensorMeta(t.shape(), t.dtype()));
        }
        std::vector<const DTensorSpec*> spec_ptrs;
        for (const DTensorSpec& s : specs) spec_ptrs.push_back(&s);
        const dt::OpSchema schema(op, spec_ptrs, call.args);
        const dt::OutputMetas metas = op.meta(schema);
        const int64_t nout = static_cast<int64_t>(metas.size());
        const int64_t nin = static_cast<int64_t>(full.size());
        const dt::StrategyRows registered = op.strategy(schema);
        for (const Placements& row : registered) {
          registered_rows[name].insert(dt::placements_str(row));
        }
        const dt::StrategyRows rows =
            dt::complete_rows(op.name, registered, nout, nin, op.linearity);
        for (const auto& [key, probe] : linear_sets) {
          linear[key].row_missing |= !has_partial_row(rows, nout, nin, probe);
        }
        std::vector<int64_t> ndims;
        for (const dt::TensorMeta& m : metas) ndims.push_back(static_cast<int64_t>(m.shape.size()));
        for (const Tensor& t : full) ndims.push_back(t.dim());
        for (const dt::PlacementStrategy& c : dt::expand_rows(rows, mesh.ndim(), ndims)) {
          if (op.inplace && c.placements[0] != c.placements[nout]) continue;  // never chosen
          bool bool_partial = false;
          for (int64_t i = 0; i < nin; ++i) {
            for (const Placement& p : c.placements[nout + i]) {
              bool_partial |= p.is_partial() && full[i].dtype() == dt::kBool;
            }
          }
          if (bool_partial) continue;  // a bool cannot be split into shares
          ++candidates;
          INFO(describe(op, si, mesh, c));
          for (int64_t m = 0; m < mesh.ndim(); ++m) {
            Placements row;
            for (const Placements& p : c.placements) row.push_back(p[m]);
            checked_rows[name].insert(dt::placements_str(row));
          }
          for (const Placements& p : c.placements) {
            for (const Placement& q : p) {
              if (q.is_shard()) sharding_ops.insert(name);
            }
          }
          bool empty_shard = false;
          for (int64_t o = 0; o < nout; ++o) {
            empty_shard |= tt::some_shard_empty(metas[o].shape, mesh, c.placements[o]);
          }
          for (int64_t i = 0; i < nin; ++i) {
            empty_shard |= tt::some_shard_empty(full[i].shape(), mesh, c.placements[nout + i]);
          }
          if (empty_shard) {
            ++empty_candidates;
            empty_shard_ops.insert(name);
          }
          // Inputs laid out as the candidate says.
          std::vector<DTensorSpec> in_specs;
          std::vector<Tensor> locals;
          for (int64_t i = 0; i < nin; ++i) {
            in_specs.emplace_back(mesh, c.placements[nout + i], specs[i].meta());
            locals.push_back(lay_out(full[i], mesh, c.placements[nout + i], 7919 * si + i));
          }
          std::vector<const DTensorSpec*> in_ptrs;
          for (const DTensorSpec& s : in_specs) in_ptrs.push_back(&s);
          const dt::OpSchema laid(op, in_ptrs, call.args);
          dt::OutputSharding sharding;
          for (int64_t o = 0; o < nout; ++o) {
            sharding.outputs.push_back(
                std::make_shared<const DTensorSpec>(mesh, c.placements[o], metas[o]));
          }
          std::vector<Tensor> outs(static_cast<size_t>(nout));
          std::string error;
          try {
            op.kernel(dt::KernelContext(laid, sharding, mesh.get_coordinate()), locals,
                      absl::MakeSpan(outs));
            for (int64_t o = 0; o < nout; ++o) {
              if (op.data_dependent_shape) {
                // The output's shape comes from the kernel's result (as dispatch takes it); the
                // values are compared with the reference below.
                sharding.outputs[o] =
                    dt::data_dependent_output_spec(op, o, outs[o], *sharding.outputs[o]);
                continue;
              }
              const Shape expected = sharding.outputs[o]->local_shard().shape;
              if (outs[o].shape() != expected || outs[o].dtype() != metas[o].dtype) {
                error = "output " + std::to_string(o) + " has local shape " +
                        dt::shape_str(outs[o].shape()) + ", expected " + dt::shape_str(expected);
              }
            }
          } catch (const dt::Error& e) {
            error = e.what();
          }
          CHECK(error == "");
          if (any_failed(world, !error.empty())) continue;
          for (int64_t o = 0; o < nout; ++o) {
            const Tensor got = DTensor(outs[o], sharding.outputs[o]).full_tensor();
            const Tensor& ref = want[o].to_local();
            const double tol = ref.dtype() == dt::kFloat64 ? 1e-9 : 1e-5;
            INFO("output " << o);
            CHECK(tt::same_values(got, ref, tol));
          }
        }
      }
    }
    for (const auto& [key, l] : linear) {
      if (!l.everywhere || !l.somewhere || !l.row_missing) continue;
      const std::string found = name + " (in " + l.inputs + ")";
      if (kLinearWithoutRow.count(found)) {
        exempt_found.insert(found);
      } else {
        no_linear_row.push_back(found);
      }
    }
    // The converse: the sets the declared linearity makes Partial must be linear on real
    // samples (integer-valued shares, as the candidates above use, let round or floor pass).
    std::vector<std::string> declared;
    if (op.linearity == dt::Linearity::kLinear) declared.push_back("all");
    if (op.linearity == dt::Linearity::kLinearInFirst) declared.push_back("0");
    if (op.linearity == dt::Linearity::kMultilinear) {
      for (const auto& [key, l] : linear) {
        if (key != "all") declared.push_back(key);
      }
    }
    for (std::string key : declared) {
      if (!linear.count(key) && linear.size() == 1) key = "all";  // one floating input
      const auto it = linear.find(key);
      if (it != linear.end() && !it->second.everywhere) {
        declared_not_linear.push_back(name + " (in " + it->second.inputs + ")");
      }
    }
  }
  INFO("ops without samples: " << absl::StrJoin(missing, ", "));
  CHECK(missing.empty());
  std::vector<std::string> unchecked;
  for (const auto& [name, regs] : registered_rows) {
    for (const std::string& row : regs) {
      if (!checked_rows[name].count(row)) unchecked.push_back(name + " row " + row);
    }
  }
  INFO(
      "strategy rows that no sample on any mesh checks (a Shard dim out of range for every "
      "sample: a wrong row, or one needing a sample): "
      << absl::StrJoin(unchecked, "; "));
  CHECK(unchecked.empty());
  INFO(
      "ops linear in some inputs (f(x + y) = f(x) + f(y), f(-3 x) = -3 f(x) on real samples) "
      "without the row [P(sum) | P(sum) there, R elsewhere] (declare the linearity in make_op "
      "or register the row): "
      << absl::StrJoin(no_linear_row, "; "));
  CHECK(no_linear_row.empty());
  std::vector<std::string> stale;
  for (const auto& [found, why] : kLinearWithoutRow) {
    if (!exempt_found.count(found)) stale.push_back(found);
  }
  INFO("kLinearWithoutRow entries no longer found linear without a row (remove them): "
       << absl::StrJoin(stale, "; "));
  CHECK(stale.empty());
  INFO(
      "ops declared linear in some inputs whose math is not (f(x + y) != f(x) + f(y) or "
      "f(-3 x) != -3 f(x) on a real sample): "
      << absl::StrJoin(declared_not_linear, "; "));
  CHECK(declared_not_linear.empty());
  // Every op, forward and backward, that can shard anything runs with an empty shard on some
  // rank (issue 39: the column-sharded embedding gradient failed on the rank whose block of
  // columns was empty). Needs two ranks: on one, no shard of a non-empty tensor is empty.
  if (w >= 2) {
    // On 2 ranks only a dim of one element leaves a rank empty, and view / reshape never shard
    // a size-1 dim (it holds no layout: PyTorch's singleton dims); they are covered from 3 ranks.
    const std::set<std::string> size_one_never_sharded = {"view", "reshape"};
    std::vector<std::string> without_empty;
    for (const std::string& name : sharding_ops) {
      if (w == 2 && size_one_never_sharded.count(name)) continue;
      if (!empty_shard_ops.count(name)) without_empty.push_back(name);
    }
    INFO("ops whose samples never leave a rank an empty shard: " << absl::StrJoin(without_empty,
                                                                                  ", "));
    CHECK(without_empty.empty());
  }
  if (dt::world_rank() == 0) {
    std::printf(
        "strategy validation: %lld ops, %lld sample calls, %lld candidates checked (%lld with an "
        "empty shard)\n",
        static_cast<long long>(ops), static_cast<long long>(samples),
        static_cast<long long>(candidates), static_cast<long long>(empty_candidates));
  }
  CHECK(candidates > 0);
}

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
#include <absl/strings/str_join.h>

#include <catch2/catch.hpp>
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
  for (const std::string& name : reg.names()) {
    const dt::OpInfo& op = reg.get(name);
    if (!op.samples) {
      missing.push_back(name);
      continue;
    }
    const std::vector<dt::OpSample> calls = op.samples(w);
    if (calls.empty()) missing.push_back(name);
    ++ops;
    for (size_t si = 0; si < calls.size(); ++si) {
      const dt::OpSample& call = calls[si];
      ++samples;
      std::vector<Tensor> full;
      for (size_t i = 0; i < call.inputs.size(); ++i) {
        full.push_back(make_full(call.inputs[i], 1000 * si + i));
      }
      const dt::DTensorList want = reference(op, full, call.args);
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

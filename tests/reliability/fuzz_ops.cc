// DTensor op fuzzer (mpirun). Each case draws an op (every op of the registry, plus the DTensor
// functions flatten and chunk, which compose registered ops), a mesh that fits the world, random
// input placements (R, S(d), P(sum|avg|max|min) built by distribute_tensor: the value on
// coordinate 0 and zeros elsewhere for sum, the value everywhere otherwise) and the op's inputs
// and arguments; the op on the DTensors must equal the op on the full tensors: bit for bit for
// data movement, within a dtype tolerance for math. When the local op rejects the arguments, the
// DTensor op must throw dtensor::Error too (on every rank, or the world agreement below hangs and
// the deadline ends the job).
//
// Inputs and arguments: an op of the table below draws its own (an input shape of 1-3 dims,
// sizes 0..2*world+3, a dtype the op accepts, random dims / shapes / sizes / scalars, and for
// binary elementwise ops a second input whose shape broadcasts against the first): the
// registry's sample calls fix those, so the table keeps them where it varies them. Every other
// registered op draws one of its sample calls (OpInfo::samples for this world: shapes that shard
// evenly, unevenly and emptily), in its registered dtypes or with its floating inputs in float32,
// with integer values in the sample's range, and runs through dispatch; its floating outputs are
// compared within the dtype tolerance, the others exactly. An in-place op's self is never
// Partial (no strategy of add_ keeps a Partial(max) self: that is refused, not fuzzed).
// Configuration: see fuzz_util.h; a failure prints the seed, the case index and the case.
#include <absl/strings/str_join.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/op_samples.h"
#include "tests/reliability/fuzz_util.h"

namespace dtensor::fuzz {
namespace {

struct Tol {
  double rtol;
  double atol;
};

Tol tolerance(DType d) {
  switch (d) {
    case kFloat64:
      return {1e-12, 1e-12};
    case kFloat32:
      return {1e-5, 1e-6};
    case kFloat16:
      return {2e-3, 2e-3};
    case kBFloat16:
      return {1.6e-2, 1.6e-2};
    default:
      return {0, 0};
  }
}

// The largest finite |x| (0 for none).
double largest_abs(const Tensor& x) {
  double m = 0;
  for (double v : x.to_vector<double>()) {
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

// One op application: the same call on full tensors (reference) and on DTensors.
struct Applied {
  std::string args;  // the drawn arguments, for the failure report
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> on_full;
  std::function<std::vector<DTensor>(const std::vector<DTensor>&)> on_dtensors;
};

struct OpEntry {
  std::string name;  // the registered op's name where there is one
  bool math;         // compare with tolerance (else bit-exact)
  bool floating_only;
  int inputs;  // 1 or 2 (the second is drawn by `second_shape`)
  std::function<Applied(Rng&, const Shape&)> draw;
  // Shape of the second input given the first (cat/stack), and the drawn dim.
  std::function<Shape(Rng&, const Shape&, int64_t)> second_shape = nullptr;
  // A registered op without a table entry: the op and its sample calls for this world (see the
  // file comment); `draw` is unused.
  const OpInfo* registered = nullptr;
  std::vector<OpSample> samples = {};
};

int64_t rdim(Rng& rng, int64_t nd) {
  return rng.uniform(0, nd - 1) - (rng.chance(20) ? nd : 0);
}

std::string ints(std::initializer_list<int64_t> v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

Applied one(std::string args, std::function<Tensor(const Tensor&)> l,
            std::function<DTensor(const DTensor&)> d) {
  return {std::move(args),
          [l](const std::vector<Tensor>& x) { return std::vector<Tensor>{l(x[0])}; },
          [d](const std::vector<DTensor>& x) { return std::vector<DTensor>{d(x[0])}; }};
}

// A random shape with the same numel: merge two adjacent dims, split one dim by a divisor, or
// flatten; occasionally an incompatible shape (the op must reject it everywhere).
Shape random_reshape(Rng& rng, const Shape& s) {
  const int64_t nd = static_cast<int64_t>(s.size());
  Shape out = s;
  const int64_t pick = rng.uniform(0, 9);
  if (pick == 0) return Shape{shape_numel(s) + 1};  // wrong numel
  if (pick <= 3 && nd >= 2) {
    const int64_t d = rng.uniform(0, nd - 2);
    out[d] = s[d] * s[d + 1];
    out.erase(out.begin() + d + 1);
    return out;
  }
  if (pick <= 7) {
    const int64_t d = rng.uniform(0, nd - 1);
    std::vector<int64_t> divisors;
    for (int64_t k = 1; k <= s[d]; ++k) {
      if (s[d] % k == 0) divisors.push_back(k);
    }
    if (divisors.empty()) return Shape{shape_numel(s)};
    const int64_t k = divisors[rng.uniform(0, static_cast<int64_t>(divisors.size()) - 1)];
    out[d] = k;
    out.insert(out.begin() + d + 1, s[d] / k);
    return out;
  }
  return Shape{shape_numel(s)};
}

// `op` with `args` through dispatch: on local DTensors of the full tensors (the reference) and on
// the distributed inputs.
Applied registered_call(const OpInfo& op, const ArgList& args) {
  Applied a;
  a.on_full = [&op, args](const std::vector<Tensor>& x) {
    std::vector<DTensor> in;
    for (const Tensor& t : x) in.push_back(local_dtensor(t.clone()));  // in-place ops write self
    std::vector<const DTensor*> ptrs;
    for (const DTensor& t : in) ptrs.push_back(&t);
    std::vector<Tensor> out;
    for (const DTensor& o : dispatch_multi(op, ptrs, args)) out.push_back(o.to_local());
    return out;
  };
  a.on_dtensors = [&op, args](const std::vector<DTensor>& x) {
    // A rank outside the mesh cannot know a data-dependent output's shape: dispatch refuses
    // there (OpInfo::data_dependent_shape), and such a rank has nothing to compare.
    if (op.data_dependent_shape && !x[0].device_mesh().contains_me()) {
      return std::vector<DTensor>{};
    }
    std::vector<const DTensor*> ptrs;
    for (const DTensor& t : x) ptrs.push_back(&t);
    const DTensorList out = dispatch_multi(op, ptrs, args);
    return std::vector<DTensor>(out.begin(), out.end());
  };
  return a;
}

// The table's ops, then every registered op the table does not hold, with its sample calls for
// `world` ranks.
std::vector<OpEntry> op_table(int world) {
  std::vector<OpEntry> t;
  t.push_back({"transpose", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t a = rdim(rng, nd), b = rdim(rng, nd);
                 return one(
                     "dims " + ints({a, b}),
                     [=](const Tensor& x) { return x.transpose(a, b).contiguous(); },
                     [=](const DTensor& x) { return transpose(x, a, b); });
               }});
  t.push_back({"permute", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 Shape perm;
                 for (int64_t i = 0; i < nd; ++i) perm.push_back(i);
                 for (int64_t i = nd - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform(0, i)]);
                 return one(
                     "dims " + shape_str(perm),
                     [=](const Tensor& x) { return x.permute(perm).contiguous(); },
                     [=](const DTensor& x) { return permute(x, perm); });
               }});
  t.push_back({"unsqueeze", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t d = rng.uniform(0, nd);
                 return one(
                     "dim " + std::to_string(d),
                     [=](const Tensor& x) { return x.unsqueeze(d).contiguous(); },
                     [=](const DTensor& x) { return unsqueeze(x, d); });
               }});
  t.push_back({"squeeze", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 if (rng.chance(30)) {
                   return one(
                       "all", [](const Tensor& x) { return x.squeeze().contiguous(); },
                       [](const DTensor& x) { return squeeze(x); });
                 }
                 const int64_t d = rdim(rng, nd);
                 return one(
                     "dim " + std::to_string(d),
                     [=](const Tensor& x) { return x.squeeze(d).contiguous(); },
                     [=](const DTensor& x) { return squeeze(x, d); });
               }});
  t.push_back({"flatten", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 int64_t a = rng.uniform(0, nd - 1), b = rng.uniform(0, nd - 1);
                 if (a > b) std::swap(a, b);
                 return one(
                     "dims " + ints({a, b}),
                     [=](const Tensor& x) { return x.flatten(a, b).contiguous(); },
                     [=](const DTensor& x) { return flatten(x, a, b); });
               }});
  t.push_back({"reshape", false, false, 1, [](Rng& rng, const Shape& s) {
                 const Shape to = random_reshape(rng, s);
                 return one(
                     "shape " + shape_str(to),
                     [=](const Tensor& x) { return x.reshape(to).contiguous(); },
                     [=](const DTensor& x) { return reshape(x, to); });
               }});
  t.push_back({"view", false, false, 1, [](Rng& rng, const Shape& s) {
                 const Shape to = random_reshape(rng, s);
                 return one(
                     "shape " + shape_str(to),
                     [=](const Tensor& x) { return x.view(to).contiguous(); },
                     [=](const DTensor& x) { return view(x, to); });
               }});
  t.push_back({"expand", false, false, 1, [](Rng& rng, const Shape& s) {
                 Shape to;
                 const int64_t lead = rng.uniform(0, 1);
                 for (int64_t i = 0; i < lead; ++i) to.push_back(rng.uniform(0, 3));
                 for (int64_t v : s) to.push_back(v == 1 ? rng.uniform(0, 4) : v);
                 return one(
                     "shape " + shape_str(to),
                     [=](const Tensor& x) { return x.expand(to).contiguous(); },
                     [=](const DTensor& x) { return expand(x, to); });
               }});
  t.push_back({"narrow", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t d = rng.uniform(0, nd - 1);
                 const int64_t start = rng.uniform(0, s[d]);
                 const int64_t len = rng.uniform(0, s[d] - start);
                 return one(
                     "dim, start, length " + ints({d, start, len}),
                     [=](const Tensor& x) { return x.narrow(d, start, len).contiguous(); },
                     [=](const DTensor& x) { return narrow(x, d, start, len); });
               }});
  t.push_back({"slice", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t d = rng.uniform(0, nd - 1);
                 const int64_t start = rng.uniform(0, s[d]);
                 const int64_t end = rng.uniform(start, s[d]);
                 const int64_t step = rng.uniform(1, 3);
                 return one(
                     "dim, start, end, step " + ints({d, start, end, step}),
                     [=](const Tensor& x) { return x.slice(d, start, end, step).contiguous(); },
                     [=](const DTensor& x) { return slice(x, d, start, end, step); });
               }});
  t.push_back({"select", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t nd = static_cast<int64_t>(s.size());
                 const int64_t d = rng.uniform(0, nd - 1);
                 const int64_t idx = s[d] == 0 ? 0 : rng.uniform(-s[d], s[d] - 1);
                 return one(
                     "dim, index " + ints({d, idx}),
                     [=](const Tensor& x) { return x.select(d, idx).contiguous(); },
                     [=](const DTensor& x) { return select(x, d, idx); });
               }});
  auto two_op = [](const char* name, bool stack_op) {
    OpEntry e{name, false, false, 2, nullptr};
    e.draw = [stack_op](Rng& rng, const Shape& s) {
      const int64_t nd = static_cast<int64_t>(s.size()) + (stack_op ? 1 : 0);
      const int64_t d = rng.uniform(0, nd - 1);
      Applied a;
      a.args = "dim " + std::to_string(d);
      a.on_full = [=](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{stack_op ? stack(x, d) : cat(x, d)};
      };
      a.on_dtensors = [=](const std::vector<DTensor>& x) {
        return std::vector<DTensor>{stack_op ? stack(x, d) : cat(x, d)};
      };
      return a;
    };
    return e;
  };
  t.push_back(two_op("cat", false));
  t.push_back(two_op("stack", true));
  t.push_back({"split", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t d = rng.uniform(0, static_cast<int64_t>(s.size()) - 1);
                 const int64_t size = rng.uniform(1, std::max<int64_t>(1, s[d]));
                 Applied a;
                 a.args = "split_size, dim " + ints({size, d});
                 a.on_full = [=](const std::vector<Tensor>& x) {
                   std::vector<Tensor> r = split(x[0], size, d);
                   for (Tensor& v : r) v = v.contiguous();
                   return r;
                 };
                 a.on_dtensors = [=](const std::vector<DTensor>& x) {
                   return split(x[0], size, d);
                 };
                 return a;
               }});
  t.push_back({"chunk", false, false, 1, [](Rng& rng, const Shape& s) {
                 const int64_t d = rng.uniform(0, static_cast<int64_t>(s.size()) - 1);
                 const int64_t k = rng.uniform(1, 5);
                 Applied a;
                 a.args = "chunks, dim " + ints({k, d});
                 a.on_full = [=](const std::vector<Tensor>& x) {
                   std::vector<Tensor> r = chunk(x[0], k, d);
                   for (Tensor& v : r) v = v.contiguous();
                   return r;
                 };
                 a.on_dtensors = [=](const std::vector<DTensor>& x) { return chunk(x[0], k, d); };
                 return a;
               }});
  // Elementwise. Binary ops: the second input broadcasts (a trailing suffix of the first's
  // shape with some dims set to 1, or the same shape); values are small integers, so add, sub,
  // mul, maximum, minimum and the comparisons are exact, and div / unary math get a tolerance.
  auto bcast = [](Rng& rng, const Shape& s, int64_t) {
    Shape o;
    const int64_t nd = static_cast<int64_t>(s.size());
    const int64_t keep = rng.chance(50) ? nd : rng.uniform(1, nd);
    for (int64_t i = nd - keep; i < nd; ++i) o.push_back(rng.chance(25) ? 1 : s[i]);
    if (rng.chance(5)) o.back() += 1;  // does not broadcast: must be rejected everywhere
    return o;
  };
  // The registered op `name` (its own kernel on the full tensors is the reference), with the
  // arguments of its first sample call (none for these).
  auto binary = [&](const char* name, bool math, bool floating_only) {
    OpEntry e{name, math, floating_only, 2, nullptr, bcast};
    const OpInfo& op = ops_op(name);
    e.draw = [&op, args = op.samples(1).front().args](Rng&, const Shape&) {
      return registered_call(op, args);
    };
    t.push_back(e);
  };
  for (const char* name : {"add", "sub", "mul", "maximum", "minimum", "lt", "eq"}) {
    binary(name, false, false);
  }
  binary("div", true, true);
  // Unary elementwise ops come from the registry (their table entries drew nothing but a shape
  // and a dtype); the Scalar forms keep their random scalar.
  t.push_back({"mul.Scalar", false, false, 1, [](Rng& rng, const Shape&) {
                 const int64_t k = rng.uniform(-3, 3);
                 return one(
                     "scalar " + std::to_string(k),
                     [k](const Tensor& x) { return mul(x, Scalar(k)); },
                     [k](const DTensor& x) { return mul(x, Scalar(k)); });
               }});
  t.push_back({"add.Scalar", false, false, 1, [](Rng& rng, const Shape&) {
                 const int64_t k = rng.uniform(-3, 3);
                 return one(
                     "scalar " + std::to_string(k),
                     [k](const Tensor& x) { return add(x, Scalar(k)); },
                     [k](const DTensor& x) { return add(x, Scalar(k)); });
               }});
  t.push_back({"cast", false, false, 1, [](Rng& rng, const Shape&) {
                 const DType to = random_dtype(rng);
                 return one(
                     "to " + std::string(dtype_name(to)),
                     [to](const Tensor& x) { return x.to(to); },
                     [to](const DTensor& x) { return cast(x, to); });
               }});
  // Reductions over a random set of dims (empty: all dims), keepdim or not. amax/amin are
  // exact; sum/mean get a tolerance (16-bit floats round each rank's partial sum).
  auto reduction = [&](const char* name, bool math, Tensor (*l)(const Tensor&, IntSpan, bool),
                       DTensor (*d)(const DTensor&, IntSpan, bool)) {
    t.push_back({name, math, false, 1, [l, d](Rng& rng, const Shape& s) {
                   const int64_t nd = static_cast<int64_t>(s.size());
                   Shape dims;
                   for (int64_t i = 0; i < nd; ++i) {
                     if (rng.chance(40)) dims.push_back(rng.chance(20) ? i - nd : i);
                   }
                   const bool keep = rng.chance(50);
                   return one(
                       "dims " + shape_str(dims) + (keep ? ", keepdim" : ""),
                       [=](const Tensor& x) { return l(x, dims, keep); },
                       [=](const DTensor& x) { return d(x, dims, keep); });
                 }});
  };
  reduction(
      "sum", true, [](const Tensor& x, IntSpan dims, bool k) { return sum(x, dims, k); },
      [](const DTensor& x, IntSpan dims, bool k) { return sum(x, dims, k); });
  reduction(
      "mean", true, [](const Tensor& x, IntSpan dims, bool k) { return mean(x, dims, k); },
      [](const DTensor& x, IntSpan dims, bool k) { return mean(x, dims, k); });
  reduction(
      "amax", false, [](const Tensor& x, IntSpan dims, bool k) { return amax(x, dims, k); },
      [](const DTensor& x, IntSpan dims, bool k) { return amax(x, dims, k); });
  reduction(
      "amin", false, [](const Tensor& x, IntSpan dims, bool k) { return amin(x, dims, k); },
      [](const DTensor& x, IntSpan dims, bool k) { return amin(x, dims, k); });
  t.push_back({"softmax", true, true, 1, [](Rng& rng, const Shape& s) {
                 const int64_t d = rdim(rng, static_cast<int64_t>(s.size()));
                 return one(
                     "dim " + std::to_string(d), [=](const Tensor& x) { return softmax(x, d); },
                     [=](const DTensor& x) { return softmax(x, d); });
               }});
  t.push_back({"log_softmax", true, true, 1, [](Rng& rng, const Shape& s) {
                 const int64_t d = rdim(rng, static_cast<int64_t>(s.size()));
                 return one(
                     "dim " + std::to_string(d), [=](const Tensor& x) { return log_softmax(x, d); },
                     [=](const DTensor& x) { return log_softmax(x, d); });
               }});
  const Registry& reg = registered_ops();
  for (const std::string& name : reg.names()) {
    if (std::any_of(t.begin(), t.end(), [&](const OpEntry& e) { return e.name == name; })) continue;
    const OpInfo& op = reg.get(name);
    OpEntry e{name, true, false, 0, nullptr};
    e.registered = &op;
    e.samples = op.samples(world);  // every op registers samples (test_strategy_validation)
    t.push_back(std::move(e));
  }
  return t;
}

constexpr ReduceOp kPartialOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

// `partial`: Partial placements may be drawn (never for bool). A 0-d tensor is only replicated
// or Partial.
Placements random_placements(Rng& rng, int64_t mesh_ndim, int64_t nd, DType dtype,
                             bool partial = true) {
  Placements p;
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    const int64_t k = rng.uniform(0, dtype == kBool ? 1 : 2);
    if (k == 0 || (k == 1 && nd == 0) || (k == 2 && !partial)) {
      p.push_back(Replicate());
    } else if (k == 1) {
      p.push_back(Shard(rng.uniform(0, nd - 1)));
    } else {
      p.push_back(Partial(kPartialOps[rng.uniform(0, 3)]));
    }
  }
  return p;
}

struct OpCase {
  int64_t index = 0;
  uint64_t seed = 0;
  const OpEntry* op = nullptr;
  Shape mesh;
  DType dtype = kFloat32;
  std::vector<Shape> shapes;
  std::vector<Placements> placements;
  std::string args;

  std::string str() const {
    std::string s = "case " + std::to_string(index) + ": " + op->name + "(" + args + ") on mesh " +
                    shape_str(mesh) + ", " + std::string(dtype_name(dtype)) + ", inputs";
    for (size_t i = 0; i < shapes.size(); ++i) {
      s += " " + shape_str(shapes[i]) + " " + placements_str(placements[i]);
    }
    return s;
  }
};

// A case of an op of the table: draws its input shapes, dtype, arguments, placements and values
// into `c` and `full_in`.
Applied draw_table(Rng& rng, OpCase& c, int world, std::vector<Tensor>* full_in) {
  Shape s = random_tensor_shape(rng, world);
  c.dtype = random_dtype(rng);
  if (c.op->floating_only && !is_floating(c.dtype)) c.dtype = rng.chance(50) ? kFloat32 : kBFloat16;
  const int64_t nd = static_cast<int64_t>(s.size());
  c.shapes.push_back(s);
  Applied a = c.op->draw(rng, s);
  c.args = a.args;
  if (c.op->inputs == 2 && c.op->second_shape) {
    c.shapes.push_back(c.op->second_shape(rng, s, 0));
  } else if (c.op->inputs == 2) {
    Shape s2 = s;
    if (c.op->name == "cat" && rng.chance(70)) {
      // cat: the second input may differ along any dim the draw could pick; keep it simple and
      // vary a random dim (the op rejects a mismatch on a non-cat dim everywhere).
      const int64_t d = rng.uniform(0, nd - 1);
      s2[d] = rng.uniform(0, 2 * world + 3);
    }
    c.shapes.push_back(s2);
  }
  for (const Shape& sh : c.shapes) {
    c.placements.push_back(random_placements(rng, static_cast<int64_t>(c.mesh.size()),
                                             static_cast<int64_t>(sh.size()), c.dtype));
  }
  // Values: small integers for data movement; for math a wider spread (k / 8 in [-4, 4]).
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    std::vector<float> v = base_values(shape_numel(c.shapes[i]), c.dtype, c.seed + 31 * i);
    if (c.op->math) {
      for (float& x : v) x = x / 4.0f;
    }
    if (i == 1 && c.op->name == "div") {
      for (float& x : v) x = x == 0.0f ? 0.5f : x;  // no division by zero (inf - inf is NaN)
    }
    full_in->push_back(make_tensor(v, c.shapes[i], c.dtype));
  }
  return a;
}

// A case of a registered op without a table entry (see the file comment): draws one of its sample
// calls, the inputs' dtype and placements and values into `c` and `full_in`.
Applied draw_registered(Rng& rng, OpCase& c, std::vector<Tensor>* full_in) {
  const OpInfo& op = *c.op->registered;
  const OpSample& registered =
      c.op->samples[rng.uniform(0, static_cast<int64_t>(c.op->samples.size()) - 1)];
  const OpSample call =
      rng.chance(50) ? registered : test::with_floating_dtype(registered, kFloat32);
  c.dtype = call.inputs[0].meta.dtype;
  for (const SampleInput& in : call.inputs) {
    if (is_floating(in.meta.dtype)) {
      c.dtype = in.meta.dtype;
      break;
    }
  }
  std::vector<std::string> args;
  for (const ArgValue& v : call.args) args.push_back(arg_str(v));
  c.args = absl::StrJoin(args, ", ");
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const TensorMeta& m = call.inputs[i].meta;
    c.shapes.push_back(m.shape);
    c.placements.push_back(random_placements(rng, static_cast<int64_t>(c.mesh.size()),
                                             static_cast<int64_t>(m.shape.size()), m.dtype,
                                             /*partial=*/!(op.inplace && i == 0)));
    full_in->push_back(test::sample_values(call.inputs[i], c.seed + 31 * i, /*reals=*/false));
  }
  return registered_call(op, call.args);
}

// Runs one case: "" when the DTensor op agrees with the local op, else what differs.
std::string run_case(const std::vector<OpEntry>& table, uint64_t base_seed, int64_t index,
                     int world, OpCase* out) {
  OpCase& c = *out;
  c.index = index;
  c.seed = mix(base_seed, static_cast<uint64_t>(index), 0x6f7073ull, static_cast<uint64_t>(world));
  Rng rng(c.seed);
  c.op = &table[rng.uniform(0, static_cast<int64_t>(table.size()) - 1)];
  c.mesh = random_mesh_shape(rng, world);
  std::vector<Tensor> full_in;
  Applied a;
  if (c.op->registered != nullptr) {
    a = draw_registered(rng, c, &full_in);
  } else {
    a = draw_table(rng, c, world, &full_in);
  }
  try {
    const DeviceMesh mesh = build_mesh(c.mesh, false);
    std::vector<DTensor> din;
    for (size_t i = 0; i < full_in.size(); ++i) {
      din.push_back(distribute_tensor(full_in[i], mesh, c.placements[i], std::nullopt));
    }
    std::vector<Tensor> want;
    std::string local_error;
    try {
      want = a.on_full(full_in);
    } catch (const Error& e) {
      local_error = e.what();
    }
    if (!local_error.empty()) {
      // The DTensor op must reject the same arguments. Ranks outside the mesh skip the local
      // kernel, so an error that only the kernel detects (e.g. abs of bool) is not raised there;
      // that is accepted (they hold nothing and issue nothing, so nobody hangs).
      try {
        (void)a.on_dtensors(din);
      } catch (const Error&) {
        return "";
      }
      if (!mesh.contains_me()) return "";
      return "the local op threw (" + local_error + ") but the DTensor op did not";
    }
    const std::vector<DTensor> got = a.on_dtensors(din);
    if (!mesh.contains_me()) return "";  // holds nothing
    if (got.size() != want.size()) {
      return "DTensor op returned " + std::to_string(got.size()) + " outputs, expected " +
             std::to_string(want.size());
    }
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor g = got[i].full_tensor();
      const std::string which =
          "output " + std::to_string(i) + " (" + placements_str(got[i].placements()) + "): ";
      if (!(g.shape() == want[i].shape()) || g.dtype() != want[i].dtype()) {
        return which + "full_tensor " + shape_str(g.shape()) + " " +
               std::string(dtype_name(g.dtype())) + ", expected " + shape_str(want[i].shape()) +
               " " + std::string(dtype_name(want[i].dtype()));
      }
      // A registered op's floating outputs are math (its others exact), in their own dtype, with
      // an absolute floor of rtol * the largest |output|: its kernels sum terms that large in
      // another order on the shards (softmax_backward's row sums, attention's), losing their
      // last bits, not the result's.
      const bool registered = c.op->registered != nullptr;
      const bool math = registered ? is_floating(want[i].dtype()) : c.op->math;
      if (math) {
        Tol tol = tolerance(registered ? want[i].dtype() : c.dtype);
        if (registered) tol.atol = std::max(tol.atol, tol.rtol * largest_abs(want[i]));
        if (!allclose(g, want[i], tol.rtol, tol.atol, /*equal_nan=*/true)) {
          return which + "differs beyond tolerance (max |diff| " +
                 std::to_string(max_abs_diff(g, want[i])) + ")";
        }
      } else if (!equal(g, want[i]) && max_abs_diff(g, want[i]) != 0.0) {
        // Exact ops: bit for bit, except that the sign of a zero may differ (a Partial(sum)
        // of -0.0 on one rank and +0.0 on the others is +0.0, as IEEE addition says).
        return which + "differs from the local op's result (max |diff| " +
               std::to_string(max_abs_diff(g, want[i])) + ")";
      }
    }
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
  return "";
}

TEST_CASE("fuzz ops: DTensor ops equal the local ops on the full tensors") {
  const Config cfg = read_config(300);
  const std::vector<OpEntry> table = op_table(world_size());
  const int world = world_size();
  const int rank = world_rank();
  Timer timer;
  int64_t ran = 0;
  std::vector<int64_t> per_op(table.size(), 0);
  std::string failure;
  for (int64_t i = cfg.first; i < cfg.first + cfg.count; ++i) {
    OpCase c;
    const std::string err = run_case(table, cfg.seed, i, world, &c);
    if (!err.empty()) {
      std::fprintf(stderr, "[rank %d] fuzz_ops seed %llu %s: %s\n", rank,
                   static_cast<unsigned long long>(cfg.seed), c.str().c_str(), err.c_str());
    }
    const int any_failed = world_max(err.empty() ? 0 : 1);
    ++ran;
    per_op[c.op - table.data()]++;
    if (any_failed) {
      failure = "seed " + std::to_string(cfg.seed) + " " + c.str() +
                "; this rank: " + (err.empty() ? std::string("ok") : err) +
                "; reproduce with DTENSOR_FUZZ_SEED=" + std::to_string(cfg.seed) +
                " DTENSOR_FUZZ_CASE=" + std::to_string(i) + " mpirun -np " + std::to_string(world);
      break;
    }
    if (world_max(rank == 0 && timer.seconds() > cfg.seconds ? 1 : 0)) break;
  }
  if (rank == 0) {
    // The op count covered: ops drawn at least once, and how many of them are registered ops.
    const Registry& reg = registered_ops();
    std::string ops;
    int64_t drawn = 0, drawn_registered = 0;
    for (size_t k = 0; k < table.size(); ++k) {
      ops += std::string(k ? ", " : "") + table[k].name + " " + std::to_string(per_op[k]);
      if (per_op[k] == 0) continue;
      ++drawn;
      if (reg.contains(table[k].name)) ++drawn_registered;
    }
    std::fprintf(stderr,
                 "fuzz_ops: np %d, seed %llu: ran %lld cases in %.1f s, %lld of %zu ops drawn "
                 "(%lld of the %lld registered ops) (%s)\n",
                 world, static_cast<unsigned long long>(cfg.seed), static_cast<long long>(ran),
                 timer.seconds(), static_cast<long long>(drawn), table.size(),
                 static_cast<long long>(drawn_registered), static_cast<long long>(reg.size()),
                 ops.c_str());
  }
  INFO(failure);
  CHECK(failure.empty());
}

}  // namespace
}  // namespace dtensor::fuzz

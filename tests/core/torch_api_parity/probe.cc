// Side-by-side probe of the DTensor API against torch.distributed.tensor (PyTorch 2.15), the
// dtensor half; probe.py .. probe4.py are the PyTorch half and compare.py prints the
// differences (docs/SEMANTICS.md, "The DTensor API against torch.distributed.tensor"). Not built
// with the tree: compile it against the libraries of a build (or an installed tree), e.g.
//   c++ -std=c++20 -I. -Ibuild/generated -isystem <mpi include> probe.cc build/dtensor/*/lib*.so
//       -lmpi -lcudart && mpirun -np 4 ./a.out
// then `torchrun --nproc_per_node 4 probe.py` (and probe2.py .. probe4.py) and compare.py.
// It writes dt{,2,3,4}_r<rank>.json into the current directory.
#include <dtensor/dtensor.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
namespace dt = dtensor;
using dt::DTensor;
static std::ostringstream out;
static bool first = true;
static std::string pls(const dt::Placements& p) {
  std::string s = "[";
  for (size_t i = 0; i < p.size(); ++i) {
    std::string t = p[i].str();
    s += (i ? ",\"" : "\"") + t + "\"";
  }
  return s + "]";
}
static std::string fl(const dt::Tensor& t) {
  dt::Tensor c = dt::cast(t.contiguous(), dt::kFloat64);
  auto v = c.to_vector<double>();
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char b[64];
    snprintf(b, 64, "%.6f", v[i]);
    o << (i ? "," : "") << b;
  }
  o << "]";
  return o.str();
}
static std::string ints(const dt::Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}
static void rec(const std::string& name, const DTensor& d) {
  out << (first ? "" : ",\n") << "{\"case\":\"" << name
      << "\",\"placements\":" << pls(d.placements()) << ",\"lshape\":" << ints(d.to_local().shape())
      << ",\"local\":" << fl(d.to_local()) << ",\"gshape\":" << ints(d.shape()) << "}";
  first = false;
}
static void tryrec(const std::string& name, std::function<DTensor()> f) {
  try {
    rec(name, f());
  } catch (const std::exception& e) {
    std::string m = e.what();
    m = m.substr(0, 150);
    for (auto& c : m)
      if (c == '"' || c == '\n' || c == '\\') c = '\'';
    out << (first ? "" : ",\n") << "{\"case\":\"" << name << "\",\"error\":\"" << m << "\"}";
    first = false;
  }
}
static dt::Tensor ar(std::vector<int64_t> s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return dt::arange(0, n, 1, dt::kFloat32).view(s);
}
void round1(const dt::DeviceMesh& m1, const dt::DeviceMesh& m2, int r) {
  using dt::Partial;
  using dt::Replicate;
  using dt::Shard;
  for (int n : {5, 3, 2})
    tryrec("dist S0 n=" + std::to_string(n), [&] {
      return dt::distribute_tensor(ar({n, 2}), m1, {Shard(0)});
    });
  tryrec("dist S(-1) 2x5", [&] { return dt::distribute_tensor(ar({2, 5}), m1, {Shard(-1)}); });
  tryrec("dist S0S0 2d 7x2", [&] {
    return dt::distribute_tensor(ar({7, 2}), m2, {Shard(0), Shard(0)});
  });
  tryrec("dist S1S0 2d 5x3", [&] {
    return dt::distribute_tensor(ar({5, 3}), m2, {Shard(1), Shard(0)});
  });
  tryrec("dist S0 mesh2d len1", [&] { return dt::distribute_tensor(ar({4, 2}), m2, {Shard(0)}); });
  tryrec("dist S2 out of range", [&] { return dt::distribute_tensor(ar({4, 2}), m1, {Shard(2)}); });
  tryrec("dist Psum", [&] { return dt::distribute_tensor(ar({2, 2}), m1, {Partial()}); });
  tryrec("from_local S0 no shape uneven", [&] {
    return DTensor::from_local(dt::ones({r + 1, 2}), m1, {Shard(0)}, false);
  });
  tryrec("from_local S0 shape given", [&] {
    int64_t n = r < 2 ? 2 : (r == 2 ? 1 : 0);
    return DTensor::from_local(dt::ones({n, 2}), m1, {Shard(0)}, false, {5, 2}, {2, 1});
  });
  tryrec("from_local R run_check",
         [&] { return DTensor::from_local(dt::full({2}, double(r)), m1, {Replicate()}, true); });
  tryrec("from_local Pavg full", [&] {
    auto t = DTensor::from_local(dt::full({2}, double(r)), m1, {Partial(dt::ReduceOp::kAvg)})
                 .full_tensor();
    return DTensor::from_local(t, m1, {Replicate()});
  });
  dt::Tensor src = ar({5, 3});
  std::vector<std::pair<std::string, dt::Placement>> P = {{"S0", Shard(0)},
                                                          {"S1", Shard(1)},
                                                          {"R", Replicate()},
                                                          {"Psum", Partial()},
                                                          {"Pavg", Partial(dt::ReduceOp::kAvg)}};
  for (auto& [an, a] : P)
    for (auto& [bn, b] : P) {
      tryrec("redist 1d " + an + "->" + bn, [&] {
        DTensor d = an[0] == 'P' ? DTensor::from_local(dt::mul(src, double(r + 1)), m1, {a})
                                 : dt::distribute_tensor(src, m1, {a});
        return d.redistribute(m1, {b});
      });
    }
  std::map<std::string, dt::Placement> PM(P.begin(), P.end());
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> pairs = {
      {{"S0", "S1"}, {"S1", "S0"}},
      {{"S0", "S0"}, {"R", "S1"}},
      {{"R", "R"}, {"Psum", "Psum"}},
      {{"S0", "R"}, {"Psum", "S1"}},
      {{"Psum", "S0"}, {"R", "R"}}};
  for (auto& [a, b] : pairs) {
    std::string nm = "redist 2d ('" + a[0] + "', '" + a[1] + "')->('" + b[0] + "', '" + b[1] + "')";
    tryrec(nm, [&] {
      bool anyp = a[0][0] == 'P' || a[1][0] == 'P';
      dt::Placements pa = {PM.at(a[0]), PM.at(a[1])}, pb = {PM.at(b[0]), PM.at(b[1])};
      DTensor d;
      if (anyp) {
        dt::Placements rp = {a[0][0] == 'P' ? Replicate() : PM.at(a[0]),
                             a[1][0] == 'P' ? Replicate() : PM.at(a[1])};
        d = DTensor::from_local(
            dt::mul(dt::distribute_tensor(ar({4, 4}), m2, rp).to_local(), double(r + 1)), m2, pa);
      } else
        d = dt::distribute_tensor(ar({5, 3}), m2, pa);
      return d.redistribute(m2, pb);
    });
  }
  dt::Tensor x = ar({5, 3});
  DTensor d0 = dt::distribute_tensor(x, m1, {Shard(0)}),
          d1 = dt::distribute_tensor(x, m1, {Shard(1)}),
          dr = dt::distribute_tensor(x, m1, {Replicate()});
  tryrec("sum dim0 of S0", [&] { return dt::sum(d0, {0}); });
  tryrec("sum all of S0", [&] { return dt::sum(d0); });
  tryrec("mean dim0 of S0 (uneven)", [&] { return dt::mean(d0, {0}); });
  tryrec("mean all of S0", [&] { return dt::mean(d0); });
  tryrec("mean dim1 of S1", [&] { return dt::mean(d1, {1}); });
  tryrec("amax dim0 of S0", [&] { return dt::amax(d0, {0}); });
  tryrec("matmul S1@S0", [&] {
    return dt::matmul(dt::distribute_tensor(ar({3, 8}), m1, {Shard(1)}),
                      dt::distribute_tensor(ar({8, 2}), m1, {Shard(0)}));
  });
  tryrec("softmax dim0 of S0", [&] { return dt::softmax(d0, 0); });
  tryrec("softmax dim1 of S0", [&] { return dt::softmax(d0, 1); });
  tryrec("view S0 8x3 -> 24", [&] {
    return dt::distribute_tensor(ar({8, 3}), m1, {Shard(0)}).view({24});
  });
  tryrec("view S0 8x3 -> 4,6", [&] {
    return dt::distribute_tensor(ar({8, 3}), m1, {Shard(0)}).view({4, 6});
  });
  tryrec("view S1 3x8 -> 3,2,4", [&] {
    return dt::distribute_tensor(ar({3, 8}), m1, {Shard(1)}).view({3, 2, 4});
  });
  tryrec("reshape S0 5x3 -> 15", [&] { return d0.reshape({15}); });
  tryrec("transpose S0", [&] { return d0.t(); });
  tryrec("S0 + R", [&] { return dt::add(d0, dr); });
  tryrec("S0 + S1", [&] { return dt::add(d0, d1); });
  auto mkp = [&] { return DTensor::from_local(dt::mul(x, double(r + 1)), m1, {Partial()}); };
  tryrec("Psum + R", [&] { return dt::add(mkp(), dr); });
  tryrec("Psum + Psum", [&] {
    auto p = mkp();
    return dt::add(p, p);
  });
  tryrec("Psum * 2", [&] { return dt::mul(mkp(), 2.0); });
  tryrec("Psum + 1", [&] { return dt::add(mkp(), 1.0); });
  tryrec("neg Psum", [&] { return dt::neg(mkp()); });
  tryrec("abs Psum", [&] { return dt::abs(mkp()); });
  tryrec("S0.add_(R)", [&] {
    DTensor a = dt::distribute_tensor(x.clone(), m1, {Shard(0)});
    dt::add_(a, dr);
    return a;
  });
  tryrec("R.add_(S0)", [&] {
    DTensor a = dt::distribute_tensor(x.clone(), m1, {Replicate()});
    dt::add_(a, d0);
    return a;
  });
  tryrec("ones 5x2 S0", [&] { return dt::ones({5, 2}, m1, {Shard(0)}); });
  tryrec("full 3x2 S1", [&] { return dt::full({3, 2}, 7.0, m1, {Shard(1)}); });
  tryrec("ones Psum", [&] { return dt::ones({2, 2}, m1, {Partial()}); });
  dt::manual_seed(0);
  tryrec("randn 4x2 S0 seed0", [&] { return dt::randn({4, 2}, m1, {Shard(0)}); });
  tryrec("grad of R param with S0 input", [&] {
    DTensor w = dt::distribute_tensor(ar({3, 2}), m1, {Replicate()});
    w.requires_grad_();
    DTensor xi = dt::distribute_tensor(ar({4, 3}), m1, {Shard(0)});
    dt::sum(dt::matmul(xi, w)).backward();
    return w.grad();
  });
  tryrec("grad S0->R backward", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(w.redistribute(m1, {Replicate()})).backward();
    return w.grad();
  });
  tryrec("grad full_tensor backward", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(w.full_tensor_dtensor()).backward();
    return w.grad();
  });
  tryrec("grad to_local(grad_placements=P)", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(w.to_local_dtensor({Partial()})).backward();
    return w.grad();
  });
  tryrec("grad to_local() no grad_placements", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(w.to_local_dtensor()).backward();
    return w.grad();
  });
  tryrec("grad R->P backward", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(w.redistribute(m1, {Partial()})).backward();
    return w.grad();
  });
  tryrec("grad of S0 sum", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(w).backward();
    return w.grad();
  });
  tryrec("grad R->S1 backward", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(w.redistribute(m1, {Shard(1)})).backward();
    return w.grad();
  });
  tryrec("err mismatched mesh add", [&] {
    return dt::add(dt::distribute_tensor(ar({4, 2}), m1, {Shard(0)}),
                   dt::distribute_tensor(ar({4, 2}), m2, {Shard(0), Replicate()}));
  });
  tryrec("err placements len", [&] {
    return dt::distribute_tensor(ar({4, 2}), m1, {Shard(0), Replicate()});
  });
  tryrec("err redistribute len", [&] { return d0.redistribute(m1, {Shard(0), Replicate()}); });
  tryrec("err Shard(-3)", [&] { return dt::distribute_tensor(ar({4, 2}), m1, {Shard(-3)}); });
}

void round2(const dt::DeviceMesh& m1, const dt::DeviceMesh& m2, int r) {
  using dt::Partial;
  using dt::Replicate;
  using dt::Shard;
  dt::Tensor x = ar({5, 3});
  DTensor dr = dt::distribute_tensor(x, m1, {Replicate()});
  auto PS = [&] { return DTensor::from_local(dt::mul(x, double(r + 1)), m1, {Partial()}); };
  auto PA = [&] {
    return DTensor::from_local(dt::mul(x, double(r + 1)), m1, {Partial(dt::ReduceOp::kAvg)});
  };
  auto PMX = [&] {
    return DTensor::from_local(dt::mul(x, double(r + 1)), m1, {Partial(dt::ReduceOp::kMax)});
  };
  auto R22 = [&] { return dt::distribute_tensor(ar({3, 2}), m1, {Replicate()}); };
  tryrec("Pavg + 1", [&] { return dt::add(PA(), 1.0); });
  tryrec("Pavg * 2", [&] { return dt::mul(PA(), 2.0); });
  tryrec("Pavg + R", [&] { return dt::add(PA(), dr); });
  tryrec("Pavg * R", [&] { return dt::mul(PA(), dr); });
  tryrec("Psum * R", [&] { return dt::mul(PS(), dr); });
  tryrec("Psum - R", [&] { return dt::sub(PS(), dr); });
  tryrec("R - Psum", [&] { return dt::sub(dr, PS()); });
  tryrec("Psum / R+1", [&] { return dt::div(PS(), dt::add(dr, 1.0)); });
  tryrec("Psum + Pavg", [&] { return dt::add(PS(), PA()); });
  tryrec("Psum * Psum", [&] { return dt::mul(PS(), PS()); });
  tryrec("Pavg + Pavg", [&] { return dt::add(PA(), PA()); });
  tryrec("Pmax + R", [&] { return dt::add(PMX(), dr); });
  tryrec("Pmax * 2", [&] { return dt::mul(PMX(), 2.0); });
  tryrec("Pmax * -1", [&] { return dt::mul(PMX(), -1.0); });
  tryrec("neg Pmax", [&] { return dt::neg(PMX()); });
  tryrec("Pmax full", [&] { return DTensor::from_local(PMX().full_tensor(), m1, {Replicate()}); });
  tryrec("sum Pavg dim0", [&] { return dt::sum(PA(), {0}); });
  tryrec("mean Psum dim0", [&] { return dt::mean(PS(), {0}); });
  tryrec("Pavg @ R", [&] { return dt::matmul(PA(), R22()); });
  tryrec("Pavg @ Pavg.T", [&] { return dt::matmul(PA(), PA().t()); });
  tryrec("Psum @ Psum.T", [&] { return dt::matmul(PS(), PS().t()); });
  tryrec("Pavg int full", [&] {
    dt::Tensor t = dt::arange(0, 2, 1, dt::kInt64);
    t = dt::add(dt::mul(t, int64_t(r + 1)), int64_t(r));
    return DTensor::from_local(
        DTensor::from_local(t, m1, {Partial(dt::ReduceOp::kAvg)}).full_tensor(), m1, {Replicate()});
  });
  tryrec("Psum.add_(R)", [&] {
    DTensor p = PS();
    dt::add_(p, dr);
    return p;
  });
  tryrec("Psum.add_(1)", [&] {
    DTensor p = PS();
    dt::add_(p, 1.0);
    return p;
  });
  tryrec("Pavg.add_(1)", [&] {
    DTensor p = PA();
    dt::add_(p, 1.0);
    return p;
  });
  tryrec("Psum.mul_(2)", [&] {
    DTensor p = PS();
    dt::mul_(p, 2.0);
    return p;
  });
  tryrec("mean 2d S0S0 7x2 dim0", [&] {
    return dt::mean(dt::distribute_tensor(ar({7, 2}), m2, {Shard(0), Shard(0)}), {0});
  });
  tryrec("mean 2d S0S1 5x3 all", [&] {
    return dt::mean(dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)}));
  });
  tryrec("cumsum S0 dim0", [&] { return dt::cumsum(dt::distribute_tensor(x, m1, {Shard(0)}), 0); });
  tryrec("var S0 dim0", [&] { return dt::var(dt::distribute_tensor(x, m1, {Shard(0)}), {0}); });
  tryrec("S0 2d 7x2 -> S1S0 ", [&] {
    return dt::distribute_tensor(ar({7, 2}), m2, {Shard(0), Shard(0)})
        .redistribute(m2, {Shard(1), Shard(0)});
  });
  tryrec("S0S0 7x6 -> S1S1", [&] {
    return dt::distribute_tensor(ar({7, 6}), m2, {Shard(0), Shard(0)})
        .redistribute(m2, {Shard(1), Shard(1)});
  });
  tryrec("S1S0 5x3 -> S0S1", [&] {
    return dt::distribute_tensor(ar({5, 3}), m2, {Shard(1), Shard(0)})
        .redistribute(m2, {Shard(0), Shard(1)});
  });
  tryrec("Pavg->S0", [&] { return PA().redistribute(m1, {Shard(0)}); });
  tryrec("Pmax->S1", [&] { return PMX().redistribute(m1, {Shard(1)}); });
  tryrec("from_local S0 run_check uneven ok", [&] {
    int64_t n = r < 2 ? 2 : (r == 2 ? 1 : 0);
    return DTensor::from_local(dt::ones({n, 2}), m1, {Shard(0)}, true, {5, 2}, {2, 1});
  });
  tryrec("2d Psum,S0 full", [&] {
    return DTensor::from_local(
        DTensor::from_local(dt::full({1, 2}, double(r + 1)), m2, {Partial(), Shard(0)})
            .full_tensor(),
        m2, {Replicate(), Replicate()});
  });
  tryrec("2d R,Pavg full", [&] {
    return DTensor::from_local(DTensor::from_local(dt::full({2}, double(r + 1)), m2,
                                                   {Replicate(), Partial(dt::ReduceOp::kAvg)})
                                   .full_tensor(),
                               m2, {Replicate(), Replicate()});
  });
  tryrec("grad 2d R param S0 input", [&] {
    DTensor w = dt::distribute_tensor(ar({3, 2}), m2, {Replicate(), Replicate()});
    w.requires_grad_();
    DTensor xi = dt::distribute_tensor(ar({4, 3}), m2, {Shard(0), Replicate()});
    dt::sum(dt::matmul(xi, w)).backward();
    return w.grad();
  });
  tryrec("grad mean of S0 uneven", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::mean(w).backward();
    return w.grad();
  });
  tryrec("grad R * Pavg", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(dt::mul(w, PA())).backward();
    return w.grad();
  });
  tryrec("grad S0->S1 backward", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(w.redistribute(m1, {Shard(1)})).backward();
    return w.grad();
  });
  tryrec("grad R->Pavg full backward", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 4}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(w.redistribute(m1, {Partial(dt::ReduceOp::kAvg)}).full_tensor_dtensor()).backward();
    return w.grad();
  });
  tryrec("grad softmax S0 dim0", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(dt::mul(dt::softmax(w, 0), dt::distribute_tensor(ar({5, 3}), m1, {Replicate()})))
        .backward();
    return w.grad();
  });
}

void round3(const dt::DeviceMesh& m1, const dt::DeviceMesh& m2, int r) {
  using dt::Partial;
  using dt::Replicate;
  using dt::Shard;
  dt::Tensor x = ar({5, 3});
  auto PSUM = Partial();
  auto PAVG = Partial(dt::ReduceOp::kAvg);
  auto PMAX = Partial(dt::ReduceOp::kMax);
  auto PMIN = Partial(dt::ReduceOp::kMin);
  auto P2 = [&](dt::Placement a, dt::Placement b, std::vector<int64_t> s) {
    return DTensor::from_local(dt::mul(ar(s), double(r + 1)), m2, {a, b});
  };
  tryrec("2d Pavg,Psum -> R,R", [&] {
    return P2(PAVG, PSUM, {4, 4}).redistribute(m2, {Replicate(), Replicate()});
  });
  tryrec("2d Pavg,Psum -> S0,S1", [&] {
    return P2(PAVG, PSUM, {4, 4}).redistribute(m2, {Shard(0), Shard(1)});
  });
  tryrec("2d Psum,Pavg -> S1,S1", [&] {
    return P2(PSUM, PAVG, {4, 4}).redistribute(m2, {Shard(1), Shard(1)});
  });
  tryrec("2d Pmax,Pmin -> R,R", [&] {
    return P2(PMAX, PMIN, {4, 4}).redistribute(m2, {Replicate(), Replicate()});
  });
  tryrec("2d Pmin,R -> S0,R", [&] {
    return P2(PMIN, Replicate(), {4, 4}).redistribute(m2, {Shard(0), Replicate()});
  });
  tryrec("2d Psum,Psum 5x3 -> S0,S0", [&] {
    return P2(PSUM, PSUM, {5, 3}).redistribute(m2, {Shard(0), Shard(0)});
  });
  tryrec("2d Pavg,R 5x3 -> S0,S0", [&] {
    return P2(PAVG, Replicate(), {5, 3}).redistribute(m2, {Shard(0), Shard(0)});
  });
  tryrec("2d S(-1),S0 5x3", [&] {
    return dt::distribute_tensor(ar({5, 3}), m2, {Shard(-1), Shard(0)});
  });
  tryrec("S1 of 3x1", [&] { return dt::distribute_tensor(ar({3, 1}), m1, {Shard(1)}); });
  tryrec("2d S1S0 3x5 -> R,R", [&] {
    return dt::distribute_tensor(ar({3, 5}), m2, {Shard(1), Shard(0)})
        .redistribute(m2, {Replicate(), Replicate()});
  });
  tryrec("2d S0S0 5x2 -> S0,R", [&] {
    return dt::distribute_tensor(ar({5, 2}), m2, {Shard(0), Shard(0)})
        .redistribute(m2, {Shard(0), Replicate()});
  });
  tryrec("2d S0S0 5x2 -> R,S0", [&] {
    return dt::distribute_tensor(ar({5, 2}), m2, {Shard(0), Shard(0)})
        .redistribute(m2, {Replicate(), Shard(0)});
  });
  tryrec("2d R,S0 5x2 -> S0,S0", [&] {
    return dt::distribute_tensor(ar({5, 2}), m2, {Replicate(), Shard(0)})
        .redistribute(m2, {Shard(0), Shard(0)});
  });
  tryrec("2d S0,R 5x2 -> S0,S0", [&] {
    return dt::distribute_tensor(ar({5, 2}), m2, {Shard(0), Replicate()})
        .redistribute(m2, {Shard(0), Shard(0)});
  });
  tryrec("2d S0,S1 5x3 -> S1,S0", [&] {
    return dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)})
        .redistribute(m2, {Shard(1), Shard(0)});
  });
  tryrec("matmul S1@S0 K=5", [&] {
    return dt::matmul(dt::distribute_tensor(ar({3, 5}), m1, {Shard(1)}),
                      dt::distribute_tensor(ar({5, 2}), m1, {Shard(0)}));
  });
  tryrec("Psum @ R", [&] {
    return dt::matmul(DTensor::from_local(dt::mul(x, double(r + 1)), m1, {PSUM}),
                      dt::distribute_tensor(ar({3, 2}), m1, {Replicate()}));
  });
  tryrec("R @ Psum", [&] {
    return dt::matmul(dt::distribute_tensor(ar({2, 5}), m1, {Replicate()}),
                      DTensor::from_local(dt::mul(x, double(r + 1)), m1, {PSUM}));
  });
  tryrec("2d sum dim0 S0,S1", [&] {
    return dt::sum(dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)}), {0});
  });
  tryrec("2d mean dim1 keepdim S0,S1", [&] {
    return dt::mean(dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)}), {1}, true);
  });
  tryrec("2d softmax dim1 S0,S1", [&] {
    return dt::softmax(dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)}), 1);
  });
  tryrec("Pavg int neg full", [&] {
    dt::Tensor t = dt::zeros({2}, dt::TensorOptions(dt::kInt64));
    if (r == 0) {
      t = dt::arange(0, 2, 1, dt::kInt64);
      t = dt::sub(dt::mul(t, int64_t(8)), int64_t(3));
    }
    return DTensor::from_local(DTensor::from_local(t, m1, {PAVG}).full_tensor(), m1, {Replicate()});
  });
  tryrec("Pavg.sum() S",
         [&] { return dt::sum(DTensor::from_local(dt::mul(x, double(r + 1)), m1, {PAVG})); });
  tryrec("max of S0 (value)", [&] { return dt::max(dt::distribute_tensor(x, m1, {Shard(0)})); });
  tryrec("argmax dim0 of S0",
         [&] { return dt::argmax(dt::distribute_tensor(x, m1, {Shard(0)}), 0); });
  tryrec("S0 * S0 other mesh dim 2d", [&] {
    return dt::mul(dt::distribute_tensor(ar({4, 4}), m2, {Shard(0), Replicate()}),
                   dt::distribute_tensor(ar({4, 4}), m2, {Replicate(), Shard(0)}));
  });
  tryrec("grad to_local R grad_placements S0", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(dt::mul(w.to_local_dtensor({Shard(0)}), double(r + 1))).backward();
    return w.grad();
  });
  tryrec("grad 2d S0S1 -> RR backward", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(1)});
    w.requires_grad_();
    dt::sum(dt::mul(w.redistribute(m2, {Replicate(), Replicate()}),
                    dt::distribute_tensor(ar({5, 3}), m2, {Replicate(), Replicate()})))
        .backward();
    return w.grad();
  });
  tryrec("grad full_tensor pow2", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(dt::pow(w.full_tensor_dtensor(), 2.0)).backward();
    return w.grad();
  });
}

void round4(const dt::DeviceMesh& m1, const dt::DeviceMesh& m2, int r) {
  using dt::Partial;
  using dt::Replicate;
  using dt::Shard;
  auto lf = [&](std::vector<int64_t> s) {
    DTensor l = DTensor::from_local(dt::add(ar(s), double(r)), dt::self_mesh(), {Replicate()});
    l.requires_grad_();
    return l;
  };
  auto R23 = [&] { return dt::distribute_tensor(ar({2, 3}), m1, {Replicate()}); };
  auto lg = [&](const DTensor& l) {
    return DTensor::from_local(l.grad().to_local(), m1, {Replicate()});
  };
  tryrec("from_local S0 local grad", [&] {
    DTensor l = lf({2, 3});
    DTensor d = DTensor::from_local(l, m1, {Shard(0)});
    dt::sum(dt::mul(d, d)).backward();
    return lg(l);
  });
  tryrec("from_local Psum local grad", [&] {
    DTensor l = lf({2, 3});
    DTensor d = DTensor::from_local(l, m1, {Partial()});
    dt::sum(dt::mul(d, R23())).backward();
    return lg(l);
  });
  tryrec("from_local Pavg local grad", [&] {
    DTensor l = lf({2, 3});
    DTensor d = DTensor::from_local(l, m1, {Partial(dt::ReduceOp::kAvg)});
    dt::sum(dt::mul(d, R23())).backward();
    return lg(l);
  });
  tryrec("from_local R local grad", [&] {
    DTensor l = lf({2, 3});
    DTensor d = DTensor::from_local(l, m1, {Replicate()});
    dt::sum(dt::mul(d, d)).backward();
    return lg(l);
  });
  tryrec("grad S0->Psum->full pow2", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(0)});
    w.requires_grad_();
    dt::sum(dt::pow(w.redistribute(m1, {Partial()}).full_tensor_dtensor(), 2.0)).backward();
    return w.grad();
  });
  tryrec("grad 2d S0S0->S1R pow2", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m2, {Shard(0), Shard(0)});
    w.requires_grad_();
    dt::sum(dt::pow(w.redistribute(m2, {Shard(1), Replicate()}), 2.0)).backward();
    return w.grad();
  });
  tryrec("grad R->S0 to_local pow2", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Replicate()});
    w.requires_grad_();
    dt::sum(dt::pow(w.redistribute(m1, {Shard(0)}).to_local_dtensor(), 2.0)).backward();
    return w.grad();
  });
  tryrec("grad S1 to_local scaled", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 3}), m1, {Shard(1)});
    w.requires_grad_();
    dt::sum(dt::mul(w.to_local_dtensor({Shard(1)}), double(r + 1))).backward();
    return w.grad();
  });
  tryrec("grad 2d S0R full_tensor", [&] {
    DTensor w = dt::distribute_tensor(ar({4, 3}), m2, {Shard(0), Replicate()});
    w.requires_grad_();
    dt::sum(dt::mul(w.full_tensor_dtensor(),
                    DTensor::from_local(ar({4, 3}), dt::self_mesh(), {Replicate()})))
        .backward();
    return w.grad();
  });
  tryrec("grad mean dim1 of S1", [&] {
    DTensor w = dt::distribute_tensor(ar({5, 4}), m1, {Shard(1)});
    w.requires_grad_();
    dt::sum(
        dt::mul(dt::mean(w, {1}), dt::distribute_tensor(dt::add(ar({5}), 1.0), m1, {Replicate()})))
        .backward();
    return w.grad();
  });
}

void write(const std::string& name, int r) {
  std::ofstream f(name + "_r" + std::to_string(r) + ".json");
  f << "[" << out.str() << "]\n";
  out.str("");
  first = true;
}

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);
  const int r = dt::world_rank();
  auto m1 = dt::init_device_mesh(dt::kCPU, {4}, {"x"});
  auto m2 = dt::init_device_mesh(dt::kCPU, {2, 2}, {"a", "b"});
  round1(m1, m2, r);
  write("dt", r);
  round2(m1, m2, r);
  write("dt2", r);
  round3(m1, m2, r);
  write("dt3", r);
  round4(m1, m2, r);
  write("dt4", r);
}

// DeviceMesh under mpirun (1, 2, 4, 8 ranks). Every rank runs every test case; the meshes a
// case builds depend only on the world size, so all ranks make the same collective calls.
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/device_mesh/device_mesh.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using Catch::Contains;

namespace {

using Ints = std::vector<int64_t>;

// Independent reference: row-major strides and the flat index of a coordinate.
int64_t flat_index(const Ints& coord, const Ints& shape) {
  int64_t stride = 1, idx = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    idx += coord[d] * stride;
    stride *= shape[d];
  }
  return idx;
}

// This world rank's coordinate in (shape, ranks), found by scanning every coordinate.
Ints expected_coordinate(const Ints& shape, const std::vector<int>& ranks, int me) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    Ints c(shape.size());
    int64_t rest = i;
    for (size_t d = shape.size(); d-- > 0;) {
      c[d] = rest % shape[d];
      rest /= shape[d];
    }
    REQUIRE(flat_index(c, shape) == i);
    if (ranks[i] == me) return c;
  }
  return {};
}

// World ranks of the line through `coord` along `dim`, in coordinate order.
std::vector<int> line_ranks(const Ints& shape, const std::vector<int>& ranks, Ints coord,
                            size_t dim) {
  std::vector<int> out;
  for (int64_t k = 0; k < shape[dim]; ++k) {
    coord[dim] = k;
    out.push_back(ranks[flat_index(coord, shape)]);
  }
  return out;
}

Ints to_ints(const dt::Shape& s) {
  return Ints(s.begin(), s.end());
}

int64_t all_reduce_sum(const dt::CommunicatorPtr& comm, int64_t value) {
  dt::Tensor t = dt::from_vector<int64_t>(std::vector<int64_t>{value}, dt::Shape{1});
  comm->all_reduce(t, dt::ReduceOp::kSum)->wait();
  return t.item<int64_t>();
}

// Checks coordinates, local ranks and every per-dim communicator of `mesh` against the
// reference computed from its shape and rank array; all_reduces the world rank over each dim.
void check_mesh(const dt::DeviceMesh& mesh) {
  const int me = dt::world_rank();
  const Ints shape = to_ints(mesh.shape());
  const std::vector<int>& ranks = mesh.ranks();
  REQUIRE(mesh.ndim() == static_cast<int64_t>(shape.size()));
  REQUIRE(mesh.dim_names().size() == shape.size());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  REQUIRE(mesh.size() == n);
  const Ints coord = expected_coordinate(shape, ranks, me);
  REQUIRE(to_ints(mesh.get_coordinate()) == coord);
  REQUIRE(mesh.contains_me() == !coord.empty());
  for (size_t d = 0; d < shape.size(); ++d) {
    INFO("mesh " << mesh.str() << " dim " << d);
    REQUIRE(mesh.size(static_cast<int64_t>(d)) == shape[d]);
    const dt::CommunicatorPtr& comm = mesh.communicator(static_cast<int64_t>(d));
    if (coord.empty()) {
      REQUIRE(comm == nullptr);
      REQUIRE(mesh.get_local_rank(static_cast<int64_t>(d)) == -1);
      REQUIRE(mesh.get_local_rank(mesh.dim_names()[d]) == -1);
      continue;
    }
    REQUIRE(mesh.get_local_rank(static_cast<int64_t>(d)) == coord[d]);
    REQUIRE(mesh.get_local_rank(mesh.dim_names()[d]) == coord[d]);
    REQUIRE(comm != nullptr);
    const std::vector<int> line = line_ranks(shape, ranks, coord, d);
    REQUIRE(comm->size() == shape[d]);
    REQUIRE(comm->rank() == coord[d]);
    REQUIRE(comm->world_ranks() == line);
    const int64_t expect = std::accumulate(line.begin(), line.end(), int64_t{0});
    REQUIRE(all_reduce_sum(comm, me) == expect);
  }
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

}  // namespace

TEST_CASE("1-D mesh over the world", "[device_mesh]") {
  const int w = dt::world_size();
  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w});
  REQUIRE(mesh.defined());
  REQUIRE(mesh.device_type() == dt::kCPU);
  REQUIRE(mesh.dim_names() == std::vector<std::string>{"dim0"});
  REQUIRE(mesh.ranks() == iota_ranks(w));
  REQUIRE(to_ints(mesh.get_coordinate()) == Ints{dt::world_rank()});
  REQUIRE(mesh.communicator(-1) == mesh.communicator(0));
  check_mesh(mesh);
}

TEST_CASE("2-D meshes: coordinates, local ranks, per-dim all_reduce", "[device_mesh]") {
  const int w = dt::world_size();
  const std::vector<Ints> shapes = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {1, 4}, {4, 1},
                                    {2, 3}, {3, 2}, {2, 4}, {4, 2}, {1, 8}, {8, 1}};
  for (const Ints& s : shapes) {
    if (s[0] * s[1] > w) continue;
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, dt::IntSpan(s), {"dp", "tp"});
    REQUIRE(mesh.dim_index("dp") == 0);
    REQUIRE(mesh.dim_index("tp") == 1);
    REQUIRE(mesh.size(-1) == s[1]);
    check_mesh(mesh);
  }
}

TEST_CASE("3-D meshes", "[device_mesh]") {
  const int w = dt::world_size();
  const std::vector<Ints> shapes = {{1, 1, 1}, {1, 2, 1}, {2, 1, 2}, {1, 2, 2}, {2, 2, 2}};
  for (const Ints& s : shapes) {
    if (s[0] * s[1] * s[2] > w) continue;
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, dt::IntSpan(s), {"pp", "dp", "tp"});
    check_mesh(mesh);
  }
  if (w == 8) {
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 2, 2}, {"pp", "dp", "tp"});
    const int me = dt::world_rank();
    REQUIRE(to_ints(mesh.get_coordinate()) == Ints{me / 4, (me / 2) % 2, me % 2});
    // Closed forms: the tp line of rank r is {r & ~1, r | 1}, the pp line {r & 3, (r & 3) + 4}.
    REQUIRE(all_reduce_sum(mesh.communicator(2), me) == (me & ~1) + (me | 1));
    REQUIRE(all_reduce_sum(mesh.communicator(0), me) == 2 * (me & 3) + 4);
  }
}

TEST_CASE("custom rank orders", "[device_mesh]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  // Reversed 1-D.
  std::vector<int> rev = iota_ranks(w);
  std::reverse(rev.begin(), rev.end());
  dt::DeviceMesh r1(dt::kCPU, Ints{w}, rev, {"x"});
  REQUIRE(to_ints(r1.get_coordinate()) == Ints{w - 1 - me});
  REQUIRE(r1.get_local_rank("x") == w - 1 - me);
  check_mesh(r1);
  // Rotated 1-D.
  std::vector<int> rot(static_cast<size_t>(w));
  for (int i = 0; i < w; ++i) rot[i] = (i + 1) % w;
  check_mesh(dt::DeviceMesh(dt::kCPU, Ints{w}, rot));
  if (w % 2 == 0) {
    // Reversed 2-D, and a column-major order.
    dt::DeviceMesh r2(dt::kCPU, Ints{2, w / 2}, rev, {"dp", "tp"});
    check_mesh(r2);
    std::vector<int> colmajor;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < w / 2; ++j) colmajor.push_back(j * 2 + i);
    }
    dt::DeviceMesh cm(dt::kCPU, Ints{2, w / 2}, colmajor, {"dp", "tp"});
    check_mesh(cm);
    // Odd ranks only, reversed: a permutation of a subset of the world.
    std::vector<int> odd;
    for (int r = w - 1; r >= 0; --r) {
      if (r % 2 == 1) odd.push_back(r);
    }
    dt::DeviceMesh om(dt::kCPU, Ints{static_cast<int64_t>(odd.size())}, odd);
    REQUIRE(om.contains_me() == (me % 2 == 1));
    check_mesh(om);
    if (w == 8) {
      dt::DeviceMesh om2(dt::kCPU, Ints{2, 2}, odd, {"a", "b"});  // [[7, 5], [3, 1]]
      check_mesh(om2);
      REQUIRE(om2.str() == "DeviceMesh(cpu, [[7, 5], [3, 1]], dims=(a, b))");
    }
  }
}

TEST_CASE("mesh smaller than the world", "[device_mesh]") {
  const int w = dt::world_size();
  const int me = dt::world_rank();
  if (w >= 2) {
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {w - 1}, {"x"});
    REQUIRE(mesh.contains_me() == (me < w - 1));
    if (me == w - 1) {
      REQUIRE(mesh.get_coordinate().empty());
      REQUIRE(mesh.communicator(0) == nullptr);
      REQUIRE(mesh.get_local_rank("x") == -1);
    }
    check_mesh(mesh);
  }
  if (w >= 6) {
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {2, 3}, {"dp", "tp"});
    REQUIRE(mesh.contains_me() == (me < 6));
    check_mesh(mesh);
    // A submesh on an outside rank is the slice through coordinate 0 and does not contain it.
    dt::DeviceMesh tp = mesh["tp"];
    if (me >= 6) {
      REQUIRE(tp.ranks() == std::vector<int>{0, 1, 2});
      REQUIRE_FALSE(tp.contains_me());
      REQUIRE(tp.communicator(0) == nullptr);
    }
    check_mesh(tp);
  }
}

TEST_CASE("submeshes share the parent's communicators", "[device_mesh]") {
  const int w = dt::world_size();
  const std::vector<Ints> shapes = {{1, 1, 1}, {1, 2, 1}, {2, 1, 2}, {1, 2, 2}, {2, 2, 2}};
  for (const Ints& s : shapes) {
    if (s[0] * s[1] * s[2] > w) continue;
    INFO("shape " << dt::shape_str(dt::IntSpan(s)));
    dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, dt::IntSpan(s), {"pp", "dp", "tp"});
    const Ints c = to_ints(mesh.get_coordinate());
    const std::vector<int>& ranks = mesh.ranks();

    dt::DeviceMesh tp = mesh["tp"];
    REQUIRE(tp.ndim() == 1);
    REQUIRE(tp.dim_names() == std::vector<std::string>{"tp"});
    REQUIRE(to_ints(tp.shape()) == Ints{s[2]});
    if (!c.empty()) {
      REQUIRE(tp.ranks() == line_ranks(s, ranks, c, 2));
      REQUIRE(to_ints(tp.get_coordinate()) == Ints{c[2]});
    }
    REQUIRE(tp.communicator(0) == mesh.communicator(2));
    check_mesh(tp);

    dt::DeviceMesh dp_tp = mesh[{"dp", "tp"}];
    REQUIRE(to_ints(dp_tp.shape()) == Ints{s[1], s[2]});
    REQUIRE(dp_tp.dim_names() == std::vector<std::string>{"dp", "tp"});
    if (!c.empty()) {
      std::vector<int> expect;
      for (int64_t i = 0; i < s[1]; ++i) {
        for (int64_t j = 0; j < s[2]; ++j) expect.push_back(ranks[flat_index({c[0], i, j}, s)]);
      }
      REQUIRE(dp_tp.ranks() == expect);
      REQUIRE(to_ints(dp_tp.get_coordinate()) == Ints{c[1], c[2]});
    }
    REQUIRE(dp_tp.communicator(0) == mesh.communicator(1));
    REQUIRE(dp_tp.communicator(1) == mesh.communicator(2));
    check_mesh(dp_tp);

    // Reordered dims: the transposed slice.
    dt::DeviceMesh tp_pp = mesh[{"tp", "pp"}];
    REQUIRE(to_ints(tp_pp.shape()) == Ints{s[2], s[0]});
    if (!c.empty()) {
      std::vector<int> expect;
      for (int64_t i = 0; i < s[2]; ++i) {
        for (int64_t j = 0; j < s[0]; ++j) expect.push_back(ranks[flat_index({j, c[1], i}, s)]);
      }
      REQUIRE(tp_pp.ranks() == expect);
    }
    REQUIRE(tp_pp.communicator(0) == mesh.communicator(2));
    REQUIRE(tp_pp.communicator(1) == mesh.communicator(0));
    check_mesh(tp_pp);

    // By index (negative counts from the end) equals by name; a submesh of a submesh.
    REQUIRE(mesh.submesh({-1}) == tp);
    REQUIRE(mesh.submesh({1, 2}) == dp_tp);
    REQUIRE(dp_tp["tp"] == tp);
    REQUIRE(dp_tp["tp"].hash() == tp.hash());
    // Full-rank submesh in the original order is the mesh itself.
    REQUIRE(mesh.submesh({0, 1, 2}) == mesh);

    REQUIRE_THROWS_WITH(
        mesh["sp"], Contains("[DeviceMesh] unknown mesh dim name 'sp' (mesh dims: pp, dp, tp)"));
    REQUIRE_THROWS_WITH(mesh.submesh({}), Contains("[DeviceMesh] submesh dims is empty"));
    REQUIRE_THROWS_WITH(mesh.submesh({1, -2}), Contains("name mesh dim 1 twice"));
    REQUIRE_THROWS_WITH(mesh.submesh({3}),
                        Contains("[DeviceMesh] mesh dim 3 out of range for a 3-d mesh"));
  }
}

TEST_CASE("identical meshes reuse registered communicators", "[device_mesh]") {
  const int w = dt::world_size();
  dt::DeviceMesh a = dt::init_device_mesh(dt::kCPU, {w}, {"a"});
  const int64_t entries = dt::device_mesh_registry_size();
  REQUIRE(entries >= 1);
  for (int i = 0; i < 20; ++i) {
    dt::DeviceMesh b = dt::init_device_mesh(dt::kCPU, {w}, {"b"});
    REQUIRE(b.communicator(0) == a.communicator(0));
    REQUIRE_FALSE(b == a);  // names differ
  }
  dt::DeviceMesh same(dt::kCPU, Ints{w}, iota_ranks(w), {"a"});
  REQUIRE(same == a);
  REQUIRE(same.hash() == a.hash());
  REQUIRE(same.communicator(0) == a.communicator(0));
  REQUIRE(dt::device_mesh_registry_size() == entries);
  if (w > 1) {
    std::vector<int> rev = iota_ranks(w);
    std::reverse(rev.begin(), rev.end());
    dt::DeviceMesh r(dt::kCPU, Ints{w}, rev, {"a"});
    REQUIRE(r.communicator(0) != a.communicator(0));
    REQUIRE_FALSE(r == a);
  }
  // After clearing (on every rank), building the mesh again splits anew.
  const dt::CommunicatorPtr old = a.communicator(0);
  dt::clear_device_mesh_registry();
  REQUIRE(dt::device_mesh_registry_size() == 0);
  dt::DeviceMesh c = dt::init_device_mesh(dt::kCPU, {w}, {"a"});
  REQUIRE(c.communicator(0) != old);
  REQUIRE(c == a);
  REQUIRE(dt::device_mesh_registry_size() == 1);
  REQUIRE(a.communicator(0) == old);  // existing handles stay valid
  check_mesh(a);
  check_mesh(c);
}

TEST_CASE("communicator descriptions name the mesh dim", "[device_mesh]") {
  const int w = dt::world_size();
  // Rotated by 2 ranks, so no earlier test registered this exact mesh (except at w <= 2,
  // where the rank list may coincide: then only the prefix is checked).
  std::vector<int> rot(static_cast<size_t>(w));
  for (int i = 0; i < w; ++i) rot[i] = (i + 2) % w;
  dt::DeviceMesh mesh(dt::kCPU, Ints{1, w}, rot, {"row", "col"});
  REQUIRE_THAT(mesh.communicator(0)->description(), Catch::StartsWith("mesh dim 0"));
  REQUIRE_THAT(mesh.communicator(1)->description(), Catch::StartsWith("mesh dim 1"));
  if (w > 2) {
    REQUIRE(mesh.communicator(0)->description() == "mesh dim 0 (row)");
    REQUIRE(mesh.communicator(1)->description() == "mesh dim 1 (col)");
  }
}

TEST_CASE("str, equality and hashing", "[device_mesh]") {
  const int w = dt::world_size();
  dt::DeviceMesh m1 = dt::init_device_mesh(dt::kCPU, {w});
  REQUIRE(m1.str().rfind("DeviceMesh(cpu, [0", 0) == 0);
  if (w == 1) REQUIRE(m1.str() == "DeviceMesh(cpu, [0], dims=(dim0))");
  if (w >= 4) {
    dt::DeviceMesh m = dt::init_device_mesh(dt::kCPU, {2, 2}, {"dp", "tp"});
    REQUIRE(m.str() == "DeviceMesh(cpu, [[0, 1], [2, 3]], dims=(dp, tp))");
  }
  if (w == 8) {
    dt::DeviceMesh m = dt::init_device_mesh(dt::kCPU, {2, 2, 2});
    REQUIRE(m.str() ==
            "DeviceMesh(cpu, [[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dims=(dim0, dim1, dim2))");
  }
  dt::DeviceMesh copy = m1;
  REQUIRE(copy == m1);
  dt::DeviceMesh m2 = dt::init_device_mesh(dt::kCPU, {w});
  REQUIRE(m2 == m1);
  REQUIRE(m2.hash() == m1.hash());
  dt::DeviceMesh named = dt::init_device_mesh(dt::kCPU, {w}, {"x"});
  REQUIRE_FALSE(named == m1);
  dt::DeviceMesh two_d = dt::init_device_mesh(dt::kCPU, {1, w});
  REQUIRE_FALSE(two_d == m1);
  absl::flat_hash_set<dt::DeviceMesh> set = {m1, m2, named, two_d};
  REQUIRE(set.size() == 3);
  REQUIRE(set.contains(copy));

  dt::DeviceMesh empty;
  REQUIRE_FALSE(empty.defined());
  REQUIRE(empty == dt::DeviceMesh());
  REQUIRE_FALSE(empty == m1);
  REQUIRE(empty.hash() == 0);
  REQUIRE_THROWS_WITH(empty.ndim(), Contains("[DeviceMesh] empty DeviceMesh handle"));
  REQUIRE_THROWS_AS(empty.communicator(0), dt::Error);
}

TEST_CASE("bad meshes raise clear errors on every rank before communicating", "[device_mesh]") {
  const int w = dt::world_size();
  const int64_t entries = dt::device_mesh_registry_size();
  const std::string W = std::to_string(w);

  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{2, 2}, {0, 1, 2}),
                      Contains("[DeviceMesh] ranks has 3 entries but mesh_shape [2, 2] needs 4"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{1}, {w}),
                      Contains("[DeviceMesh] ranks[0] = " + W +
                               " is not a world rank (expected 0.." + std::to_string(w - 1) + ")"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{1}, {-1}),
                      Contains("[DeviceMesh] ranks[0] = -1 is not a world rank"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{2}, {0, 0}),
                      Contains("[DeviceMesh] ranks[1] = 0 repeats ranks[0]"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{2, 0}, {}),
                      Contains("[DeviceMesh] mesh_shape [2, 0] has size 0 at dim 1"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{-1}, {0}),
                      Contains("[DeviceMesh] mesh_shape [-1] has size -1 at dim 0"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{}, {0}),
                      Contains("[DeviceMesh] mesh_shape is empty"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{1}, {0}, {"a", "b"}),
                      Contains("[DeviceMesh] dim_names has 2 names but mesh_shape [1] has 1 dims"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{1, 1}, {0}, {"a", "a"}),
                      Contains("[DeviceMesh] dim_names has 'a' twice"));
  REQUIRE_THROWS_WITH(dt::DeviceMesh(dt::kCPU, Ints{1}, {0}, {""}),
                      Contains("[DeviceMesh] dim_names[0] is empty"));
  REQUIRE_THROWS_AS(dt::DeviceMesh(dt::kCPU, Ints{int64_t{1} << 40, int64_t{1} << 40}, {0}),
                    dt::Error);

  const std::string need = std::to_string(2 * w);
  REQUIRE_THROWS_WITH(
      dt::init_device_mesh(dt::kCPU, {2, w}),
      Contains("[init_device_mesh] mesh shape [2, " + W + "] needs " + need +
               " ranks but the world has " + W + " (launch with mpirun -np " + need + ")"));
  REQUIRE_THROWS_WITH(dt::init_device_mesh(dt::kCPU, {0}),
                      Contains("[init_device_mesh] mesh_shape [0] has size 0 at dim 0"));
  REQUIRE_THROWS_WITH(dt::init_device_mesh(dt::kCPU, {1}, {"a", "b"}),
                      Contains("[init_device_mesh] dim_names has 2 names"));

  dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {1, 1}, {"dp", "tp"});
  REQUIRE_THROWS_WITH(mesh.dim_index("x"),
                      Contains("[DeviceMesh] unknown mesh dim name 'x' (mesh dims: dp, tp)"));
  REQUIRE_THROWS_WITH(mesh.get_local_rank("x"), Contains("unknown mesh dim name 'x'"));
  REQUIRE_THROWS_WITH(mesh.get_local_rank(2),
                      Contains("[DeviceMesh] mesh dim 2 out of range for a 2-d mesh "
                               "(expected -2..1)"));
  REQUIRE_THROWS_WITH(mesh.size(-3), Contains("[DeviceMesh] mesh dim -3 out of range"));
  REQUIRE_THROWS_AS(mesh.communicator(5), dt::Error);

  // Failed constructions registered nothing (the {1, 1} mesh above may be new).
  REQUIRE(dt::device_mesh_registry_size() <= entries + 1);
  // No rank is stuck: a world-wide collective still completes.
  dt::DeviceMesh world = dt::init_device_mesh(dt::kCPU, {w});
  REQUIRE(all_reduce_sum(world.communicator(0), 1) == w);
}

TEST_CASE("nested MeshGuards form a thread-local stack", "[device_mesh]") {
  const int w = dt::world_size();
  REQUIRE_FALSE(dt::has_current_mesh());
  REQUIRE_THROWS_WITH(dt::current_mesh(),
                      Contains("[current_mesh] no device mesh is set: pass a mesh or open a "
                               "dtensor::MeshGuard"));
  dt::DeviceMesh outer = dt::init_device_mesh(dt::kCPU, {w}, {"outer"});
  dt::DeviceMesh inner = dt::init_device_mesh(dt::kCPU, {1, w}, {"dp", "tp"});
  {
    dt::MeshGuard g1(outer);
    REQUIRE(dt::has_current_mesh());
    REQUIRE(dt::current_mesh() == outer);
    {
      dt::MeshGuard g2(inner);
      REQUIRE(dt::current_mesh() == inner);
      {
        dt::MeshGuard g3(inner["tp"]);
        REQUIRE(dt::current_mesh() == inner["tp"]);
        bool other_thread_has_mesh = true;
        std::thread t([&] { other_thread_has_mesh = dt::has_current_mesh(); });
        t.join();
        REQUIRE_FALSE(other_thread_has_mesh);
      }
      REQUIRE(dt::current_mesh() == inner);
    }
    REQUIRE(dt::current_mesh() == outer);
    REQUIRE_THROWS_WITH(dt::MeshGuard(dt::DeviceMesh()), Contains("[MeshGuard]"));
    REQUIRE(dt::current_mesh() == outer);
  }
  REQUIRE_FALSE(dt::has_current_mesh());
}

TEST_CASE("a mesh of just this process is built without communication", "[device_mesh]") {
  const int me = dt::world_rank();
  const int n = dt::world_size();
  // Only even ranks build their self mesh: were construction collective, odd ranks would never
  // join and the job would end on the collective deadline instead of passing.
  if (me % 2 == 0) {
    dt::DeviceMesh self(dt::kCPU, {1}, {me}, {"solo"});
    REQUIRE(self.get_coordinate() == dt::Shape{0});
    const auto& comm = self.communicator(0);
    REQUIRE(comm != nullptr);
    REQUIRE(comm->size() == 1);
    REQUIRE(comm->world_ranks() == std::vector<int>{me});
    // (the description keeps the names of the first identical mesh registered)
    REQUIRE_THAT(comm->description(), Contains("mesh dim 0"));
    dt::Tensor t = dt::full({3}, 5.0f);
    comm->all_reduce(t, dt::ReduceOp::kSum)->wait();
    REQUIRE(t.to_vector<float>() == std::vector<float>{5, 5, 5});
  }
  // A size-1 dim inside a larger mesh also skips its split, consistently on every rank.
  dt::DeviceMesh m(dt::kCPU, {1, static_cast<int64_t>(n)}, [&] {
    std::vector<int> r(static_cast<size_t>(n));
    std::iota(r.begin(), r.end(), 0);
    return r;
  }());
  REQUIRE(m.communicator(0)->size() == 1);
  REQUIRE(m.communicator(1)->size() == n);
  dt::Tensor v = dt::full({1}, 1.0f);
  m.communicator(1)->all_reduce(v, dt::ReduceOp::kSum)->wait();
  REQUIRE(v.to_vector<float>()[0] == static_cast<float>(n));
}

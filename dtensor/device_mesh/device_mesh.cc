#include "dtensor/device_mesh/device_mesh.h"

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <tuple>
#include <utility>

#include "dtensor/collectives/comm_worker.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/stable_hash.h"

namespace dtensor {

struct DeviceMesh::Impl {
  DeviceType device_type = DeviceType::kCPU;
  Shape shape;
  std::vector<int> ranks;
  std::vector<std::string> dim_names;
  Shape coordinate;                    // empty outside the mesh
  std::vector<CommunicatorPtr> comms;  // one per dim; nullptr entries outside the mesh
  size_t hash = 0;
};

namespace detail {
namespace {

// ---- the communicator registry ---------------------------------------------------------------

struct MeshKey {
  DeviceType device_type;
  Shape shape;
  std::vector<int> ranks;

  bool operator==(const MeshKey& o) const {
    return device_type == o.device_type && shape == o.shape && ranks == o.ranks;
  }
  template <typename H>
  friend H AbslHashValue(H h, const MeshKey& k) {
    return H::combine(std::move(h), static_cast<uint8_t>(k.device_type), k.shape, k.ranks);
  }
};

// A flattened group: its world ranks in communicator order.
struct GroupKey {
  DeviceType device_type;
  std::vector<int> ranks;

  bool operator==(const GroupKey& o) const {
    return device_type == o.device_type && ranks == o.ranks;
  }
  template <typename H>
  friend H AbslHashValue(H h, const GroupKey& k) {
    return H::combine(std::move(h), static_cast<uint8_t>(k.device_type), k.ranks);
  }
};

struct Registry {
  std::mutex mu;
  absl::flat_hash_map<MeshKey, std::vector<CommunicatorPtr>> comms;
  absl::flat_hash_map<GroupKey, CommunicatorPtr> flattened;
};

// Deliberately leaked: communicators must not be destroyed after MPI_Finalize by static
// destructors.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// ---- validation (depends only on the arguments and the world size) ---------------------------

// prod(shape), saturating at int64 max. Every size is >= 1 when called.
int64_t saturating_numel(IntSpan shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (n > std::numeric_limits<int64_t>::max() / s) return std::numeric_limits<int64_t>::max();
    n *= s;
  }
  return n;
}

void check_shape(std::string_view op, IntSpan shape) {
  DT_CHECK(!shape.empty(), "[%s] mesh_shape is empty (expected at least one dim)", op);
  for (size_t d = 0; d < shape.size(); ++d) {
    DT_CHECK(shape[d] >= 1, "[%s] mesh_shape %s has size %d at dim %d (expected every size >= 1)",
             op, shape_str(shape), shape[d], d);
  }
}

void check_names(std::string_view op, IntSpan shape, const std::vector<std::string>& names) {
  if (names.empty()) return;
  DT_CHECK(names.size() == shape.size(),
           "[%s] dim_names has %d names but mesh_shape %s has %d dims (expected one name per dim "
           "or none)",
           op, names.size(), shape_str(shape), shape.size());
  for (size_t i = 0; i < names.size(); ++i) {
    DT_CHECK(!names[i].empty(), "[%s] dim_names[%d] is empty (expected a non-empty name)", op, i);
    for (size_t j = 0; j < i; ++j) {
      DT_CHECK(names[i] != names[j],
               "[%s] dim_names has '%s' twice (dims %d and %d; expected unique names)", op,
               names[i], j, i);
    }
  }
}

void check_ranks(IntSpan shape, const std::vector<int>& ranks, int world) {
  const int64_t need = saturating_numel(shape);
  if (need == std::numeric_limits<int64_t>::max()) {
    DT_FAIL("[DeviceMesh] mesh_shape %s has more than 2^63 entries (ranks has %d)",
            shape_str(shape), ranks.size());
  }
  DT_CHECK(static_cast<int64_t>(ranks.size()) == need,
           "[DeviceMesh] ranks has %d entries but mesh_shape %s needs %d (the product of its "
           "sizes)",
           ranks.size(), shape_str(shape), need);
  std::vector<int> first_at(static_cast<size_t>(world), -1);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    DT_CHECK(r >= 0 && r < world,
             "[DeviceMesh] ranks[%d] = %d is not a world rank (expected 0..%d)", i, r, world - 1);
    DT_CHECK(first_at[r] < 0,
             "[DeviceMesh] ranks[%d] = %d repeats ranks[%d] (expected each world rank at most "
             "once)",
             i, r, first_at[r]);
    first_at[r] = static_cast<int>(i);
  }
}

int64_t mesh_dim(int64_t dim, int64_t ndim) {
  DT_CHECK(dim >= -ndim && dim < ndim,
           "[DeviceMesh] mesh dim %d out of range for a %d-d mesh (expected %d..%d)", dim, ndim,
           -ndim, ndim - 1);
  return dim < 0 ? dim + ndim : dim;
}

// Row-major unravel of `index`.
Shape unravel(int64_t index, IntSpan shape) {
  Shape coord(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    coord[d] = index % shape[d];
    index /= shape[d];
  }
  return coord;
}

int64_t ravel(IntSpan coord, IntSpan shape) {
  int64_t index = 0;
  for (size_t d = 0; d < shape.size(); ++d) index = index * shape[d] + coord[d];
  return index;
}

void append_nested(std::string& out, const std::vector<int>& ranks, IntSpan shape, size_t dim,
                   int64_t& next) {
  out += '[';
  for (int64_t i = 0; i < shape[dim]; ++i) {
    if (i > 0) out += ", ";
    if (dim + 1 == shape.size()) {
      absl::StrAppendFormat(&out, "%d", ranks[next++]);
    } else {
      append_nested(out, ranks, shape, dim + 1, next);
    }
  }
  out += ']';
}

// ---- cross-rank agreement on the mesh being built ------------------------------------------

// The layout one rank builds, flattened: [device type, ndim, shape..., ranks...].
std::vector<int64_t> layout_words(DeviceType t, IntSpan shape, const std::vector<int>& ranks) {
  std::vector<int64_t> w;
  w.reserve(2 + shape.size() + ranks.size());
  w.push_back(static_cast<int64_t>(t));
  w.push_back(static_cast<int64_t>(shape.size()));
  w.insert(w.end(), shape.begin(), shape.end());
  w.insert(w.end(), ranks.begin(), ranks.end());
  return w;
}

std::string layout_str(const int64_t* w, int64_t len) {
  if (len < 2 || w[1] < 1 || len < 2 + w[1]) return "an unreadable layout";
  const Shape shape(w + 2, w + 2 + w[1]);
  const std::vector<int> ranks(w + 2 + w[1], w + len);
  if (static_cast<int64_t>(ranks.size()) != saturating_numel(shape)) return "an unreadable layout";
  std::string out = absl::StrFormat(
      "DeviceMesh(%s, ", w[0] == static_cast<int64_t>(DeviceType::kCUDA) ? "cuda" : "cpu");
  int64_t next = 0;
  append_nested(out, ranks, shape, 0, next);
  return out + ")";
}

// Every world rank must be building the same mesh (device type, shape, rank order) at this
// point: the splits that follow are collective over the world, and a rank building another
// mesh, or none, would pair its splits with whatever the others do. One small checked
// all_gather of (hash, ndim, numel) per rank; on a mismatch, a second one of the full layouts
// names what each rank builds. Raises the same message on every rank.
void check_same_mesh_everywhere(const CommunicatorPtr& world, DeviceType t, IntSpan shape,
                                const std::vector<int>& ranks) {
  const std::vector<int64_t> mine = layout_words(t, shape, ranks);
  const int n = world->size();
  const int64_t three = 3, all3 = 3 * static_cast<int64_t>(n);
  const uint64_t hash = stable_hash(mine.data(), mine.size() * sizeof(int64_t));
  int64_t summary[3] = {static_cast<int64_t>(hash), static_cast<int64_t>(shape.size()),
                        static_cast<int64_t>(ranks.size())};
  std::vector<int64_t> all(static_cast<size_t>(all3));
  world
      ->all_gather(from_blob(all.data(), {&all3, 1}, DType::kInt64),
                   from_blob(summary, {&three, 1}, DType::kInt64))
      ->wait();
  bool same = true;
  int64_t longest = 0;
  for (int r = 0; r < n; ++r) {
    same = same && std::equal(all.begin() + 3 * r, all.begin() + 3 * r + 3, all.begin());
    longest = std::max(longest, 2 + all[3 * r + 1] + all[3 * r + 2]);
  }
  if (same) return;
  // Every rank saw the same summaries, so every rank takes this path together.
  std::vector<int64_t> padded(static_cast<size_t>(longest), -1);
  std::copy(mine.begin(), mine.end(), padded.begin());
  const int64_t total = longest * n;
  std::vector<int64_t> layouts(static_cast<size_t>(total));
  world
      ->all_gather(from_blob(layouts.data(), {&total, 1}, DType::kInt64),
                   from_blob(padded.data(), {&longest, 1}, DType::kInt64))
      ->wait();
  // Group ranks by layout, rank 0's group last in the sentence.
  std::vector<std::string> text(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    text[r] = layout_str(layouts.data() + r * longest, 2 + all[3 * r + 1] + all[3 * r + 2]);
  }
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < n; ++r) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const auto& e) { return e.first == text[r]; });
    if (g == groups.end()) {
      groups.push_back({text[r], {}});
      g = groups.end() - 1;
    }
    g->second.push_back(world->world_ranks()[r]);
  }
  auto who = [](const std::vector<int>& rs) {
    return absl::StrFormat("%s %s", rs.size() == 1 ? "rank" : "ranks", absl::StrJoin(rs, ", "));
  };
  std::vector<std::string> others;
  for (size_t g = 1; g < groups.size(); ++g) {
    others.push_back(absl::StrFormat("%s build%s %s", who(groups[g].second),
                                     groups[g].second.size() == 1 ? "s" : "", groups[g].first));
  }
  DT_FAIL(
      "[DeviceMesh] the ranks build different meshes: %s where %s build%s %s (every world rank "
      "must construct the same meshes, with the same shape and rank order, in the same order)",
      absl::StrJoin(others, "; "), who(groups[0].second), groups[0].second.size() == 1 ? "s" : "",
      groups[0].first);
}

}  // namespace
}  // namespace detail

namespace {
std::string hash_fields_str(DeviceType t, IntSpan shape, const std::vector<int>& ranks) {
  const std::vector<int64_t> w = detail::layout_words(t, shape, ranks);
  return detail::layout_str(w.data(), static_cast<int64_t>(w.size()));
}

size_t hash_fields(DeviceType t, const Shape& shape, const std::vector<int>& ranks,
                   const std::vector<std::string>& names) {
  return absl::Hash<std::tuple<uint8_t, Shape, std::vector<int>, std::vector<std::string>>>{}(
      std::make_tuple(static_cast<uint8_t>(t), shape, ranks, names));
}
}  // namespace

DeviceMesh::DeviceMesh(DeviceType device_type, IntSpan mesh_shape, std::vector<int> ranks,
                       std::vector<std::string> dim_names) {
  const int world = world_size();
  detail::check_shape("DeviceMesh", mesh_shape);
  detail::check_ranks(mesh_shape, ranks, world);
  detail::check_names("DeviceMesh", mesh_shape, dim_names);

  auto impl = std::make_shared<Impl>();
  impl->device_type = device_type;
  impl->shape = Shape(mesh_shape.begin(), mesh_shape.end());
  impl->ranks = std::move(ranks);
  const int64_t nd = static_cast<int64_t>(mesh_shape.size());
  if (dim_names.empty()) {
    for (int64_t d = 0; d < nd; ++d) dim_names.push_back(absl::StrFormat("dim%d", d));
  }
  impl->dim_names = std::move(dim_names);

  const int me = world_rank();
  const auto it = std::find(impl->ranks.begin(), impl->ranks.end(), me);
  if (it != impl->ranks.end()) {
    impl->coordinate = detail::unravel(it - impl->ranks.begin(), impl->shape);
  }

  // Every world rank must be building this mesh now, registered or not: a rank that finds it
  // in its registry would otherwise skip the splits another rank makes. (A mesh whose dims
  // all have size 1 involves no other rank and is built without communication.)
  if (std::any_of(impl->shape.begin(), impl->shape.end(), [](int64_t s) { return s > 1; })) {
    CollectiveLabel label("DeviceMesh");
    try {
      detail::check_same_mesh_everywhere(world_communicator(DeviceType::kCPU), device_type,
                                         impl->shape, impl->ranks);
    } catch (const Error& e) {
      // A rank doing something else (another collective) shows up in the check's own
      // mismatch report; say which mesh this rank was building.
      const std::string what = e.what();
      if (what.rfind("[DeviceMesh]", 0) == 0) throw;
      DT_FAIL("[DeviceMesh] building %s on this rank: %s",
              hash_fields_str(device_type, impl->shape, impl->ranks), what);
    }
  }
  detail::Registry& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  detail::MeshKey key{device_type, impl->shape, impl->ranks};
  auto found = reg.comms.find(key);
  if (found != reg.comms.end()) {
    impl->comms = found->second;
  } else {
    // Collective over the whole world: every rank calls split once per dim of size > 1, in
    // dim order. A dim of size 1 needs no split (each line is a single rank), so it takes a
    // self communicator; a mesh whose dims all have size 1 (e.g. the 1-rank mesh of just this
    // process) is therefore built without any communication. Every rank sees the same shape,
    // so all of them skip the same splits.
    std::vector<CommunicatorPtr> comms;
    comms.reserve(static_cast<size_t>(nd));
    for (int64_t d = 0; d < nd; ++d) {
      if (impl->shape[d] == 1) {
        CommunicatorPtr self;
        if (!impl->coordinate.empty()) {
          self = self_communicator(device_type);
          self->set_description(absl::StrFormat("mesh dim %d (%s)", d, impl->dim_names[d]));
        }
        comms.push_back(std::move(self));
        continue;
      }
      CommunicatorPtr world_comm = world_communicator(device_type);
      DT_CHECK(world_comm != nullptr, "[DeviceMesh] no world communicator for device type %s",
               device_type_name(device_type));
      int color = -1;
      int key_along = 0;
      if (!impl->coordinate.empty()) {
        // Index of this rank's line along d: the row-major index of the coordinate with dim d
        // removed. E.g. shape [2, 3, 4], coordinate (1, 2, 3), d = 1: color = 1 * 4 + 3 = 7.
        int64_t c = 0;
        for (int64_t e = 0; e < nd; ++e) {
          if (e != d) c = c * impl->shape[e] + impl->coordinate[e];
        }
        color = static_cast<int>(c);
        key_along = static_cast<int>(impl->coordinate[d]);
      }
      CommunicatorPtr comm;
      if (world_comm->backend() != "fake") {
        comm = world_comm->split(color, key_along);
      } else if (!impl->coordinate.empty()) {
        // The fake backend cannot split (no peers tell their colors): this rank's line along d
        // is known from the mesh alone, so its communicator is made from the members.
        std::vector<int> line;
        Shape at = impl->coordinate;
        for (at[d] = 0; at[d] < impl->shape[d]; ++at[d]) {
          line.push_back(impl->ranks[detail::ravel(at, impl->shape)]);
        }
        comm = world_comm->create_group(line);
      }
      if (comm) comm->set_description(absl::StrFormat("mesh dim %d (%s)", d, impl->dim_names[d]));
      comms.push_back(std::move(comm));
    }
    reg.comms.emplace(std::move(key), comms);
    impl->comms = std::move(comms);
  }
  impl->hash = hash_fields(impl->device_type, impl->shape, impl->ranks, impl->dim_names);
  impl_ = std::move(impl);
}

const DeviceMesh::Impl& DeviceMesh::impl() const {
  DT_CHECK(impl_ != nullptr,
           "[DeviceMesh] empty DeviceMesh handle (expected a mesh built by DeviceMesh or "
           "init_device_mesh)");
  return *impl_;
}

DeviceType DeviceMesh::device_type() const {
  return impl().device_type;
}
int64_t DeviceMesh::ndim() const {
  return static_cast<int64_t>(impl().shape.size());
}
const Shape& DeviceMesh::shape() const {
  return impl().shape;
}
int64_t DeviceMesh::size() const {
  return static_cast<int64_t>(impl().ranks.size());
}
int64_t DeviceMesh::size(int64_t dim) const {
  const Impl& m = impl();
  return m.shape[detail::mesh_dim(dim, static_cast<int64_t>(m.shape.size()))];
}
const std::vector<std::string>& DeviceMesh::dim_names() const {
  return impl().dim_names;
}
const std::vector<int>& DeviceMesh::ranks() const {
  return impl().ranks;
}
const Shape& DeviceMesh::get_coordinate() const {
  return impl().coordinate;
}

int64_t DeviceMesh::dim_index(std::string_view name) const {
  const Impl& m = impl();
  for (size_t d = 0; d < m.dim_names.size(); ++d) {
    if (m.dim_names[d] == name) return static_cast<int64_t>(d);
  }
  DT_FAIL("[DeviceMesh] unknown mesh dim name '%s' (mesh dims: %s)", name,
          absl::StrJoin(m.dim_names, ", "));
}

int64_t DeviceMesh::get_local_rank(int64_t dim) const {
  const Impl& m = impl();
  const int64_t d = detail::mesh_dim(dim, static_cast<int64_t>(m.shape.size()));
  return m.coordinate.empty() ? -1 : m.coordinate[d];
}

int64_t DeviceMesh::get_local_rank(std::string_view dim_name) const {
  return get_local_rank(dim_index(dim_name));
}

const CommunicatorPtr& DeviceMesh::communicator(int64_t dim) const {
  const Impl& m = impl();
  return m.comms[detail::mesh_dim(dim, static_cast<int64_t>(m.shape.size()))];
}

CommunicatorPtr DeviceMesh::flattened_communicator(const std::vector<int64_t>& dims) const {
  const Impl& m = impl();
  const int64_t nd = static_cast<int64_t>(m.shape.size());
  DT_CHECK(!dims.empty(),
           "[DeviceMesh] flattened_communicator dims is empty (expected at least one mesh dim)");
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    const int64_t nd_d = detail::mesh_dim(d, nd);
    DT_CHECK(std::find(ds.begin(), ds.end(), nd_d) == ds.end(),
             "[DeviceMesh] flattened_communicator dims [%s] name mesh dim %d twice (expected "
             "distinct dims)",
             absl::StrJoin(dims, ", "), nd_d);
    ds.push_back(nd_d);
  }
  std::sort(ds.begin(), ds.end());
  if (m.coordinate.empty()) return nullptr;
  // Dims of size 1 add nothing to the group.
  std::vector<int64_t> moving;
  for (int64_t d : ds) {
    if (m.shape[d] > 1) moving.push_back(d);
  }
  if (moving.size() <= 1) return m.comms[moving.empty() ? ds[0] : moving[0]];

  Shape group_shape;
  for (int64_t d : moving) group_shape.push_back(m.shape[d]);
  const int64_t n = shape_numel(group_shape);
  detail::GroupKey key{m.device_type, {}};
  key.ranks.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const Shape gc = detail::unravel(i, group_shape);
    Shape full = m.coordinate;
    for (size_t j = 0; j < moving.size(); ++j) full[moving[j]] = gc[j];
    key.ranks.push_back(m.ranks[detail::ravel(full, m.shape)]);
  }
  detail::Registry& reg = detail::registry();
  {
    // Made before: returned without waiting for async tasks (a redistribute over flattened dims
    // would otherwise wait for every data-parallel reduction in flight).
    std::lock_guard<std::mutex> lock(reg.mu);
    auto found = reg.flattened.find(key);
    if (found != reg.flattened.end()) return found->second;
  }
  // Creating it issues collectives while holding the registry lock, which an async task may
  // need: earlier tasks run first.
  drain_async();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto found = reg.flattened.find(key);
  if (found != reg.flattened.end()) return found->second;
  // MPI_Comm_create_group has no deadline: meeting on each flattened dim's lines first makes a
  // missing member end the job there (every member meets its own lines, which together
  // connect the whole group).
  std::vector<std::string> names;
  for (int64_t d : moving) {
    m.comms[d]->meet();
    names.push_back(m.dim_names[d]);
  }
  CommunicatorPtr world_comm = world_communicator(m.device_type);
  DT_CHECK(world_comm != nullptr, "[DeviceMesh] no world communicator for device type %s",
           device_type_name(m.device_type));
  CommunicatorPtr comm = world_comm->create_group(key.ranks);
  comm->set_description(
      absl::StrFormat("mesh dims %s (%s)", absl::StrJoin(moving, "+"), absl::StrJoin(names, ", ")));
  reg.flattened.emplace(std::move(key), comm);
  return comm;
}

DeviceMesh DeviceMesh::operator[](std::string_view dim_name) const {
  return submesh({dim_index(dim_name)});
}

DeviceMesh DeviceMesh::operator[](std::initializer_list<std::string_view> dim_names) const {
  std::vector<int64_t> dims;
  dims.reserve(dim_names.size());
  for (std::string_view n : dim_names) dims.push_back(dim_index(n));
  return submesh(dims);
}

DeviceMesh DeviceMesh::submesh(const std::vector<int64_t>& dims) const {
  const Impl& m = impl();
  const int64_t nd = static_cast<int64_t>(m.shape.size());
  DT_CHECK(!dims.empty(), "[DeviceMesh] submesh dims is empty (expected at least one mesh dim)");
  std::vector<int64_t> ds;
  ds.reserve(dims.size());
  for (int64_t d : dims) {
    const int64_t nd_d = detail::mesh_dim(d, nd);
    DT_CHECK(std::find(ds.begin(), ds.end(), nd_d) == ds.end(),
             "[DeviceMesh] submesh dims [%s] name mesh dim %d twice (expected distinct dims)",
             absl::StrJoin(dims, ", "), nd_d);
    ds.push_back(nd_d);
  }

  auto sub = std::make_shared<Impl>();
  sub->device_type = m.device_type;
  for (int64_t d : ds) {
    sub->shape.push_back(m.shape[d]);
    sub->dim_names.push_back(m.dim_names[d]);
    sub->comms.push_back(m.comms[d]);
  }
  // Walk the slice's coordinates row-major; the other dims stay at this rank's coordinate
  // (0 outside the mesh).
  Shape base = m.coordinate.empty() ? Shape(m.shape.size(), 0) : m.coordinate;
  const int64_t n = shape_numel(sub->shape);
  sub->ranks.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const Shape sc = detail::unravel(i, sub->shape);
    Shape full = base;
    for (size_t j = 0; j < ds.size(); ++j) full[ds[j]] = sc[j];
    sub->ranks.push_back(m.ranks[detail::ravel(full, m.shape)]);
  }
  if (!m.coordinate.empty()) {
    for (int64_t d : ds) sub->coordinate.push_back(m.coordinate[d]);
  }
  sub->hash = hash_fields(sub->device_type, sub->shape, sub->ranks, sub->dim_names);
  DeviceMesh out;
  out.impl_ = std::move(sub);
  return out;
}

bool DeviceMesh::operator==(const DeviceMesh& other) const {
  if (impl_ == other.impl_) return true;
  if (!impl_ || !other.impl_) return false;
  const Impl& a = *impl_;
  const Impl& b = *other.impl_;
  return a.hash == b.hash && a.device_type == b.device_type && a.shape == b.shape &&
         a.ranks == b.ranks && a.dim_names == b.dim_names;
}

size_t DeviceMesh::hash() const {
  return impl_ ? impl_->hash : 0;
}

std::string DeviceMesh::str() const {
  if (!impl_) return "DeviceMesh(undefined)";
  const Impl& m = *impl_;
  std::string out = absl::StrFormat("DeviceMesh(%s, ", device_type_name(m.device_type));
  int64_t next = 0;
  detail::append_nested(out, m.ranks, m.shape, 0, next);
  absl::StrAppendFormat(&out, ", dims=(%s))", absl::StrJoin(m.dim_names, ", "));
  return out;
}

DeviceMesh init_device_mesh(DeviceType device_type, IntSpan mesh_shape,
                            std::vector<std::string> dim_names) {
  detail::check_shape("init_device_mesh", mesh_shape);
  detail::check_names("init_device_mesh", mesh_shape, dim_names);
  const int64_t need = detail::saturating_numel(mesh_shape);
  const int world = world_size();
  DT_CHECK(need <= world,
           "[init_device_mesh] mesh shape %s needs %d ranks but the world has %d (launch with "
           "mpirun -np %d)",
           shape_str(mesh_shape), need, world, need);
  std::vector<int> ranks(static_cast<size_t>(need));
  for (int64_t i = 0; i < need; ++i) ranks[i] = static_cast<int>(i);
  return DeviceMesh(device_type, mesh_shape, std::move(ranks), std::move(dim_names));
}

void clear_device_mesh_registry() {
  detail::Registry& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.comms.clear();
  reg.flattened.clear();
}

int64_t device_mesh_registry_size() {
  detail::Registry& reg = detail::registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return static_cast<int64_t>(reg.comms.size());
}

}  // namespace dtensor

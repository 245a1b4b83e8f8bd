#include "dtensor/collectives/collective_check.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <type_traits>

#include "dtensor/collectives/mpi/mpi_communicator.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace {

constexpr const char* kCheckEnv = "DTENSOR_CHECK_COLLECTIVES";

std::atomic<int> g_mode{-1};  // < 0: not read yet
std::once_flag g_mode_once;

CollectiveCheckMode mode_from_env() {
  return detail::parse_check_mode(std::getenv(kCheckEnv));
}

thread_local const char* t_label = nullptr;

}  // namespace

namespace detail {

CollectiveCheckMode parse_check_mode(const char* env) {
  if (env == nullptr || *env == '\0') return CollectiveCheckMode::kOn;
  const std::string_view v(env);
  if (v == "0") return CollectiveCheckMode::kOff;
  if (v == "1") return CollectiveCheckMode::kOn;
  DT_FAIL(
      "[collective check] %s='%s' is not a check mode (expected 1 or unset for the check, 0 for "
      "none)",
      kCheckEnv, env);
}

}  // namespace detail

CollectiveCheckMode collective_check_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m >= 0) [[likely]]
    return static_cast<CollectiveCheckMode>(m);
  std::call_once(g_mode_once, [] {
    int expected = -1;
    g_mode.compare_exchange_strong(expected, static_cast<int>(mode_from_env()));
  });
  return static_cast<CollectiveCheckMode>(g_mode.load(std::memory_order_relaxed));
}

void set_collective_check_mode(CollectiveCheckMode mode) {
  g_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

CollectiveLabel::CollectiveLabel(const char* label) : prev_(t_label) {
  t_label = label;
}
CollectiveLabel::~CollectiveLabel() {
  t_label = prev_;
}

namespace detail {

const char* current_collective_label() {
  return t_label;
}

namespace {

bool is_reduction(uint8_t kind) {
  return kind == static_cast<uint8_t>(CollectiveKind::kAllReduce) ||
         kind == static_cast<uint8_t>(CollectiveKind::kReduceScatter);
}

std::string kind_name(uint8_t kind) {
  if (kind == kKindSplit) return "split";
  if (kind == kKindMeet) return "meet";
  if (kind == kKindFailure) return "failure report";
  if (kind < kNumCollectiveKinds)
    return std::string(collective_name(static_cast<CollectiveKind>(kind)));
  return absl::StrFormat("unknown collective %d", kind);
}

std::string dtype_text(uint8_t d) {
  if (d < kNumDTypes) return std::string(dtype_name(static_cast<DType>(d)));
  return absl::StrFormat("dtype %d", d);
}

// World ranks of the communicator ranks in `members`: "rank 1", "ranks 0, 2".
std::string ranks_text(const std::vector<int>& members, const Communicator& comm) {
  std::vector<int> world;
  world.reserve(members.size());
  for (int m : members) world.push_back(comm.world_ranks()[static_cast<size_t>(m)]);
  return absl::StrFormat("%s %s", world.size() == 1 ? "rank" : "ranks", absl::StrJoin(world, ", "));
}

}  // namespace

std::string describe_fingerprint(const SlotHeader& h) {
  if (h.magic != kSlotMagic) {
    return "something other than a dtensor collective (no fingerprint: a raw MPI call on this "
           "communicator, or a different DTENSOR_CHECK_COLLECTIVES mode)";
  }
  std::vector<std::string> args;
  if (is_reduction(h.kind)) {
    args.push_back(h.op < 5 ? std::string(reduce_op_name(static_cast<ReduceOp>(h.op)))
                            : absl::StrFormat("op %d", h.op));
  }
  if (h.dtype != kNoDType) {
    args.push_back(dtype_text(h.dtype));
    // A region exchange carries no count (each rank moves its own amount).
    args.push_back(h.count < 0 ? std::string("regions")
                               : absl::StrFormat("%d element%s", h.count, h.count == 1 ? "" : "s"));
  }
  if (h.root >= 0) args.push_back(absl::StrFormat("root %d", h.root));
  std::string out =
      absl::StrFormat("%s(%s) #%d", kind_name(h.kind), absl::StrJoin(args, ", "), h.seq);
  char label[kLabelBytes + 1] = {};
  std::memcpy(label, h.label, kLabelBytes);
  if (label[0] != '\0') absl::StrAppendFormat(&out, " (%s)", label);
  return out;
}

int64_t inline_payload_bytes(const SlotHeader& h, int size) {
  if (h.dtype == kNoDType) return 0;
  const int64_t item = static_cast<int64_t>(dtype_size(static_cast<DType>(h.dtype)));
  // Bound the count first so that the products below cannot overflow.
  if (h.count < 0 || h.count > static_cast<int64_t>(kInlineBytes)) return INT64_MAX;
  switch (static_cast<CollectiveKind>(h.kind)) {
    case CollectiveKind::kReduceScatter:  // count is the input: every block travels
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kBroadcast:
      return h.count * item;
    case CollectiveKind::kScatter:  // count is the output block; the root sends size() of them
      return h.count * item * size;
    default:
      return 0;
  }
}

namespace {

bool same_fingerprint(const SlotHeader& a, const SlotHeader& b) {
  return std::memcmp(&a, &b, kFingerprintBytes) == 0;
}

// splitmix64's finaliser.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t pair_hash(int from, int to, int64_t bytes) {
  const uint64_t ends =
      (static_cast<uint64_t>(static_cast<uint32_t>(from)) << 32) | static_cast<uint32_t>(to);
  return mix(mix(ends + 0x9e3779b97f4a7c15ULL) ^ static_cast<uint64_t>(bytes));
}

}  // namespace

void set_peer_sum(SlotHeader& h, const PeerBytes& p, int rank) {
  uint64_t sum = 0;
  for (size_t k = 0; k < p.send.size(); ++k) {
    sum += pair_hash(rank, static_cast<int>(k), p.send[k]);
    sum -= pair_hash(static_cast<int>(k), rank, p.recv[k]);
  }
  h.peer_sum = sum;
  h.flags |= kFlagPeers;
}

void write_peer_table(char* slot, const PeerBytes& p) {
  char* at = slot + kSlotHeaderBytes;
  std::memcpy(at, p.send.data(), p.send.size() * sizeof(int64_t));
  std::memcpy(at + p.send.size() * sizeof(int64_t), p.recv.data(), p.recv.size() * sizeof(int64_t));
}

std::string compare_peer_bytes(const char* slots, const Communicator& comm, bool tables) {
  const int n = comm.size();
  uint64_t sum = 0;
  for (int r = 0; r < n; ++r) sum += slot_header(slots, r).peer_sum;
  if (sum == 0) return {};
  std::vector<std::string> pairs;
  if (tables) {
    auto table = [&](int r, int which, int k) {
      int64_t v;
      std::memcpy(&v, slot_payload(slots, r) + (which * n + k) * sizeof(int64_t), sizeof(v));
      return v;
    };
    int more = 0;
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) {
        const int64_t sent = table(from, 0, to), expected = table(to, 1, from);
        if (sent == expected) continue;
        if (pairs.size() == 4) {
          ++more;
          continue;
        }
        pairs.push_back(absl::StrFormat("%s sends %d bytes to %s, which expects %d from it",
                                        ranks_text({from}, comm), sent, ranks_text({to}, comm),
                                        expected));
      }
    }
    if (more > 0) pairs.push_back(absl::StrFormat("%d more pair%s", more, more == 1 ? "" : "s"));
  }
  return absl::StrFormat(
      "ranks disagree on the sizes of the pieces they exchange on %s%s%s. Every rank must "
      "describe the same exchange; usually the ranks hold different global shapes or "
      "placements for the same DTensor",
      describe_communicator(comm), pairs.empty() ? "" : ": ", absl::StrJoin(pairs, "; "));
}

int first_failure(const char* slots, int size) {
  for (int r = 0; r < size; ++r) {
    const SlotHeader& h = slot_header(slots, r);
    if (h.magic == kSlotMagic && h.kind == kKindFailure) return r;
  }
  return -1;
}

uint64_t max_seq(const char* slots, int size) {
  uint64_t seq = 0;
  for (int r = 0; r < size; ++r) {
    const SlotHeader& h = slot_header(slots, r);
    if (h.magic == kSlotMagic && h.seq > seq) seq = h.seq;
  }
  return seq;
}

std::string compare_slots(const char* slots, const Communicator& comm) {
  const int n = comm.size();
  const SlotHeader& ref = slot_header(slots, 0);
  bool same = true;
  for (int r = 1; r < n && same; ++r) same = same_fingerprint(slot_header(slots, r), ref);
  if (same) return {};
  // Group ranks by fingerprint, in order of first appearance; group 0 holds rank 0.
  std::vector<std::vector<int>> groups;
  std::vector<int> first;
  for (int r = 0; r < n; ++r) {
    size_t g = 0;
    for (; g < groups.size(); ++g) {
      if (same_fingerprint(slot_header(slots, r), slot_header(slots, first[g]))) break;
    }
    if (g == groups.size()) {
      groups.emplace_back();
      first.push_back(r);
    }
    groups[g].push_back(r);
  }
  std::vector<std::string> others;
  for (size_t g = 1; g < groups.size(); ++g) {
    others.push_back(absl::StrFormat("%s issued %s", ranks_text(groups[g], comm),
                                     describe_fingerprint(slot_header(slots, first[g]))));
  }
  return absl::StrFormat(
      "collective mismatch on %s: %s where %s issued %s. Every rank of a communicator must issue "
      "the same collectives (kind, dtype, element count, reduce op, root) in the same order; "
      "usually one rank raised an error the others did not (and the program caught it), or a "
      "branch depends on rank-local data",
      describe_communicator(comm), absl::StrJoin(others, "; "), ranks_text(groups[0], comm),
      describe_fingerprint(ref));
}

namespace {

template <typename T>
T load(const char* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// NaN-propagating max/min: a NaN anywhere gives NaN, as the single-device reductions do.
template <typename C>
C max_nan(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a > b ? a : b;
}
template <typename C>
C min_nan(C a, C b) {
  if (a != a) return a;
  if (b != b) return b;
  return a < b ? a : b;
}

// Integers accumulate in the unsigned type of the same width; floats in compute_t.
template <typename T, bool = std::is_integral_v<T>>
struct AccType {
  using type = compute_t<T>;
};
template <typename T>
struct AccType<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void reduce_typed(const char* slots, int size, ReduceOp op, int64_t offset, int64_t count, T* dst) {
  if constexpr (std::is_same_v<T, bool>) {
    const bool any = op == ReduceOp::kSum || op == ReduceOp::kMax;  // or; min/product: and
    for (int64_t i = 0; i < count; ++i) {
      bool acc = load<bool>(slot_payload(slots, 0), offset + i);
      for (int r = 1; r < size; ++r) {
        const bool v = load<bool>(slot_payload(slots, r), offset + i);
        acc = any ? (acc || v) : (acc && v);
      }
      dst[i] = acc;
    }
  } else {
    // Integers accumulate in the unsigned type of the same width (wrapping, no UB); 16-bit
    // floats in float, rounded once at the end.
    using C = typename AccType<T>::type;
    for (int64_t i = 0; i < count; ++i) {
      C acc =
          static_cast<C>(static_cast<compute_t<T>>(load<T>(slot_payload(slots, 0), offset + i)));
      for (int r = 1; r < size; ++r) {
        const C v =
            static_cast<C>(static_cast<compute_t<T>>(load<T>(slot_payload(slots, r), offset + i)));
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAvg:
            acc = static_cast<C>(acc + v);
            break;
          case ReduceOp::kProduct:
            acc = static_cast<C>(acc * v);
            break;
          case ReduceOp::kMax:
            if constexpr (std::is_integral_v<T>) {
              acc = static_cast<T>(v) > static_cast<T>(acc) ? v : acc;
            } else {
              acc = max_nan(acc, v);
            }
            break;
          case ReduceOp::kMin:
            if constexpr (std::is_integral_v<T>) {
              acc = static_cast<T>(v) < static_cast<T>(acc) ? v : acc;
            } else {
              acc = min_nan(acc, v);
            }
            break;
        }
      }
      if constexpr (std::is_integral_v<T>) {
        T out = static_cast<T>(acc);
        if (op == ReduceOp::kAvg) out = static_cast<T>(out / static_cast<T>(size));
        dst[i] = out;
      } else {
        if (op == ReduceOp::kAvg) acc = acc / static_cast<C>(size);
        dst[i] = T(acc);
      }
    }
  }
}

}  // namespace

void reduce_payloads(const char* slots, int size, DType dtype, ReduceOp op, int64_t offset,
                     int64_t count, void* dst) {
  dispatch_dtype(dtype, [&]<typename T>() {
    reduce_typed<T>(slots, size, op, offset, count, static_cast<T*>(dst));
  });
}

void write_bytes(const Tensor& dst, size_t offset, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst.device().is_cpu()) {
    std::memcpy(static_cast<char*>(dst.data_ptr()) + offset, src, nbytes);
    return;
  }
  const int64_t item = static_cast<int64_t>(dst.itemsize());
  const int64_t n = static_cast<int64_t>(nbytes) / item;
  Tensor host = from_blob(const_cast<void*>(src), {&n, 1}, dst.dtype());
  dst.view({-1}).narrow(0, static_cast<int64_t>(offset) / item, n).copy_(host);
}

void read_bytes(const Tensor& src, void* dst) {
  if (src.nbytes() == 0) return;
  if (src.device().is_cpu()) {
    std::memcpy(dst, src.data_ptr(), src.nbytes());
    return;
  }
  const int64_t n = src.numel();
  from_blob(dst, {&n, 1}, src.dtype()).copy_(src.view({-1}));
}

}  // namespace detail

}  // namespace dtensor

// Internals of the collective consistency check (communicator.h describes what it guarantees).
//
// Every collective on a communicator of two or more ranks starts with one allgather of a fixed
// kSlotBytes block per rank (the "slot"): a header with the collective's fingerprint (kind,
// dtype, element count, reduce op, root, the communicator's sequence number, a label) and, when
// the whole payload of the collective fits in kInlineBytes, the payload itself. Because every
// rank posts the same MPI call with the same count, the exchange always pairs correctly, whatever
// the ranks asked for; every rank then holds every rank's fingerprint and reaches the same
// verdict. A collective whose payload travels inline is finished from the slots (no second
// exchange); a larger one posts its own data collective once the fingerprints agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/collectives/communicator.h"

namespace dtensor::detail {

inline constexpr size_t kSlotBytes = 256;
inline constexpr size_t kSlotHeaderBytes = 64;
inline constexpr size_t kInlineBytes = kSlotBytes - kSlotHeaderBytes;
inline constexpr uint32_t kSlotMagic = 0x31435444;  // "DTC1"
inline constexpr size_t kLabelBytes = 24;

// Fingerprint codes beyond CollectiveKind / DType / ReduceOp.
inline constexpr uint8_t kKindSplit = 0x40;
inline constexpr uint8_t kKindMeet = 0x41;
// A failure report (Communicator::report_failure): count holds the message's length, the
// payload its first kInlineBytes; the rest follows in extra exchanges (failure_message).
inline constexpr uint8_t kKindFailure = 0x42;
// Longest message a failure report carries (a longer one is cut, "..." appended).
inline constexpr size_t kMaxFailureBytes = 1024;
inline constexpr uint8_t kNoDType = 0xff;
inline constexpr uint8_t kNoReduceOp = 0xff;
inline constexpr uint8_t kFlagInline = 1;
inline constexpr uint8_t kFlagPeers = 2;  // peer_sum is set (a collective with PeerBytes)

// The first kSlotHeaderBytes of a slot. The fingerprint, every field before peer_sum, is
// compared byte for byte (unused bytes are zero).
struct SlotHeader {
  uint32_t magic = kSlotMagic;
  uint8_t kind = 0;
  uint8_t dtype = kNoDType;
  uint8_t op = kNoReduceOp;
  uint8_t flags = 0;
  int32_t root = -1;
  uint32_t reserved = 0;
  int64_t count = 0;  // elements of this rank's input (scatter: of the output); -1: regions
  uint64_t seq = 0;   // position in the communicator's stream of public collective calls
  char label[kLabelBytes] = {};
  // Differs by rank (set_peer_sum), so it is not part of the fingerprint compared byte for
  // byte: the fields before it are.
  uint64_t peer_sum = 0;
};
static_assert(sizeof(SlotHeader) == kSlotHeaderBytes);
inline constexpr size_t kFingerprintBytes = offsetof(SlotHeader, peer_sum);

// The bytes this rank sends to and expects from each peer, in a collective whose pieces
// differ in size by rank (the region exchanges, a gather into a dim). Ranks that describe one
// exchange differently (e.g. they hold different global shapes or placements for the same
// DTensor) would pair pieces of different sizes, which MPI does not catch: a shorter piece is
// taken as it is, the rest of its place left as it was.
struct PeerBytes {
  std::vector<int64_t> send, recv;  // indexed by peer
};
// Largest communicator whose PeerBytes fit in a slot's payload, for the mismatch report.
inline constexpr int kMaxPeerTable = static_cast<int>(kInlineBytes / (2 * sizeof(int64_t)));
// Sets kFlagPeers and h.peer_sum = sum over peers k of H(rank, k, send[k]) - H(k, rank,
// recv[k]) (mod 2^64, H a 64-bit mix): over all ranks the sums cancel exactly when every
// rank sends each peer what that peer expects (bar a 2^-64 chance).
void set_peer_sum(SlotHeader& h, const PeerBytes& p, int rank);
// Whether a slot with header h, on a communicator of `size` ranks, carries the peer table: its
// payload is free (nothing inline) and the table fits. The same on every rank once the
// fingerprints agree.
inline bool carries_peer_table(const SlotHeader& h, int size) {
  return (h.flags & kFlagPeers) && !(h.flags & kFlagInline) && size <= kMaxPeerTable;
}
// Writes send then recv into a slot's payload (where carries_peer_table).
void write_peer_table(char* slot, const PeerBytes& p);
// Empty when the peer sums of every rank's slot cancel; otherwise the report (without the
// leading "[op] "), naming the pairs that disagree when the slots carry tables.
std::string compare_peer_bytes(const char* slots, const Communicator& comm, bool tables);

// The mode DTENSOR_CHECK_COLLECTIVES = `env` selects (nullptr, empty or "1": kOn, "0": kOff);
// throws dtensor::Error "[collective check] ..." for any other value.
CollectiveCheckMode parse_check_mode(const char* env);

// "all_reduce(sum, float32, 16 elements) #12", "broadcast(int64, 3 elements, root 1) #4
// (DeviceMesh)".
std::string describe_fingerprint(const SlotHeader& h);

// Bytes the inline path would carry for this fingerprint on a communicator of `size` ranks.
int64_t inline_payload_bytes(const SlotHeader& h, int size);

inline const SlotHeader& slot_header(const char* slots, int rank) {
  return *reinterpret_cast<const SlotHeader*>(slots + static_cast<size_t>(rank) * kSlotBytes);
}
inline const char* slot_payload(const char* slots, int rank) {
  return slots + static_cast<size_t>(rank) * kSlotBytes + kSlotHeaderBytes;
}

// The lowest rank whose slot is a failure report, or -1 when none is.
int first_failure(const char* slots, int size);
// The largest sequence number in the slots (dtensor slots only).
uint64_t max_seq(const char* slots, int size);

// Empty when every rank's fingerprint (the header up to peer_sum) equals rank 0's; otherwise
// the mismatch report (without the leading "[op] "), naming each group of ranks (world ranks)
// and what they issued, e.g. "rank 1 issued all_reduce(sum, float32, 16 elements) #12 where
// rank 0 issued all_gather(float32, 16 elements) #12". Every rank computes the same text from
// the same slots.
std::string compare_slots(const char* slots, const Communicator& comm);

// dst[i] = op over ranks r of payload_r[offset + i], i < count, for `dtype` (the semantics of
// Communicator::all_reduce: float16/bfloat16 accumulate in float and round once, max/min
// propagate NaN, integers wrap, avg divides by the number of ranks, integers truncating).
void reduce_payloads(const char* slots, int size, DType dtype, ReduceOp op, int64_t offset,
                     int64_t count, void* dst);

// Copies `nbytes` from host memory into dst (contiguous, CPU or CUDA) at byte offset `offset`.
void write_bytes(const Tensor& dst, size_t offset, const void* src, size_t nbytes);
// Copies the bytes of `src` (contiguous, CPU or CUDA) to host memory.
void read_bytes(const Tensor& src, void* dst);

// The label of the innermost CollectiveLabel on this thread (nullptr when none).
const char* current_collective_label();

}  // namespace dtensor::detail

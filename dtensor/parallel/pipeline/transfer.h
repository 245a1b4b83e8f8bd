// Stage-to-stage transfers of a pipeline step, checked (internal to the pipeline executor).
//
// Point-to-point messages carry no collective fingerprint (dtensor/collectives/communicator.h),
// so the pipeline adds its own: each activation or gradient travels as a header (step,
// direction, stages, microbatch, global shape, dtype, placements, local shape, whether the
// sender failed) followed by the rank's shard. The receiver compares the header with what it
// expects and raises dtensor::Error naming both sides on a mismatch.
//
// Ranks fail together without hanging because a rank that failed keeps running its schedule
// "poisoned": it skips the computation but still sends every message it would have sent (a
// header saying it failed, no data) and receives every message it expects. So every message of
// the step is matched, whatever fails where: no rank waits for a message that never comes, no
// request is left pending, and nothing is left behind to confuse a later step. A rank that
// receives a poisoned header is poisoned in turn. At the end of the step every rank of the mesh
// the pipeline runs on (not only the pp line: a dp, tp or cp peer whose pipeline raised alone
// would leave the others waiting in their own collectives) reports whether it failed (one
// all-reduce of a status word) and, when any did, the first failing rank's message is broadcast
// and raised on every rank of the mesh.
//
// Overlap. Sends do not block: a stage posts its activation or gradient and goes on computing;
// the process's progress thread (dtensor/collectives/p2p_progress.h) moves the posted sends
// meanwhile, and the step waits for them only at its end (finish_step). A send reads the sent
// value's own storage until it completes (no copy on CPU, where a contiguous shard is sent in
// place; the MPI backend stages a CUDA tensor through a pinned copy; the send's Work holds the
// storage alive): safe because the values sent are a stage's output, which the schedule only
// reads afterwards (its backward), and its input's gradient, complete when sent and then
// dropped; each header is a fresh tensor. Receives block where the value is needed.
//
// Tags. MPI guarantees tags up to 32767 only (MPI_TAG_UB may be larger, never smaller), so the
// tags of a step are numbered densely from kTransferTagBase up to the communicator's bound
// (Communicator::tag_upper_bound), wrapping around: see transfer_tag.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/p2p_progress.h"
#include "dtensor/core/distributed_tensor.h"

namespace dtensor::pipelining::detail {

// What a stage expects to receive: global shape, dtype, placements, and the mesh the value lives
// on: local (the self mesh), or the stage's mesh (the mesh's dims other than pp) or a submesh of
// it, e.g. the tp line of a (dp, tp) stage mesh (a sequence-parallel residual stream).
struct TensorMeta {
  Shape shape;
  DType dtype = kFloat32;
  Placements placements;
  uint32_t mesh_dims = 0;  // bit d: dim d of the stage mesh; 0: local
  // The meta of `x` on a stage whose mesh is `stage_mesh`; throws dtensor::Error when x is
  // neither local nor on stage_mesh or one of its submeshes (dims in increasing order).
  static TensorMeta of(const DTensor& x, const DeviceMesh& stage_mesh);
  // The mesh such a value lives on at a stage whose mesh is `stage_mesh`.
  DeviceMesh mesh_on(const DeviceMesh& stage_mesh) const;
  bool operator==(const TensorMeta&) const = default;
  // "local float32 [2, 8]", "float32 [2, 8] on stage mesh dims {1} [S(1)]"
  std::string str() const;
};

enum class Direction { kActivation, kGradient };

// Identifies one transfer of a step.
struct TransferKey {
  Direction direction;
  int64_t from_stage;
  int64_t to_stage;
  int64_t microbatch;
  std::string str() const;  // "the activation of microbatch 1 from stage 0 to stage 1"
};

// Stages and microbatches a step may have (the header's placements and mesh dims are bounded
// too; whether a step's tags fit is checked against the communicator: check_tag_space).
inline constexpr int64_t kMaxStages = 64;
inline constexpr int64_t kMaxMicrobatches = 1024;

// The first tag of the transfers (other users of the pp communicator, e.g. the scan's and the
// ring attention's point-to-point messages, tag below it).
inline constexpr int kTransferTagBase = 8192;
// The tags one step uses: two (header, shard) per direction, receiving stage and microbatch.
int64_t tags_per_step(int64_t num_stages, int64_t n_microbatches);
// Throws dtensor::Error "[op] ..." when the tags of one step do not fit between
// kTransferTagBase and `tag_ub` (then two transfers of a step would share a tag).
void check_tag_space(int64_t num_stages, int64_t n_microbatches, int tag_ub, const std::string& op);
// The tag of `part` (0: header, 1: shard) of transfer `key` of step `step`: its index among the
// step's tags_per_step, after those of step % 16 earlier steps, modulo the tag_ub -
// kTransferTagBase + 1 tags available, above kTransferTagBase. Distinct within a step when
// check_tag_space passes; a tag reused by another step cannot pair wrongly, as no transfer
// outlives its step (every rank has received all of its step's transfers before the step's
// closing all-reduce completes), and the header names the full step and transfer anyway.
int transfer_tag(int64_t step, const TransferKey& key, int part, int64_t num_stages,
                 int64_t n_microbatches, int tag_ub);

class Channel {
 public:
  Channel() = default;
  // Transfers over the pp communicator (this rank's line of the pp dim); failures agreed over
  // `mesh`, the communicator of every rank of the pipeline's mesh; `op` names the schedule in
  // messages ("ScheduleGPipe"). Throws dtensor::Error "[op] ..." when a step of num_stages
  // stages and n_microbatches microbatches needs more tags than pp allows (check_tag_space).
  Channel(CommunicatorPtr pp, CommunicatorPtr mesh, std::string op, int64_t num_stages,
          int64_t n_microbatches);

  // Starts a step: not failed, the step's number taken.
  void begin_step();
  // Records that this rank failed with `message` (the first one counts) and poisons it.
  void fail(const std::string& message);
  // Whether this rank failed or learned that a peer did (then it computes nothing more).
  bool poisoned() const { return poisoned_; }

  // Posts `value`'s header and this rank's shard to pp rank `dst` (does not block; progressed
  // meanwhile by the progress thread; finish_step waits). `value` must be local (self mesh) or on
  // `mesh`, the stage's mesh. When poisoned, posts a poisoned header only (`value` is ignored and
  // may be undefined).
  void send(const DTensor& value, int dst, const TransferKey& key, const DeviceMesh& mesh);
  // Receives the transfer `key` from pp rank `src` into a DTensor on `mesh` (the receiving
  // stage's mesh; on the self mesh when the sender's value was local), checked against
  // `expected` when given (may be null: take what comes). Returns an undefined DTensor, this
  // rank now poisoned, when the sender failed. On a mismatch (of the transfer, its step or the
  // value), receives and drops the shard first, so the sender's send completes and the failure
  // reaches it at finish_step instead of its send waiting for the deadline; then throws
  // dtensor::Error naming both sides.
  DTensor recv(int src, const TransferKey& key, const TensorMeta* expected, const DeviceMesh& mesh);

  // Ends the step: waits for this rank's sends (a send that failed, on the progress thread or
  // in the wait, fails this rank), then (one all-reduce on the mesh's communicator) raises on
  // every rank of the mesh the message of its lowest rank that failed, if any did.
  void finish_step();

 private:
  int tag(const TransferKey& key, int part) const;

  CommunicatorPtr pp_;
  CommunicatorPtr mesh_;
  std::string op_;
  int64_t num_stages_ = 0;
  int64_t n_microbatches_ = 0;
  int tag_ub_ = 0;
  int64_t step_ = -1;
  bool poisoned_ = false;
  std::string message_;           // this rank's own failure, if any
  std::vector<WorkPtr> pending_;  // this step's sends
  // Moves pending_ while this rank computes (a pointer: a Channel is moved into its schedule).
  std::unique_ptr<dtensor::detail::P2PProgress> progress_ =
      std::make_unique<dtensor::detail::P2PProgress>();
};

// Given the lowest rank of `comm` that failed (`first`, the same on every rank; -1: none) and
// this rank's message `mine`, raises that rank's message on every rank of `comm` (broadcast
// from it, "(raised on world rank W)" appended on the others); returns when none failed.
// Collective over `comm`.
void raise_first_failure(Communicator& comm, int first, const std::string& mine);

}  // namespace dtensor::pipelining::detail

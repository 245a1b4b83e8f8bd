#include "dtensor/parallel/pipeline/transfer.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>

#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::pipelining::detail {

namespace {

// Steps whose tags follow one another before the numbering wraps (transfer_tag).
constexpr int64_t kSteps = 16;
constexpr int64_t kMagic = 0x5049504531;  // "PIPE1"
constexpr int kMaxDims = 8;
// Header words.
enum : int {
  kMagicWord,
  kStepWord,
  kDirectionWord,
  kFromWord,
  kToWord,
  kMicrobatchWord,
  kPoisonedWord,  // the sender failed: no shard follows
  kDTypeWord,
  kMeshDimsWord,  // TensorMeta::mesh_dims (0: local)
  kNDimWord,
  kShapeWords,                                    // global shape [kMaxDims]
  kMeshDimWord = kShapeWords + kMaxDims,          // number of placements
  kPlacementWords,                                // [kMaxDims]
  kLocalShapeWords = kPlacementWords + kMaxDims,  // [kMaxDims]
  kHeaderWords = kLocalShapeWords + kMaxDims
};
constexpr int kMessageBytes = 1024;
constexpr int kMessageWords = kMessageBytes / 8;

int64_t placement_code(const Placement& p) {
  const int64_t detail = p.is_shard()     ? p.dim()
                         : p.is_partial() ? static_cast<int64_t>(p.reduce_op())
                                          : 0;
  return static_cast<int64_t>(p.kind()) * 1000 + detail;
}

Placement placement_of(int64_t code) {
  const auto kind = static_cast<PlacementKind>(code / 1000);
  if (kind == PlacementKind::kShard) return Shard(code % 1000);
  if (kind == PlacementKind::kPartial) return Partial(static_cast<ReduceOp>(code % 1000));
  return Replicate();
}

std::string direction_name(Direction d) {
  return d == Direction::kActivation ? "activation" : "gradient";
}

// Steps are numbered per communicator for the life of the process, not per Channel: a new
// schedule on the same pp group continues the numbering, and a header names its full step.
int64_t next_step(const Communicator* pp) {
  static std::mutex mu;
  static auto* steps = new std::map<const Communicator*, int64_t>();
  std::lock_guard<std::mutex> lock(mu);
  return (*steps)[pp]++;
}

// The header words naming the transfer (what send writes before it knows the value).
void write_key(int64_t* h, int64_t step, const TransferKey& key) {
  h[kMagicWord] = kMagic;
  h[kStepWord] = step;
  h[kDirectionWord] = static_cast<int64_t>(key.direction);
  h[kFromWord] = key.from_stage;
  h[kToWord] = key.to_stage;
  h[kMicrobatchWord] = key.microbatch;
}

// The header words describing the value: `meta` and the shape of the shard that follows.
void write_meta(int64_t* h, const TensorMeta& meta, const Shape& local) {
  h[kDTypeWord] = static_cast<int64_t>(meta.dtype);
  h[kMeshDimsWord] = meta.mesh_dims;
  h[kNDimWord] = static_cast<int64_t>(meta.shape.size());
  for (size_t d = 0; d < meta.shape.size(); ++d) {
    h[kShapeWords + d] = meta.shape[d];
    h[kLocalShapeWords + d] = local[d];
  }
  h[kMeshDimWord] = static_cast<int64_t>(meta.placements.size());
  for (size_t i = 0; i < meta.placements.size(); ++i) {
    h[kPlacementWords + i] = placement_code(meta.placements[i]);
  }
}

// Under the fake backend (fake_communicator.h) no peer sends: a received header is filler. The
// transfer is taken to be the one the stage expects (an activation: the stage's example_input;
// a gradient: its own output's meta), as the fake backend takes every rank's data to look like
// this rank's, and the header is written from it. Without an expectation the shape cannot be
// known: refused by name rather than read as a mismatch from the filler.
void fake_header(int64_t* h, int64_t step, const TransferKey& key, const TensorMeta* expected,
                 const DeviceMesh& mesh, const std::string& op) {
  DT_CHECK(expected != nullptr,
           "[%s] %s cannot be received on the fake backend: no peer sends its shape there, and "
           "stage %lld expects none (give its PipelineStage an example_input)",
           op.c_str(), key.str().c_str(), static_cast<long long>(key.to_stage));
  const DeviceMesh on = expected->mesh_on(mesh);
  const Shape local = expected->mesh_dims == 0 ? expected->shape
                                               : compute_local_shape_and_offset(
                                                     expected->shape, on.shape(),
                                                     on.get_coordinate(), expected->placements)
                                                     .shape;
  write_key(h, step, key);
  h[kPoisonedWord] = 0;
  write_meta(h, *expected, local);
}

}  // namespace

TensorMeta TensorMeta::of(const DTensor& x, const DeviceMesh& stage_mesh) {
  TensorMeta meta{x.shape(), x.dtype(), x.placements(), 0};
  if (is_local(x)) return meta;
  const DeviceMesh& mesh = x.device_mesh();
  std::vector<int64_t> dims;
  const auto& names = stage_mesh.dim_names();
  for (const std::string& name : mesh.dim_names()) {
    const auto it = std::find(names.begin(), names.end(), name);
    if (it != names.end()) dims.push_back(it - names.begin());
  }
  const bool ok = !is_self_mesh(stage_mesh) && dims.size() == mesh.dim_names().size() &&
                  std::is_sorted(dims.begin(), dims.end()) && stage_mesh.submesh(dims) == mesh;
  DT_CHECK(ok,
           "[PipelineStage] a value on %s cannot cross stages: values between stages must be "
           "local or on the stage's mesh %s (the mesh's dims other than pp) or a submesh of it",
           mesh.str().c_str(), stage_mesh.str().c_str());
  for (int64_t d : dims) meta.mesh_dims |= 1u << d;
  return meta;
}

DeviceMesh TensorMeta::mesh_on(const DeviceMesh& stage_mesh) const {
  if (mesh_dims == 0) return self_mesh(stage_mesh.device_type());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < stage_mesh.ndim(); ++d) {
    if (mesh_dims & (1u << d)) dims.push_back(d);
  }
  return stage_mesh.submesh(dims);
}

std::string TensorMeta::str() const {
  const std::string text = std::string(dtype_name(dtype)) + " " + shape_str(shape);
  if (mesh_dims == 0) return "local " + text;
  std::string dims;
  for (int d = 0; d < 32; ++d) {
    if (mesh_dims & (1u << d)) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  }
  return text + " on stage mesh dims {" + dims + "} " + placements_str(placements);
}

std::string TransferKey::str() const {
  return "the " + direction_name(direction) + " of microbatch " + std::to_string(microbatch) +
         " from stage " + std::to_string(from_stage) + " to stage " + std::to_string(to_stage);
}

int64_t tags_per_step(int64_t num_stages, int64_t n_microbatches) {
  return 2 * num_stages * n_microbatches * 2;
}

void check_tag_space(int64_t num_stages, int64_t n_microbatches, int tag_ub,
                     const std::string& op) {
  const int64_t available = static_cast<int64_t>(tag_ub) - kTransferTagBase + 1;
  DT_CHECK(tags_per_step(num_stages, n_microbatches) <= available,
           "[%s] a step of %lld stages and %lld microbatches needs %lld message tags (2 "
           "directions x stages x microbatches x 2 messages), but the pp communicator's tags "
           "from %d reach only %d (MPI_TAG_UB), %lld tags: use fewer stages or microbatches",
           op.c_str(), static_cast<long long>(num_stages), static_cast<long long>(n_microbatches),
           static_cast<long long>(tags_per_step(num_stages, n_microbatches)), kTransferTagBase,
           tag_ub, static_cast<long long>(std::max<int64_t>(available, 0)));
}

int transfer_tag(int64_t step, const TransferKey& key, int part, int64_t num_stages,
                 int64_t n_microbatches, int tag_ub) {
  const int64_t in_step =
      ((static_cast<int64_t>(key.direction) * num_stages + key.to_stage) * n_microbatches +
       key.microbatch) *
          2 +
      part;
  const int64_t id = (step % kSteps) * tags_per_step(num_stages, n_microbatches) + in_step;
  return kTransferTagBase +
         static_cast<int>(id % (static_cast<int64_t>(tag_ub) - kTransferTagBase + 1));
}

Channel::Channel(CommunicatorPtr pp, CommunicatorPtr mesh, std::string op, int64_t num_stages,
                 int64_t n_microbatches)
    : pp_(std::move(pp)),
      mesh_(std::move(mesh)),
      op_(std::move(op)),
      num_stages_(num_stages),
      n_microbatches_(n_microbatches),
      tag_ub_(pp_->tag_upper_bound()) {
  check_tag_space(num_stages_, n_microbatches_, tag_ub_, op_);
}

int Channel::tag(const TransferKey& key, int part) const {
  return transfer_tag(step_, key, part, num_stages_, n_microbatches_, tag_ub_);
}

void Channel::begin_step() {
  // A step that raised before finish_step may have left sends to test; their errors belong to
  // that step (its waits, in the Works' destructors, report nothing either).
  (void)progress_->stop();
  step_ = next_step(pp_.get());
  poisoned_ = false;
  message_.clear();
  pending_.clear();
}

void Channel::fail(const std::string& message) {
  if (message_.empty()) message_ = message.empty() ? "[" + op_ + "] failed" : message;
  poisoned_ = true;
}

void Channel::send(const DTensor& value, int dst, const TransferKey& key, const DeviceMesh& mesh) {
  Tensor header = zeros({kHeaderWords}, TensorOptions(kInt64));
  int64_t* h = header.data<int64_t>();
  write_key(h, step_, key);
  TensorMeta meta;
  if (!poisoned_) {
    // A value this rank cannot send poisons it; the peer still gets its header.
    try {
      DT_CHECK(value.defined(), "[%s] %s is undefined", op_.c_str(), key.str().c_str());
      meta = TensorMeta::of(value, mesh);
      DT_CHECK(static_cast<int>(value.shape().size()) <= kMaxDims &&
                   static_cast<int>(value.placements().size()) <= kMaxDims,
               "[%s] %s has %zu dims on a %zu-d mesh (at most %d each)", op_.c_str(),
               key.str().c_str(), value.shape().size(), value.placements().size(), kMaxDims);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
  h[kPoisonedWord] = poisoned_ ? 1 : 0;
  Tensor local;
  if (!poisoned_) {
    local = value.to_local().contiguous();
    write_meta(h, meta, local.sizes());
  }
  pending_.push_back(pp_->send(header, dst, tag(key, 0)));
  if (!poisoned_) pending_.push_back(pp_->send(local, dst, tag(key, 1)));
  // The shard (or a poisoned header): the large message.
  progress_->add(pending_.back(), *pp_, poisoned_ ? header.device() : local.device());
}

DTensor Channel::recv(int src, const TransferKey& key, const TensorMeta* expected,
                      const DeviceMesh& mesh) {
  Tensor header = zeros({kHeaderWords}, TensorOptions(kInt64));
  pp_->recv(header, src, tag(key, 0))->wait();
  if (fake_backend()) fake_header(header.data<int64_t>(), step_, key, expected, mesh, op_);
  const int64_t* h = header.data<int64_t>();
  const TransferKey got_key{static_cast<Direction>(h[kDirectionWord]), h[kFromWord], h[kToWord],
                            h[kMicrobatchWord]};
  const std::string who = "pp rank " + std::to_string(src) + " (world rank " +
                          std::to_string(pp_->world_ranks()[src]) + ")";
  // The value the header describes. Its shard (sent unless the sender failed) is received before
  // any check: a refused transfer leaves no message behind, so the sender's send completes and
  // it learns of the failure at the step's end, not at the collective deadline.
  const bool ours = h[kMagicWord] == kMagic;  // a pipeline header (else nothing is known)
  TensorMeta got;
  Shape local_shape;
  got.dtype = static_cast<DType>(h[kDTypeWord]);
  got.mesh_dims = static_cast<uint32_t>(h[kMeshDimsWord]);
  const int64_t ndim = std::clamp<int64_t>(h[kNDimWord], 0, kMaxDims);
  const int64_t mdim = std::clamp<int64_t>(h[kMeshDimWord], 0, kMaxDims);
  for (int64_t d = 0; d < ndim; ++d) {
    got.shape.push_back(h[kShapeWords + d]);
    local_shape.push_back(h[kLocalShapeWords + d]);
  }
  for (int64_t i = 0; i < mdim; ++i) got.placements.push_back(placement_of(h[kPlacementWords + i]));
  Tensor local;
  if (ours && h[kPoisonedWord] == 0) {
    local = empty(local_shape, TensorOptions(got.dtype, Device(mesh.device_type())));
    pp_->recv(local, src, tag(key, 1))->wait();
  }
  DT_CHECK(ours && h[kStepWord] == step_ && got_key.direction == key.direction &&
               got_key.from_stage == key.from_stage && got_key.to_stage == key.to_stage &&
               got_key.microbatch == key.microbatch,
           "[%s] stage %lld expected %s of step %lld, but %s sent %s of step %lld (do all ranks "
           "run the same schedule?)",
           op_.c_str(), static_cast<long long>(key.to_stage), key.str().c_str(),
           static_cast<long long>(step_), who.c_str(), got_key.str().c_str(),
           static_cast<long long>(h[kStepWord]));
  if (h[kPoisonedWord] != 0) {
    poisoned_ = true;  // the sender failed: no shard follows
    return DTensor();
  }
  // A local value (a plain tensor of the sender, e.g. a residual stream that a tensor-parallel
  // plan keeps off the mesh between blocks) stays local here; a value on a submesh of the
  // sender's stage mesh lands on the same submesh of this stage's mesh.
  const DeviceMesh on = got.mesh_dims >> mesh.ndim() == 0 ? got.mesh_on(mesh) : mesh;
  DT_CHECK(expected == nullptr || *expected == got,
           "[%s] stage %lld expected %s as %s, but %s sent %s (the stages disagree on the shape "
           "between them)",
           op_.c_str(), static_cast<long long>(key.to_stage), key.str().c_str(),
           expected ? expected->str().c_str() : "", who.c_str(), got.str().c_str());
  DT_CHECK(static_cast<int64_t>(got.placements.size()) == on.ndim(),
           "[%s] stage %lld runs on a %lld-d mesh, but %s sent %s with placements for %zu dims",
           op_.c_str(), static_cast<long long>(key.to_stage), static_cast<long long>(on.ndim()),
           who.c_str(), key.str().c_str(), got.placements.size());
  return DTensor::from_local(local, on, got.placements, false, got.shape);
}

void Channel::finish_step() {
  // A send that failed (an MPI error on the progress thread or in its wait) fails this rank,
  // which the exchange below raises on every rank of the mesh; raised here alone, the other
  // ranks would wait for this one in that exchange until the deadline.
  std::exception_ptr error = progress_->stop();
  for (const WorkPtr& w : pending_) {
    try {
      w->wait();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  pending_.clear();
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      fail("[" + op_ + "] a send of this step failed: " + e.what());
    } catch (...) {
      fail("[" + op_ + "] a send of this step failed");
    }
  }
  // The lowest rank of the mesh that failed on its own (a poisoned rank that only learned of
  // it has no message), or the mesh's size: one word, however many ranks. On the fake backend
  // the minimum is this rank's own word (a failure is this rank's own).
  const int n = mesh_->size();
  Tensor status =
      full({1}, message_.empty() ? int64_t{n} : int64_t{mesh_->rank()}, TensorOptions(kInt64));
  {
    CollectiveLabel label("pipeline step end");
    mesh_->all_reduce(status, ReduceOp::kMin)->wait();
  }
  const int64_t first = status.data<int64_t>()[0];
  raise_first_failure(*mesh_, first < n ? static_cast<int>(first) : -1, message_);
}

void raise_first_failure(Communicator& comm, int first, const std::string& mine) {
  if (first < 0) return;
  Tensor text = zeros({kMessageWords}, TensorOptions(kInt64));
  if (first == comm.rank()) {
    std::memcpy(text.data<int64_t>(), mine.data(),
                std::min<size_t>(mine.size(), kMessageBytes - 1));
  }
  if (comm.size() > 1) {
    CollectiveLabel label("pipeline failure");
    comm.broadcast(text, first)->wait();
  }
  std::string message(reinterpret_cast<const char*>(text.data<int64_t>()), kMessageBytes - 1);
  message.resize(std::strlen(message.c_str()));
  if (first != comm.rank()) {
    message += " (raised on world rank " + std::to_string(comm.world_ranks()[first]) + ")";
  }
  throw Error(message);
}

}  // namespace dtensor::pipelining::detail

// Debug logging by topic (PyTorch's TORCH_LOGS for DTensor):
//
//   DTENSOR_LOG=dispatch,redistribute,propagation,collectives mpirun -np 4 ./prog
//   DTENSOR_LOG=all,rank0 ./prog            (every topic, printed by world rank 0 only)
//   dtensor::set_log("redistribute");        (the same from C++; "" turns logging off)
//
// Topics and what each line says:
//   dispatch      each sharded op: its input placements, the chosen strategy, output placements
//   propagation   each sharding-propagation lookup: cache hit or miss, the chosen strategy and
//                 its modelled redistribution cost
//   redistribute  each executed redistribute plan: source and target placements, steps, cost
//   collectives   each collective: kind, bytes, communicator (mesh dim, ranks) and its duration
//                 from issue to completion (logged when the Work is waited on)
//   config        what runs, once when the topic turns on: the CPU GEMM library, its version,
//                 kernel (core) and thread count, and a warning when that kernel is a generic
//                 fallback for the CPU (dtensor/ops/matmul/blas_info.h)
// Lines look like "[dtensor rank 1 redistribute] ..." and go to stderr, one write per line, or
// to the sink installed by set_log_sink (tests capture them this way). Without "rank0" every
// rank prints its own lines.
//
// Off by default. When off, the only cost on the hot path is log_enabled(): one relaxed atomic
// load and a mask test; messages are built only when their topic is on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dtensor {

/// A debug-log topic (a bit in the enabled mask).
enum class LogTopic : uint32_t {
  kDispatch = 1u << 0,      ///< sharded op dispatch
  kPropagation = 1u << 1,   ///< sharding propagation and its cache
  kRedistribute = 1u << 2,  ///< redistribute plans as executed
  kCollectives = 1u << 3,   ///< collectives with size and duration
  kConfig = 1u << 4,        ///< the runtime's configuration (GEMM library and kernel, ...)
};

namespace detail {
/// The enabled topics (LogTopic bits); read with a relaxed load on every check.
extern std::atomic<uint32_t> g_log_topics;
}  // namespace detail

/// True when `topic` is on. The hot-path check: one relaxed atomic load.
inline bool log_enabled(LogTopic topic) {
  return (detail::g_log_topics.load(std::memory_order_relaxed) & static_cast<uint32_t>(topic)) != 0;
}

/// Turns topics on from a comma-separated list, the DTENSOR_LOG syntax: dispatch, propagation,
/// redistribute, collectives, config, all, and rank0 (only world rank 0 prints). An empty string
/// turns logging off. Throws dtensor::Error naming an unknown word and listing the accepted ones.
void set_log(std::string_view spec);

/// The current setting in the set_log syntax ("" when off), e.g. "dispatch,collectives".
std::string log_setting();

/// Applies DTENSOR_LOG when it is set (empty: off; unset: the current setting stays). Called
/// when dtensor initialises MPI (Runtime, or the first collective); a bad value raises there,
/// naming the variable.
void configure_log_from_env();

/// Where log lines go. The default (an empty function) writes each line to stderr with one
/// write. Returns the previous sink. A line has no trailing newline.
using LogSink = std::function<void(std::string_view line)>;
/// Installs `sink` (an empty function: stderr) and returns the previous one.
LogSink set_log_sink(LogSink sink);

/// Emits one line for `topic` (prefix "[dtensor rank R topic] " added) if the topic is on and,
/// under rank0, this is world rank 0. Callers check log_enabled() first so that the message is
/// built only when it will be printed.
void log_line(LogTopic topic, std::string_view message);

/// Registers a producer of one "config" line (a higher layer describing what it runs, e.g. the
/// GEMM library): called and logged when the topic turns on (set_log, DTENSOR_LOG), and at once
/// when it is on already; before MPI is initialised the lines wait for report_pending_config.
void add_config_reporter(std::function<std::string()> reporter);

/// Logs the "config" lines held back because the topic turned on (or a reporter registered
/// while it was on) before MPI was initialised; called by the Runtime once it is, so that the
/// lines carry the right rank and "rank0" filters them. A no-op when nothing is pending.
void report_pending_config();

/// Name of a topic: "dispatch", "propagation", "redistribute", "collectives", "config".
std::string_view log_topic_name(LogTopic topic);

}  // namespace dtensor

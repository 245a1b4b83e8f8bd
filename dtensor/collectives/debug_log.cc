#include "dtensor/collectives/debug_log.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "dtensor/collectives/runtime.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

namespace detail {
std::atomic<uint32_t> g_log_topics{0};
}  // namespace detail

namespace {

constexpr LogTopic kTopics[] = {LogTopic::kDispatch, LogTopic::kPropagation,
                                LogTopic::kRedistribute, LogTopic::kCollectives, LogTopic::kConfig};
constexpr uint32_t kAllTopics = 0x1F;

std::atomic<bool> g_rank0_only{false};

// The sink is swapped rarely (tests) and called only when a topic is on.
std::mutex& sink_mutex() {
  static std::mutex mu;
  return mu;
}
LogSink& sink() {
  static LogSink s;
  return s;
}

struct Setting {
  uint32_t topics = 0;
  bool rank0 = false;
};

Setting parse(std::string_view spec, std::string_view source) {
  Setting s;
  for (std::string_view rest = spec; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string_view word = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
    while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
    if (word.empty()) continue;
    if (word == "all") {
      s.topics |= kAllTopics;
      continue;
    }
    if (word == "rank0") {
      s.rank0 = true;
      continue;
    }
    bool found = false;
    for (LogTopic t : kTopics) {
      if (word == log_topic_name(t)) {
        s.topics |= static_cast<uint32_t>(t);
        found = true;
      }
    }
    DT_CHECK(found,
             "[%s] unknown log topic '%s' in \"%s\" (expected a comma-separated list of dispatch, "
             "propagation, redistribute, collectives, config, all, rank0)",
             source, word, spec);
  }
  return s;
}

// The "config" topic's line producers (higher layers register theirs at static
// initialisation).
std::mutex& reporters_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<std::function<std::string()>>& reporters() {
  static std::vector<std::function<std::string()>> r;
  return r;
}

// Set when the "config" topic turned on before MPI was initialised: the lines wait for the
// Runtime (report_pending_config), so that they carry the rank and "rank0" filters them.
std::atomic<bool> g_config_pending{false};

void report_config() {
  std::vector<std::function<std::string()>> copy;
  {
    std::lock_guard<std::mutex> lock(reporters_mutex());
    copy = reporters();
  }
  for (const auto& r : copy) log_line(LogTopic::kConfig, r());
}

void apply(const Setting& s) {
  const uint32_t before = detail::g_log_topics.load(std::memory_order_relaxed);
  g_rank0_only.store(s.rank0, std::memory_order_relaxed);
  detail::g_log_topics.store(s.topics, std::memory_order_relaxed);
  const auto config = static_cast<uint32_t>(LogTopic::kConfig);
  if ((s.topics & config) != 0 && (before & config) == 0) {
    if (Runtime::initialized()) {
      report_config();
    } else {
      g_config_pending.store(true);
    }
  }
}

}  // namespace

std::string_view log_topic_name(LogTopic topic) {
  switch (topic) {
    case LogTopic::kDispatch:
      return "dispatch";
    case LogTopic::kPropagation:
      return "propagation";
    case LogTopic::kRedistribute:
      return "redistribute";
    case LogTopic::kCollectives:
      return "collectives";
    case LogTopic::kConfig:
      return "config";
  }
  return "?";
}

void set_log(std::string_view spec) {
  apply(parse(spec, "set_log"));
}

std::string log_setting() {
  std::vector<std::string> words;
  const uint32_t on = detail::g_log_topics.load(std::memory_order_relaxed);
  for (LogTopic t : kTopics) {
    if ((on & static_cast<uint32_t>(t)) != 0) words.emplace_back(log_topic_name(t));
  }
  if (!words.empty() && g_rank0_only.load(std::memory_order_relaxed)) words.push_back("rank0");
  return absl::StrJoin(words, ",");
}

void configure_log_from_env() {
  const char* env = std::getenv("DTENSOR_LOG");
  if (env != nullptr) apply(parse(env, "DTENSOR_LOG"));
}

void add_config_reporter(std::function<std::string()> reporter) {
  if (log_enabled(LogTopic::kConfig)) {
    if (Runtime::initialized()) {
      log_line(LogTopic::kConfig, reporter());
    } else {
      g_config_pending.store(true);
    }
  }
  std::lock_guard<std::mutex> lock(reporters_mutex());
  reporters().push_back(std::move(reporter));
}

void report_pending_config() {
  if (g_config_pending.exchange(false) && log_enabled(LogTopic::kConfig)) report_config();
}

LogSink set_log_sink(LogSink s) {
  std::lock_guard<std::mutex> lock(sink_mutex());
  std::swap(sink(), s);
  return s;
}

void log_line(LogTopic topic, std::string_view message) {
  if (!log_enabled(topic)) return;
  const int rank = Runtime::initialized() ? world_rank() : 0;
  if (g_rank0_only.load(std::memory_order_relaxed) && rank != 0) return;
  std::string line =
      absl::StrFormat("[dtensor rank %d %s] %s", rank, log_topic_name(topic), message);
  std::lock_guard<std::mutex> lock(sink_mutex());
  if (sink()) {
    sink()(line);
    return;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write: lines of ranks do not interleave
  std::fflush(stderr);
}

}  // namespace dtensor

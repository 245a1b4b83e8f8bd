// A small process-unique number per thread, for rules of the form "one thread at a time" that
// must compare threads cheaply (std::thread::id does not fit an atomic integer portably).
#pragma once

#include <cstdint>

namespace dtensor::detail {

// Never 0 (0 can mean "no thread"); the same for the lifetime of the calling thread.
uint64_t this_thread_token();

}  // namespace dtensor::detail

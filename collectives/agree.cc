#include "collectives/agree.h"

#include <absl/strings/str_join.h>

#include <cstring>
#include <string>
#include <vector>

#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor {

void agree_on_error(Communicator& comm, std::string_view local_error) {
  CollectiveLabel label("agree_on_error");
  const int64_t one = 1;
  const int64_t n = comm.size();
  int64_t mine = static_cast<int64_t>(local_error.size());
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  comm.all_gather(from_blob(lengths.data(), {&n, 1}, DType::kInt64),
                  from_blob(&mine, {&one, 1}, DType::kInt64))
      ->wait();
  int first = -1;
  std::vector<int> failed;
  for (int r = 0; r < n; ++r) {
    if (lengths[r] == 0) continue;
    if (first < 0) first = r;
    failed.push_back(comm.world_ranks()[static_cast<size_t>(r)]);
  }
  if (first < 0) return;
  // The first failing rank's message, as int32 words (there is no byte dtype).
  const int64_t length = lengths[first];
  int64_t words = (length + 3) / 4;
  std::vector<int32_t> buffer(static_cast<size_t>(words), 0);
  if (comm.rank() == first) std::memcpy(buffer.data(), local_error.data(), length);
  comm.broadcast(from_blob(buffer.data(), {&words, 1}, DType::kInt32), first)->wait();
  const std::string message(reinterpret_cast<const char*>(buffer.data()),
                            static_cast<size_t>(length));
  DT_FAIL("%s (raised on rank %d; ranks that failed: %s)", message,
          comm.world_ranks()[static_cast<size_t>(first)], absl::StrJoin(failed, ", "));
}

}  // namespace dtensor

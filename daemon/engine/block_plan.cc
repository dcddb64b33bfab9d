#include "daemon/engine/block_plan.h"

#include <algorithm>

namespace xferd::engine {

void AppendSplit(uint64_t local, uint64_t remote, uint64_t length, uint32_t slice,
                 std::vector<transport::Block>* out) {
  while (length > 0) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(length, slice));
    out->push_back(transport::Block{local, remote, n});
    local += n;
    remote += n;
    length -= n;
  }
}

std::vector<uint32_t> GroupOps(absl::Span<const transport::Block> blocks, uint32_t slice) {
  std::vector<uint32_t> starts;
  starts.push_back(0);
  uint64_t bytes = 0;
  uint32_t count = 0;
  for (uint32_t i = 0; i < blocks.size(); ++i) {
    if (count > 0 && (count == transport::kMaxBlocksPerOp || bytes + blocks[i].length > slice)) {
      starts.push_back(i);
      bytes = 0;
      count = 0;
    }
    bytes += blocks[i].length;
    ++count;
  }
  starts.push_back(static_cast<uint32_t>(blocks.size()));
  return starts;
}

}  // namespace xferd::engine

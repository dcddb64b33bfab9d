#include "daemon/transport/verbs/remote_region_check.h"

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {

absl::Status CheckRemoteRegionKeys(const RemoteRegion& r) {
  // A slice may cross at most one chunk boundary (kMaxWrsPerOp); a single
  // chunk may be as small as the region.
  const bool chunk_ok = r.mr_chunk_bytes >= kMinMrChunk || r.mr_chunk_bytes >= r.size;
  const uint64_t chunks =
      r.mr_chunk_bytes == 0 ? 0 : (r.size + r.mr_chunk_bytes - 1) / r.mr_chunk_bytes;
  if (r.addr == 0 || r.size == 0 || !chunk_ok || r.rkeys.size() != chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer sent malformed RDMA keys for region id ", r.region_id, " (", r.rkeys.size(),
        " rkeys, chunk ", r.mr_chunk_bytes, " bytes, size ", r.size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace xferd::transport::verbs

#include "daemon/transport/verbs/remote_region_check.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {

absl::Status CheckRemoteRegionKeys(const RemoteRegion& r) {
  // A slice may cross at most one chunk boundary (kMaxWrsPerOp); a single
  // chunk may be as small as the region.
  const bool chunk_ok = r.mr_chunk_bytes >= kMinMrChunk || r.mr_chunk_bytes >= r.size;
  // Rounded up without computing size + chunk - 1, which wraps for sizes near
  // 2^64: a peer could then pass a huge region with too few (even no) rkeys,
  // and the datapath would index past them.
  const uint64_t chunks =
      r.mr_chunk_bytes == 0 ? 0
                            : r.size / r.mr_chunk_bytes + (r.size % r.mr_chunk_bytes != 0 ? 1 : 0);
  // The region's last byte must be addressable: addr + size - 1 must not wrap.
  const bool fits = r.size != 0 && r.addr <= std::numeric_limits<uint64_t>::max() - (r.size - 1);
  bool devices_ok = r.more_rkeys.size() < 64;  // no daemon drives more devices
  for (const std::vector<uint32_t>& keys : r.more_rkeys) devices_ok &= keys.size() == chunks;
  if (r.addr == 0 || !fits || !chunk_ok || r.rkeys.size() != chunks || !devices_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer sent malformed RDMA keys for region id ", r.region_id, " (",
                     r.rkeys.size(), " rkeys on ", r.device_count(), " devices, chunk ", r.mr_chunk_bytes, " bytes, size ", r.size,
                     ", address 0x", absl::Hex(r.addr), ")"));
  }
  return absl::OkStatus();
}

}  // namespace xferd::transport::verbs

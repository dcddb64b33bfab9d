#include "daemon/transport/verbs/remote_region_check.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {
namespace {

// Whether every device's list holds the keys a link of `lanes` lanes
// indexes: one per chunk, or with per-lane keys (memory windows) key_lanes
// x chunks on the devices the link uses and none elsewhere.
bool KeysCoverRegion(const RemoteRegion& r, uint64_t chunks, uint32_t lanes) {
  if (r.more_rkeys.size() >= 64) return false;  // no daemon drives more devices
  if (r.key_lanes == 0) {
    bool ok = r.rkeys.size() == chunks;
    for (const std::vector<uint32_t>& keys : r.more_rkeys) ok &= keys.size() == chunks;
    return ok;
  }
  if (r.key_lanes > kMaxKeyLanes || r.key_lanes < lanes) return false;
  // has_lane_keys indexes one queue pair per lane on every device.
  if (!r.key_qpns.empty() && r.key_qpns.size() != size_t{r.device_count()} * r.key_lanes) {
    return false;
  }
  // chunks < 2^64 / kMinMrChunk unless the region is one chunk: no overflow.
  const uint64_t per_device = chunks * r.key_lanes;
  bool any = false;
  for (uint32_t d = 0; d < r.device_count(); ++d) {
    const size_t n = r.device_rkeys(d).size();
    if (n != 0 && n != per_device) return false;
    any |= n != 0;
  }
  return any;
}

}  // namespace

absl::Status CheckRemoteRegionKeys(const RemoteRegion& r, uint32_t lanes) {
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
  if (r.addr == 0 || !fits || !chunk_ok || !KeysCoverRegion(r, chunks, lanes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer sent malformed RDMA keys for region id ", r.region_id, " (", r.rkeys.size(),
        " rkeys on ", r.device_count(), " devices for ", r.key_lanes, " of ", lanes,
        " lanes, chunk ", r.mr_chunk_bytes, " bytes, size ", r.size, ", address 0x",
        absl::Hex(r.addr), ")"));
  }
  return absl::OkStatus();
}

}  // namespace xferd::transport::verbs

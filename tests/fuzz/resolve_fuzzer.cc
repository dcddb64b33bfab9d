// Fuzzes a peer's answer to ResolveRegion: the bytes of a
// v1::ResolveRegionResponse, converted by the service layer (FromProto) and
// checked by the verbs transport (CheckRemoteRegionKeys) for a link of
// kLanes lanes. For keys it accepts, the verbs datapath's indexing must stay
// in bounds: a slice at any offset below the region's size on lane l of a
// device with keys uses lane_rkeys(device, l)[offset / mr_chunk_bytes]
// (verbs_datapath.cc), checked here for every lane and device at the first,
// last and input-chosen offsets.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/service/peer_convert.h"
#include "daemon/transport/verbs/remote_region_check.h"
#include "tests/fuzz/fuzz_check.h"
#include "xferd/v1/peer.pb.h"

namespace {

constexpr uint32_t kLanes = 2;

void CheckIndex(const xferd::transport::RemoteRegion& r, uint64_t offset) {
  if (offset >= r.size) return;
  for (uint32_t d = 0; d < r.device_count(); ++d) {
    if (!r.has_keys(d)) continue;
    const std::vector<uint32_t>& keys = r.device_rkeys(d);
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      const uint32_t* key = r.lane_rkeys(d, lane) + offset / r.mr_chunk_bytes;
      FUZZ_CHECK(key >= keys.data() && key < keys.data() + keys.size());
    }
  }
  // The datapath cuts a slice where it crosses a chunk: the piece length is
  // at least 1, so the slicing loop always progresses.
  FUZZ_CHECK(r.mr_chunk_bytes - offset % r.mr_chunk_bytes >= 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd;
  v1::ResolveRegionResponse response;
  if (!response.ParseFromArray(data, static_cast<int>(size))) return 0;
  const engine::ResolvedRegion region = service::FromProto(response);
  const transport::RemoteRegion& r = region.key;
  if (!transport::verbs::CheckRemoteRegionKeys(r, kLanes).ok()) return 0;
  FUZZ_CHECK(r.size > 0 && r.addr != 0 && r.mr_chunk_bytes > 0);
  FUZZ_CHECK(r.addr + (r.size - 1) >= r.addr);  // no wrap in the peer's space
  CheckIndex(r, 0);
  CheckIndex(r, r.size - 1);
  // Offsets the input chooses: its first bytes, modulo the size.
  uint64_t offset = 0;
  std::memcpy(&offset, data, std::min<size_t>(size, sizeof(offset)));
  CheckIndex(r, offset % r.size);
  return 0;
}

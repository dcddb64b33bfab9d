#include "daemon/transport/verbs/notice_record.h"

namespace xferd::transport::verbs {

std::shared_ptr<memory::Region> AcceptNotice(const NoticeRecord& record,
                                             const memory::RegionRegistry& regions,
                                             absl::string_view peer) {
  // Every block has at least one byte, and the span holds them all.
  const LandingNotice& n = record.notice;
  if (n.blocks == 0 || n.blocks > n.bytes || n.bytes > n.length) return nullptr;
  std::shared_ptr<memory::Region> region = regions.FindById(record.region_id);
  if (region == nullptr || !region->PeerAllowed(peer) || !region->access().remote_write ||
      !region->CheckRange(record.notice.offset, record.notice.length, "landed").ok()) {
    return nullptr;
  }
  return region;
}

}  // namespace xferd::transport::verbs

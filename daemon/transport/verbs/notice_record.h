// The 48-byte record a writer RDMA-writes into the receiver's notice ring
// just before a transfer's final WRITE_WITH_IMM on the same queue pair; the
// immediate data names the ring slot. RC delivers the two in order, so when
// the receive completes, the record is in place and describes the whole
// transfer. Its contents come from a peer: the receiver validates them.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "daemon/base/endian.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::verbs {

inline constexpr size_t kNoticeRecordBytes = 48;
inline constexpr uint32_t kNoticeMagic = 0x4e465258;  // "XRFN"

struct NoticeRecord {
  uint32_t region_id = 0;
  LandingNotice notice;
};

inline void EncodeNoticeRecord(const NoticeRecord& r, uint8_t out[kNoticeRecordBytes]) {
  StoreLE<uint32_t>(out, kNoticeMagic);
  StoreLE<uint32_t>(out + 4, r.region_id);
  StoreLE<uint64_t>(out + 8, r.notice.transfer_id);
  StoreLE<uint64_t>(out + 16, r.notice.offset);
  StoreLE<uint64_t>(out + 24, r.notice.length);
  StoreLE<uint64_t>(out + 32, r.notice.blocks);
  StoreLE<uint64_t>(out + 40, r.notice.bytes);
}

// False if the bytes are not a record (wrong magic).
inline bool DecodeNoticeRecord(const uint8_t in[kNoticeRecordBytes], NoticeRecord* r) {
  if (LoadLE<uint32_t>(in) != kNoticeMagic) return false;
  r->region_id = LoadLE<uint32_t>(in + 4);
  r->notice.transfer_id = LoadLE<uint64_t>(in + 8);
  r->notice.offset = LoadLE<uint64_t>(in + 16);
  r->notice.length = LoadLE<uint64_t>(in + 24);
  r->notice.blocks = LoadLE<uint64_t>(in + 32);
  r->notice.bytes = LoadLE<uint64_t>(in + 40);
  return true;
}

// The region a decoded record from `peer` may raise a landed event on: one
// that is registered, admits the peer, allows remote writes and contains the
// record's span, for a record whose payload fits its span (1 <= blocks <=
// bytes <= length). Null otherwise (the record is malformed or stale). Any
// thread.
std::shared_ptr<memory::Region> AcceptNotice(const NoticeRecord& record,
                                             const memory::RegionRegistry& regions,
                                             absl::string_view peer);

}  // namespace xferd::transport::verbs

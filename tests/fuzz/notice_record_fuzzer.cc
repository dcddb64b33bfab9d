// Fuzzes the verbs transport's landing-notice records (notice_record.h): the
// 48 bytes a peer RDMA-writes into our notice ring. A record that decodes
// must encode back to the same bytes; its validation against the region
// registry (AcceptNotice) may only accept a span inside a region this peer
// may write, holding the payload it claims.
#include <cstdint>
#include <cstring>
#include <memory>

#include "daemon/transport/verbs/notice_record.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_regions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd::transport::verbs;
  if (size < kNoticeRecordBytes) return 0;
  const std::unique_ptr<uint8_t[]> bytes(new uint8_t[kNoticeRecordBytes]);
  std::memcpy(bytes.get(), data, kNoticeRecordBytes);
  NoticeRecord record;
  if (!DecodeNoticeRecord(bytes.get(), &record)) return 0;
  uint8_t again[kNoticeRecordBytes];
  EncodeNoticeRecord(record, again);
  FUZZ_CHECK(std::memcmp(bytes.get(), again, kNoticeRecordBytes) == 0);

  const xferd::fuzz::FuzzRegions& regions = xferd::fuzz::FuzzRegions::Get();
  std::shared_ptr<xferd::memory::Region> region =
      AcceptNotice(record, regions.registry(), xferd::fuzz::kFuzzPeer);
  if (region != nullptr) {
    FUZZ_CHECK(region->id() == record.region_id);
    FUZZ_CHECK(regions.Writable(*region));
    FUZZ_CHECK(record.notice.length > 0 && record.notice.offset < region->size() &&
               record.notice.length <= region->size() - record.notice.offset);
    FUZZ_CHECK(record.notice.blocks >= 1 && record.notice.blocks <= record.notice.bytes &&
               record.notice.bytes <= record.notice.length);
  }
  return 0;
}

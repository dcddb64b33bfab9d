#include "daemon/service/blocks_convert.h"

#include <memory>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"
#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

// Unpacks a bytes field of little-endian integers of type T.
template <typename T>
absl::Status Unpack(const std::string& bytes, absl::string_view field, std::vector<T>* out) {
  if (bytes.size() % sizeof(T) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", bytes.size(), " bytes: not a multiple of ", sizeof(T),
                     " (one little-endian ", sizeof(T) == 8 ? "uint64" : "uint32",
                     " per block, e.g. numpy .astype('<u", sizeof(T), "').tobytes())"));
  }
  out->resize(bytes.size() / sizeof(T));
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t i = 0; i < out->size(); ++i) (*out)[i] = LoadLE<T>(p + i * sizeof(T));
  return absl::OkStatus();
}

absl::Status UnpackList(const v1::BlockList& l, engine::BlockSpec* s) {
  s->form = engine::BlockSpec::Form::kList;
  s->block_length = l.block_length();
  if (absl::Status st = Unpack(l.src_offsets(), "blocks.list.src_offsets", &s->src_offsets);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = Unpack(l.dst_offsets(), "blocks.list.dst_offsets", &s->dst_offsets);
      !st.ok()) {
    return st;
  }
  return Unpack(l.lengths(), "blocks.list.lengths", &s->lengths);
}

absl::Status UnpackLayout(const v1::LayoutBlocks& l, engine::BlockSpec* s) {
  s->form = engine::BlockSpec::Form::kLayout;
  s->src_layout = l.src_layout();
  s->dst_layout = l.dst_layout();
  if (absl::Status st = Unpack(l.src_indices(), "blocks.layout.src_indices", &s->src_indices);
      !st.ok()) {
    return st;
  }
  return Unpack(l.dst_indices(), "blocks.layout.dst_indices", &s->dst_indices);
}

}  // namespace

absl::StatusOr<engine::BlockSpec> FromProto(const v1::Blocks& b);

namespace {

// WriteRequest and ReadRequest have the same fields; only the direction
// (which side is local) differs.
template <typename Request>
absl::StatusOr<engine::TransferSpec> TransferFromProto(const Request& r, transport::OpKind direction) {
  engine::TransferSpec spec;
  spec.direction = direction;
  spec.src_region = r.src_region();
  spec.src_offset = r.src_offset();
  spec.peer = r.peer();
  spec.dst_region = r.dst_region();
  spec.dst_offset = r.dst_offset();
  spec.length = r.length();
  spec.slice_size = r.slice_size();
  if (r.has_verify()) spec.verify = r.verify();
  if constexpr (std::is_same_v<Request, v1::ReadRequest>) {
    if (!r.expected_checksums().empty()) {
      auto expected = std::make_shared<std::vector<uint64_t>>();
      if (absl::Status st = Unpack(r.expected_checksums(), "expected_checksums", expected.get());
          !st.ok()) {
        return st;
      }
      spec.expected_checksums = std::move(expected);
    }
  }
  spec.label = r.label();
  if (!engine::PriorityFromWire(static_cast<uint32_t>(r.priority()), &spec.priority)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority ", static_cast<int>(r.priority()),
        " is unknown: use PRIORITY_CRITICAL, PRIORITY_NORMAL (the default), PRIORITY_BULK or "
        "PRIORITY_BACKGROUND"));
  }
  if (r.has_timeout()) {
    absl::StatusOr<absl::Duration> timeout = service::FromProto(r.timeout(), "timeout");
    if (!timeout.ok()) return timeout.status();
    spec.timeout = *timeout;
  }
  if (r.has_blocks()) {
    absl::StatusOr<engine::BlockSpec> blocks = service::FromProto(r.blocks());
    if (!blocks.ok()) return blocks.status();
    spec.blocks = *std::move(blocks);
  }
  const bool layout = spec.blocks.form == engine::BlockSpec::Form::kLayout;
  if (spec.peer.empty() || (!layout && (spec.src_region.empty() || spec.dst_region.empty()))) {
    return absl::InvalidArgumentError(
        "src_region, peer and dst_region are required (with layout blocks the regions may come "
        "from the layouts)");
  }
  return spec;
}

}  // namespace

absl::StatusOr<engine::BlockSpec> FromProto(const v1::Blocks& b) {
  engine::BlockSpec s;
  switch (b.form_case()) {
    case v1::Blocks::kList:
      if (absl::Status st = UnpackList(b.list(), &s); !st.ok()) return st;
      break;
    case v1::Blocks::kStrided:
      s.form = engine::BlockSpec::Form::kStrided;
      for (const v1::StridedRun& r : b.strided().runs()) {
        s.runs.push_back(engine::StridedRun{r.src_start(), r.dst_start(), r.block_length(),
                                            r.src_stride(), r.dst_stride(), r.count()});
      }
      break;
    case v1::Blocks::kLayout:
      if (absl::Status st = UnpackLayout(b.layout(), &s); !st.ok()) return st;
      break;
    default:
      return absl::InvalidArgumentError("blocks has no form: set list, strided or layout");
  }
  return s;
}

namespace {

// A reply that lingers longer would hold the caller's call (and a watch
// loop entry) with no benefit over WaitTransfer.
constexpr absl::Duration kMaxLinger = absl::Seconds(1);

template <typename Request>
absl::StatusOr<absl::Duration> LingerFromProto(const Request& r) {
  if (!r.has_linger()) return r.wait() ? absl::InfiniteDuration() : absl::ZeroDuration();
  if (r.wait()) {
    return absl::InvalidArgumentError("linger is for replies without wait: set one or the other");
  }
  absl::StatusOr<absl::Duration> linger = FromProto(r.linger(), "linger");
  if (linger.ok() && *linger > kMaxLinger) {
    return absl::InvalidArgumentError(absl::StrCat("linger ", absl::FormatDuration(*linger),
                                                   " is longer than 1s: use wait instead"));
  }
  return linger;
}

template <typename Request>
absl::StatusOr<Submission> SubmissionOf(const Request& r) {
  absl::StatusOr<engine::TransferSpec> spec = service::FromProto(r);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<absl::Duration> linger = LingerFromProto(r);
  if (!linger.ok()) return linger.status();
  return Submission{*std::move(spec), *linger};
}

}  // namespace

absl::StatusOr<Submission> SubmissionFromProto(const v1::WriteRequest& r) {
  return SubmissionOf(r);
}

absl::StatusOr<Submission> SubmissionFromProto(const v1::ReadRequest& r) {
  return SubmissionOf(r);
}

absl::StatusOr<engine::TransferSpec> FromProto(const v1::WriteRequest& r) {
  return TransferFromProto(r, transport::OpKind::kWrite);
}

absl::StatusOr<engine::TransferSpec> FromProto(const v1::ReadRequest& r) {
  return TransferFromProto(r, transport::OpKind::kRead);
}

absl::StatusOr<engine::Layout> FromProto(const v1::PrepareLayoutRequest& r) {
  engine::Layout l;
  l.name = r.name();
  l.peer = r.peer();
  l.region = r.region();
  l.block_length = r.block_length();
  l.start = r.start();
  l.stride = r.stride();
  l.count = r.count();
  if (absl::Status s = Unpack(r.offsets(), "offsets", &l.offsets); !s.ok()) return s;
  return l;
}

void ToProto(const engine::Layout& l, v1::Layout* out) {
  out->set_name(l.name);
  out->set_peer(l.peer);
  out->set_region(l.region);
  out->set_block_length(l.block_length);
  out->set_blocks(l.blocks());
}

}  // namespace xferd::service

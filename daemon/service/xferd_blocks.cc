// XferdServiceImpl: client-streamed many-block requests and prepared
// layouts. Conversions are in blocks_convert.cc; meaning is checked by the
// engine (all or nothing, errors naming the block).
#include "absl/strings/str_cat.h"
#include "daemon/service/blocks_convert.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/status_convert.h"
#include "daemon/service/xferd_service.h"

namespace xferd::service {

// Collects a SubmitStream: the write or read first, then more blocks of the
// same form, appended in order; submits one transfer when the client closes
// its side. Runs on gRPC threads, one callback at a time.
class SubmitStreamReactor final : public grpc::ServerReadReactor<v1::TransferChunk> {
 public:
  SubmitStreamReactor(XferdServiceImpl& service, const engine::Tenant& tenant,
                      v1::Transfer* response)
      : service_(service), tenant_(tenant), response_(response) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side: the request is complete
      Submit();
      return;
    }
    if (absl::Status s = Take(); !s.ok()) {
      Finish(ToGrpc(
          absl::Status(s.code(), absl::StrCat("message #", messages_ - 1, ": ", s.message()))));
      return;
    }
    chunk_.Clear();
    StartRead(&chunk_);
  }
  void OnDone() override { delete this; }

 private:
  absl::Status Take() {
    ++messages_;
    const bool first = !spec_.has_value();
    switch (chunk_.part_case()) {
      case v1::TransferChunk::kWrite:
      case v1::TransferChunk::kRead: {
        if (!first) {
          return absl::InvalidArgumentError(
              "the write or read came already: later messages carry more_blocks only");
        }
        absl::StatusOr<Submission> submission = chunk_.part_case() == v1::TransferChunk::kWrite
                                                    ? SubmissionFromProto(chunk_.write())
                                                    : SubmissionFromProto(chunk_.read());
        if (!submission.ok()) return submission.status();
        linger_ = submission->linger;
        spec_ = std::move(submission->spec);
        return absl::OkStatus();
      }
      case v1::TransferChunk::kMoreBlocks: {
        if (first)
          return absl::InvalidArgumentError("the first message must carry the write or read");
        absl::StatusOr<engine::BlockSpec> more = FromProto(chunk_.more_blocks());
        if (!more.ok()) return more.status();
        return spec_->blocks.Append(*std::move(more));
      }
      default:
        return absl::InvalidArgumentError("empty message: set write, read or more_blocks");
    }
  }

  void Submit() {
    if (!spec_) {
      Finish(ToGrpc(absl::InvalidArgumentError(
          "empty stream: the first message must carry the write or read")));
      return;
    }
    std::vector<engine::TransferSpec> specs;
    specs.push_back(*std::move(spec_));
    service_.SubmitAndReply(
        tenant_, std::move(specs), /*batch=*/false, linger_,
        [this](const grpc::Status& status) { Finish(status); },
        XferdServiceImpl::FillOne(response_));
  }

  XferdServiceImpl& service_;
  const engine::Tenant& tenant_;
  v1::Transfer* const response_;
  v1::TransferChunk chunk_;
  std::optional<engine::TransferSpec> spec_;
  absl::Duration linger_;
  uint64_t messages_ = 0;
};

grpc::ServerReadReactor<v1::TransferChunk>* XferdServiceImpl::SubmitStream(
    grpc::CallbackServerContext* context, v1::Transfer* response) {
  return new SubmitStreamReactor(*this, Caller(*context), response);
}

grpc::ServerUnaryReactor* XferdServiceImpl::PrepareLayout(grpc::CallbackServerContext* context,
                                                          const v1::PrepareLayoutRequest* request,
                                                          v1::Layout* response) {
  absl::StatusOr<engine::Layout> layout = FromProto(*request);
  if (!layout.ok()) return Reply(context, layout.status());
  absl::StatusOr<std::shared_ptr<const engine::Layout>> prepared =
      engine_.PrepareLayout(*std::move(layout), Caller(*context));
  if (prepared.ok()) ToProto(**prepared, response);
  return Reply(context, prepared.status());
}

grpc::ServerUnaryReactor* XferdServiceImpl::DeleteLayout(grpc::CallbackServerContext* context,
                                                         const v1::DeleteLayoutRequest* request,
                                                         v1::DeleteLayoutResponse*) {
  return Reply(context, engine_.DeleteLayout(request->name(), Caller(*context)));
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListLayouts(grpc::CallbackServerContext* context,
                                                        const v1::ListLayoutsRequest*,
                                                        v1::ListLayoutsResponse* response) {
  const engine::Tenant& tenant = Caller(*context);
  for (const auto& layout : engine_.ListLayouts()) {
    if (tenant.Owns(layout->owner)) ToProto(*layout, response->add_layouts());
  }
  return Reply(context, absl::OkStatus());
}

}  // namespace xferd::service

#include "tests/fuzz/tcp_peer_script.h"

#include <algorithm>

#include "daemon/transport/tcp/tcp_frame.h"
#include "tests/fuzz/fuzz_regions.h"

namespace xferd::fuzz {
namespace {

using transport::tcp::FrameHeader;
using transport::tcp::FrameType;

// Bounds what one command adds, so an input stays a few frames' worth.
constexpr uint32_t kMaxFuzzedLength = 4096;
constexpr size_t kMaxScriptBytes = 64 * 1024;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t U16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | Byte() << 8);
  }
  const uint8_t* Take(size_t* n) {
    *n = std::min(*n, size_ - std::min(pos_, size_));
    const uint8_t* at = data_ + pos_;
    pos_ += *n;
    return at;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

class Builder {
 public:
  explicit Builder(const std::vector<uint32_t>& own_lengths) : own_(own_lengths) {}

  void Header(FrameType type, uint8_t flags, uint16_t blocks, uint32_t word, uint32_t length,
              uint64_t seq) {
    uint8_t out[transport::tcp::kHeaderBytes];
    transport::tcp::EncodeHeader(FrameHeader{type, flags, blocks, word, length, seq}, out);
    Append(out, sizeof out);
  }
  void Append(const uint8_t* p, size_t n) { script_.bytes.insert(script_.bytes.end(), p, p + n); }

  // Our oldest unanswered frame (1-based), as a well-behaved peer sees it.
  uint64_t next_answer = 1;
  uint64_t peer_seq = 0;  // the peer's last WRITE / READ_REQ
  uint32_t OwnLength(uint64_t seq) const {
    return seq >= 1 && seq <= own_.size() ? own_[seq - 1] : 0;
  }
  PeerScript& script() { return script_; }

 private:
  const std::vector<uint32_t>& own_;
  PeerScript script_;
};

// A sequence number: right most of the time, else off by the input's choice.
uint64_t Seq(Input& in, uint64_t right) {
  const uint8_t how = in.Byte();
  return how < 224 ? right : right + (how & 7) - 3;
}

void ReadResp(Input& in, Builder& b) {
  const uint64_t seq = Seq(in, b.next_answer);
  const uint8_t how = in.Byte();
  const uint32_t length = how < 224 ? b.OwnLength(seq) : in.U16() % kMaxFuzzedLength;
  b.Header(FrameType::kReadResp, 0, 0, 0, length, seq);
  for (uint32_t i = 0; i < length; ++i) {
    const uint8_t byte = ReadRespByte(seq, i);
    b.Append(&byte, 1);
  }
  b.next_answer = seq + 1;
}

void Ack(Input& in, Builder& b) {
  const uint64_t seq = Seq(in, b.next_answer) + in.Byte() % 3;
  b.Header(FrameType::kAck, 0, 0, 0, 0, seq);
  b.next_answer = seq + 1;
}

void Nack(Input& in, Builder& b) {
  const uint64_t seq = Seq(in, b.next_answer);
  const uint32_t code = in.Byte() % 18;
  const uint32_t text = in.Byte() % 48;
  b.Header(FrameType::kNack, 0, 0, code, text, seq);
  for (uint32_t i = 0; i < text; ++i) {
    const uint8_t c = 'a' + i % 26;
    b.Append(&c, 1);
  }
  b.next_answer = seq + 1;
}

// A peer's WRITE or READ_REQ: region, blocks (mostly in range of the
// regions, sometimes anywhere), lengths that add up or not, payload.
void Request(Input& in, Builder& b, FrameType type) {
  static constexpr uint32_t kRegions[] = {1, 2, 3, FuzzRegions::kReadableId, 99};
  const uint32_t region = kRegions[in.Byte() % 5];
  const uint16_t blocks = 1 + in.Byte() % transport::kMaxBlocksPerOp;
  uint8_t table[transport::tcp::kMaxTableBytes];
  uint64_t total = 0;
  PeerRequest request;
  request.servable_read = type == FrameType::kReadReq && region == FuzzRegions::kReadableId;
  for (uint16_t i = 0; i < blocks; ++i) {
    const uint8_t how = in.Byte();
    const uint64_t offset = how < 240 ? in.U16() : uint64_t{in.U16()} << (how & 63);
    const uint32_t length = how < 250 ? in.U16() % 4096 + (how & 1) : uint32_t{in.U16()} << 16;
    transport::tcp::EncodeBlockEntry(offset, length, table + i * transport::tcp::kBlockEntryBytes);
    total += length;
    request.blocks.emplace_back(offset, length);
    constexpr uint64_t kSize = FuzzRegions::kReadableBytes;
    if (length == 0 || length > kSize || offset > kSize - length) request.servable_read = false;
  }
  const uint32_t length = in.Byte() < 240 ? static_cast<uint32_t>(total) : in.U16();
  if (length != total) request.servable_read = false;
  const uint64_t right = b.peer_seq + 1;
  b.peer_seq = Seq(in, right);
  PeerScript& script = b.script();
  if (b.peer_seq == right && script.requests.size() + 1 == right) {
    script.requests.push_back(std::move(request));
  }
  b.Header(type, 0, blocks, region, length, b.peer_seq);
  b.Append(table, blocks * transport::tcp::kBlockEntryBytes);
  if (type == FrameType::kWrite) {
    const uint32_t payload = std::min(length, kMaxFuzzedLength);
    for (uint32_t i = 0; i < payload; ++i) {
      const uint8_t byte = static_cast<uint8_t>(i);
      b.Append(&byte, 1);
    }
  }
}

void Raw(Input& in, Builder& b) {
  size_t n = in.Byte();
  const uint8_t* p = in.Take(&n);
  b.Append(p, n);
  b.script().raw = true;
}

}  // namespace

PeerScript BuildPeerScript(const uint8_t* data, size_t size,
                           const std::vector<uint32_t>& own_lengths) {
  Input in(data, size);
  Builder b(own_lengths);
  while (!in.empty() && b.script().bytes.size() < kMaxScriptBytes) {
    switch (in.Byte() % 6) {
      case 0:
        ReadResp(in, b);
        break;
      case 1:
        Ack(in, b);
        break;
      case 2:
        Nack(in, b);
        break;
      case 3:
        Request(in, b, FrameType::kReadReq);
        break;
      case 4:
        Request(in, b, FrameType::kWrite);
        break;
      default:
        Raw(in, b);
    }
  }
  return std::move(b.script());
}

}  // namespace xferd::fuzz

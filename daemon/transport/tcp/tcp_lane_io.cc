// TcpLane, the socket I/O shim: plain syscalls (recv, readv, sendmsg) on a
// lane without encryption or with kernel TLS both ways, SSL_read /
// SSL_write on a lane whose records OpenSSL handles, with the same
// contract for the frame logic: a byte count, 0 for a closed peer, or -1 with
// errno (EAGAIN: try again when epoll says so).
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/memory/guarded_copy.h"
#include "daemon/transport/tcp/tcp_ktls.h"
#include "daemon/transport/tcp/tcp_lane.h"

namespace xferd::transport::tcp {
namespace {

// iovecs per sendmsg: a few frames of kMaxBlocksPerOp blocks each (the
// kernel's limit, IOV_MAX, is 1024).
constexpr size_t kMaxIov = 512;
// A frame or an answer: header, blocks, verdict.
static_assert(kMaxIov >= 2 * (kMaxBlocksPerOp + 2), "a frame and an answer fit one sendmsg");

// TLS: pieces at least this big are encrypted straight from region memory
// (one record each); smaller ones (headers, block tables, answers, small
// blocks) are gathered into one record of up to kTlsRecordBytes, so a frame
// of many small blocks is not a record and a syscall per block.
constexpr size_t kTlsDirectBytes = 4096;
// Every header and answer is smaller: a direct write therefore never starts
// a frame or an answer, so the bytes in front of the send cursor cannot
// change under a write OpenSSL may ask us to repeat (answers are queued only
// between frames).
static_assert(kTlsDirectBytes > kHeaderBytes + kNoticeBytes + kMaxTableBytes);
static_assert(kTlsDirectBytes > kHeaderBytes + kMaxNackMessage);

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace

void TcpLane::Attach(UniqueFd fd, UniqueSsl ssl, bool kernel_tls, TcpWorker* worker) {
  XFERD_CHECK(!fd_.valid());
  worker_ = worker;
  fd_ = std::move(fd);
  ssl_ = std::move(ssl);
  kernel_tls_ = kernel_tls;
  if (ssl_ != nullptr && tls_stage_.empty()) tls_stage_.resize(kTlsRecordBytes);
}

bool TcpLane::input_buffered() const { return ssl_ != nullptr && SSL_has_pending(ssl_.get()) == 1; }

ssize_t TcpLane::TlsResult(int rc, size_t n) {
  if (rc == 1) return static_cast<ssize_t>(n);
  switch (SSL_get_error(ssl_.get(), rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN:
      return 0;
    case SSL_ERROR_SYSCALL:
      if (errno == 0) return 0;
      io_error_ = std::strerror(errno);
      ERR_clear_error();
      return -1;
    default:
      io_error_ = absl::StrCat("TLS: ", OpenSslError("protocol error"));
      errno = EPROTO;
      return -1;
  }
}

std::string TcpLane::IoError(int err) const {
  return io_error_.empty() ? std::string(std::strerror(err)) : io_error_;
}

// Under kernel TLS receive a record that is not data (an alert, a KeyUpdate)
// fails the read with EIO before any of it is copied out, and one that
// fails authentication with EBADMSG: the lane breaks, saying which.
std::string TcpLane::RecvError(int err) const {
  if (kernel_tls_ && err == EIO) return DescribeNonDataRecord(fd_.get());
  if (kernel_tls_ && err == EBADMSG) return "a TLS record failed authentication (kernel TLS)";
  return IoError(err);
}

ssize_t TcpLane::RecvSome(void* buf, size_t len) {
  if (ssl_ == nullptr) return ::recv(fd_.get(), buf, len, 0);
  size_t n = 0;
  const int rc = SSL_read_ex(ssl_.get(), buf, len, &n);  // before n is read
  return TlsResult(rc, n);
}

// TLS has no readv: records are decrypted into each piece in turn, until the
// pieces are full or OpenSSL needs more from the socket.
ssize_t TcpLane::ReadVec(iovec* iov, int count) {
  if (ssl_ == nullptr) return ::readv(fd_.get(), iov, count);
  size_t total = 0;
  for (int i = 0; i < count; ++i) {
    size_t filled = 0;
    while (filled < iov[i].iov_len) {
      const ssize_t n =
          RecvSome(static_cast<std::byte*>(iov[i].iov_base) + filled, iov[i].iov_len - filled);
      if (n <= 0) return total > 0 ? static_cast<ssize_t>(total) : n;
      filled += static_cast<size_t>(n);
      total += static_cast<size_t>(n);
    }
  }
  return static_cast<ssize_t>(total);
}

absl::Status TcpLane::Flush() {
  if (!fd_.valid() || !error_.ok()) return error_;
  iovec iov[kMaxIov];
  for (;;) {
    ssize_t n = 0;
    if (ssl_ != nullptr && tls_stage_sent_ < tls_stage_len_) {
      // A gathered record goes out before anything else: its bytes already
      // left the send queue.
      n = WriteTls(tls_stage_.data() + tls_stage_sent_, tls_stage_len_ - tls_stage_sent_);
      if (n > 0) {
        tls_stage_sent_ += static_cast<size_t>(n);
        continue;
      }
    } else {
      Guarded guarded;
      const size_t count = BuildIov(iov, kMaxIov, &guarded);
      if (count == 0) {
        wants_writable_ = false;
        return absl::OkStatus();
      }
      n = Send(iov, count, guarded);
      if (n < 0 && errno == EFAULT) n = OnSendFault(iov, count, guarded);
      if (n >= 0) {
        Consume(static_cast<size_t>(n));
        continue;
      }
    }
    if (WouldBlock(errno)) {
      wants_writable_ = true;
      return absl::OkStatus();
    }
    return Fail(absl::UnavailableError(
        absl::StrCat("lane to ", link_.peer().node_id, " failed: send: ", IoError(errno))));
  }
}

// > 0 bytes written, or -1 with errno (EAGAIN; EPIPE if the peer closed).
ssize_t TcpLane::WriteTls(const void* data, size_t len) {
  size_t written = 0;
  const int rc = SSL_write_ex(ssl_.get(), data, len, &written);  // before written is read
  const ssize_t n = TlsResult(rc, written);
  if (n == 0) errno = EPIPE;
  return n == 0 ? -1 : n;
}

ssize_t TcpLane::Send(iovec* iov, size_t count, Guarded guarded) {
  return ssl_ == nullptr ? SendPlain(iov, count) : SendTls(iov, count, guarded);
}

ssize_t TcpLane::SendPlain(iovec* iov, size_t count) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  return ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
}

// One record: straight from a big piece of region memory (returns the bytes
// written, for the caller to consume), or gathered from small pieces into
// tls_stage_, whose bytes leave the send queue at once (returns 0: Flush
// writes the rest of the stage before anything else). Memory that can
// fault OpenSSL must never read (it would die of SIGBUS there): a guarded
// piece is always gathered, by a guarded copy (short at a page that is
// gone, -1 with EFAULT when the first one is).
ssize_t TcpLane::SendTls(const iovec* iov, size_t count, Guarded guarded) {
  // The piece in front goes direct only if it is not guarded memory: a
  // write OpenSSL asks to repeat is then repeated direct, with its bytes.
  if (!guarded.first && iov[0].iov_len >= kTlsDirectBytes) {
    const size_t len = std::min(iov[0].iov_len, kTlsRecordBytes);
    SumForTls(len);
    return WriteTls(iov[0].iov_base, len);
  }
  size_t len = 0;
  if (guarded.any) {
    iovec from[kMaxIov];
    size_t pieces = 0;
    for (size_t i = 0; i < count && len < kTlsRecordBytes; ++i) {
      from[pieces] = {iov[i].iov_base, std::min(iov[i].iov_len, kTlsRecordBytes - len)};
      len += from[pieces++].iov_len;
    }
    const iovec to{tls_stage_.data(), len};
    const ssize_t copied = memory::GuardedCopy(&to, 1, from, pieces);
    if (copied <= 0) {
      if (copied == 0) errno = EFAULT;
      return -1;
    }
    len = static_cast<size_t>(copied);
  } else {
    for (size_t i = 0; i < count && len < kTlsRecordBytes; ++i) {
      const size_t take = std::min(iov[i].iov_len, kTlsRecordBytes - len);
      std::memcpy(tls_stage_.data() + len, iov[i].iov_base, take);
      len += take;
    }
  }
  Consume(len);
  return WriteStage(len);
}

ssize_t TcpLane::WriteStage(size_t len) {
  tls_stage_len_ = len;
  tls_stage_sent_ = 0;
  const ssize_t n = WriteTls(tls_stage_.data(), len);
  if (n < 0) return WouldBlock(errno) ? 0 : n;  // the stage waits for EPOLLOUT
  tls_stage_sent_ = static_cast<size_t>(n);
  return 0;
}

}  // namespace xferd::transport::tcp

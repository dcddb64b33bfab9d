// Verified transfers over verbs (docs/integrity.md): the receiving CPU never
// sees an RDMA WRITE's data, nor the source's an RDMA READ's, so once every
// op of such a transfer completed its daemon asks the peer for its side's
// checksums (ChecksumBlocks, in chunks) and compares them with its own. A
// write sends its source checksums and its landing notice with the request,
// and the peer raises the landed event only if no block differs.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/engine/transfer.h"
#include "daemon/memory/region.h"

namespace xferd::engine {

// Checks transfer `t` (verified, every op completed) at its peer, records
// the blocks that differ, and ends it (Transfer::FinishVerified), unless it
// already ended; a peer that cannot answer fails it with that error. Blocks
// on the peer's answers: the control executor only.
void VerifyAtPeer(PeerRpc& rpc, const NodeIdentity& self, Transfer& t);

// The callee's side, its caller and region checked: the checksums of
// `query`'s blocks of `region`, packed; the landing raised as the query
// asks (`source`: the writer's node id). INVALID_ARGUMENT / OUT_OF_RANGE
// for malformed arrays or blocks outside the region, the region's lost
// status if its memory went. Any thread.
absl::StatusOr<std::string> ChecksumForPeer(const std::shared_ptr<memory::Region>& region,
                                            const ChecksumQuery& query, const std::string& source);

}  // namespace xferd::engine

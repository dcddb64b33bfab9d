// The cluster directory's key layout and record encoding (protobuf JSON of
// xferd.v1.DirectoryNode / DirectoryRegion, readable with `etcdctl get`):
//   <prefix>nodes/<node_id>             one per live daemon
//   <prefix>regions/<node_id>/<region>  one per registered region
// Every key a daemon writes is under its lease.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "xferd/v1/directory.pb.h"

namespace xferd::cluster {

// "<prefix>nodes/" and "<prefix>nodes/<node_id>".
std::string NodesPrefix(absl::string_view prefix);
std::string NodeKey(absl::string_view prefix, absl::string_view node_id);
// "<prefix>regions/", "<prefix>regions/<node_id>/", ".../<region>".
std::string RegionsPrefix(absl::string_view prefix);
std::string NodeRegionsPrefix(absl::string_view prefix, absl::string_view node_id);
std::string RegionKey(absl::string_view prefix, absl::string_view node_id,
                      absl::string_view region);
// The end of the key range [p, RangeEnd(p)) of every key starting with p.
std::string RangeEnd(absl::string_view p);

// A node id must be one key segment. INVALID_ARGUMENT (naming node_id) if it
// is empty or holds '/'.
absl::Status CheckNodeId(absl::string_view node_id);

std::string Encode(const google::protobuf::Message& record);
// INVALID_ARGUMENT naming `key` if the value is not such a record (a key
// someone else wrote under the prefix).
absl::StatusOr<v1::DirectoryNode> DecodeNode(absl::string_view key, absl::string_view value);
absl::StatusOr<v1::DirectoryRegion> DecodeRegion(absl::string_view key, absl::string_view value);

}  // namespace xferd::cluster

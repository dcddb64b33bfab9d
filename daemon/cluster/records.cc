#include "daemon/cluster/records.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"

namespace xferd::cluster {
namespace {

template <typename Record>
absl::StatusOr<Record> Decode(absl::string_view key, absl::string_view value, const char* what) {
  Record record;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;  // records of a newer xferd stay readable
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(value), &record, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd key ", key, " does not hold a ", what, " record: ", status.ToString()));
  }
  return record;
}

}  // namespace

std::string NodesPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "nodes/"); }

std::string NodeKey(absl::string_view prefix, absl::string_view node_id) {
  return absl::StrCat(prefix, "nodes/", node_id);
}

std::string RegionsPrefix(absl::string_view prefix) { return absl::StrCat(prefix, "regions/"); }

std::string NodeRegionsPrefix(absl::string_view prefix, absl::string_view node_id) {
  return absl::StrCat(prefix, "regions/", node_id, "/");
}

std::string RegionKey(absl::string_view prefix, absl::string_view node_id,
                      absl::string_view region) {
  return absl::StrCat(prefix, "regions/", node_id, "/", region);
}

std::string RangeEnd(absl::string_view p) {
  // etcd's prefix convention: the prefix with its last byte incremented.
  // Prefixes here end in '/', which never overflows.
  std::string end(p);
  end.back() = static_cast<char>(end.back() + 1);
  return end;
}

absl::Status CheckNodeId(absl::string_view node_id) {
  if (node_id.empty() || node_id.find('/') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_id '", node_id,
                     "' cannot name a daemon in the cluster directory: it must be non-empty and "
                     "hold no '/' (set node_id)"));
  }
  return absl::OkStatus();
}

std::string Encode(const google::protobuf::Message& record) {
  std::string json;
  // Only fails on Any fields of unknown types, which the records have none of.
  (void)google::protobuf::util::MessageToJsonString(record, &json);
  return json;
}

absl::StatusOr<v1::DirectoryNode> DecodeNode(absl::string_view key, absl::string_view value) {
  return Decode<v1::DirectoryNode>(key, value, "DirectoryNode");
}

absl::StatusOr<v1::DirectoryRegion> DecodeRegion(absl::string_view key, absl::string_view value) {
  return Decode<v1::DirectoryRegion>(key, value, "DirectoryRegion");
}

}  // namespace xferd::cluster

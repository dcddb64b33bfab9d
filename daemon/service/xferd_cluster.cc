// XferdServiceImpl's cluster-directory calls: ListNodes, FindRegion and
// NodeInfo.directory. Answers come from the directory's cache; a FindRegion
// the cache cannot answer reads etcd on the directory's lookup thread, and
// its reply goes out from there.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/cluster/directory.h"
#include "daemon/service/status_convert.h"
#include "daemon/service/xferd_service.h"

namespace xferd::service {
namespace {

absl::Status NoDirectory() {
  return absl::FailedPreconditionError(
      "this daemon has no cluster directory: add a [cluster] section with the etcd endpoints "
      "(cluster.etcd) to its config");
}

// Whether a client of `tenant` sees the directory's `region`: its tenant's,
// shared with it, or any for an admin tenant, as for a region of this node.
bool Visible(const engine::Tenant& tenant, const v1::DirectoryRegion& region) {
  return tenant.MayUse(region.tenant().empty() ? kDefaultTenant : region.tenant(),
                       region.shared_with());
}

}  // namespace

void XferdServiceImpl::SetDirectory(cluster::Directory* directory) {
  directory_.store(directory, std::memory_order_release);
}

void FillDirectoryStatus(const cluster::Directory* directory, v1::DirectoryStatus* out) {
  if (directory == nullptr) return;
  const cluster::DirectoryState state = directory->state();
  out->set_enabled(true);
  out->set_connected(state.connected);
  out->set_etcd(absl::StrJoin(directory->config().etcd, ","));
  out->set_prefix(directory->config().prefix);
  out->set_error(state.error);
  out->set_revision(state.revision);
  out->set_watching(state.watching);
  out->set_relists(state.relists);
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListNodes(grpc::CallbackServerContext* context,
                                                      const v1::ListNodesRequest*,
                                                      v1::ListNodesResponse* response) {
  cluster::Directory* directory = directory_.load(std::memory_order_acquire);
  if (directory == nullptr) return Reply(context, NoDirectory());
  // From the cache: it answers while etcd is out of reach, saying so.
  const char* others = directory->current() ? "live" : "cached";
  cluster::DirectoryListing listing = directory->Listing();
  const engine::Tenant& tenant = Caller(*context);
  response->set_revision(listing.revision);
  for (cluster::DirectoryEntry& entry : listing.nodes) {
    v1::ClusterNode* node = response->add_nodes();
    node->set_state(entry.node.node_id() == directory->node_id() ? "self" : others);
    *node->mutable_node() = std::move(entry.node);
    for (v1::DirectoryRegion& region : entry.regions) {
      if (Visible(tenant, region)) *node->add_regions() = std::move(region);
    }
  }
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* XferdServiceImpl::FindRegion(grpc::CallbackServerContext* context,
                                                       const v1::FindRegionRequest* request,
                                                       v1::FindRegionResponse* response) {
  cluster::Directory* directory = directory_.load(std::memory_order_acquire);
  if (directory == nullptr) return Reply(context, NoDirectory());
  if (request->name().empty()) {
    return Reply(context, absl::InvalidArgumentError("FindRegion needs a region name"));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Tenants live as long as the engine: the reply may come from another thread.
  const engine::Tenant* tenant = &Caller(*context);
  directory->FindRegionAsync(request->name(), [reactor, response, tenant, name = request->name(),
                                               prefix = directory->config().prefix](
                                                  cluster::Directory::FoundRegions found) {
    absl::Status status = found.status();
    if (found.ok()) {
      // Another tenant's region is not found: its name says nothing.
      for (v1::DirectoryRegion& region : *found) {
        if (Visible(*tenant, region)) *response->add_regions() = std::move(region);
      }
      if (response->regions_size() == 0) {
        status = absl::NotFoundError(absl::StrCat("no live daemon under cluster prefix ", prefix,
                                                  " publishes a region named '", name, "'"));
      }
    }
    reactor->Finish(ToGrpc(status));
  });
  return reactor;
}

}  // namespace xferd::service

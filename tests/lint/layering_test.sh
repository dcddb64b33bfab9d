#!/usr/bin/env bash
# Shows that Bazel enforces xferd's layering (daemon/BUILD, client/cpp/BUILD):
# in a scratch copy of the workspace it adds probe targets, each depending on
# something its layer must not use (memory on transport, transport on the
# engine, the engine on the service or on a concrete transport, a client on
# the daemon, ...), and expects analysis to refuse every one of them with a
# visibility error; probes that follow the layering must pass, so a refusal
# for any other reason is not mistaken for the rule. Analysis only
# (--nobuild), in a throw-away output base and --batch mode: nothing is
# compiled, no Bazel server outlives it, the checkout is not touched.
#
# Usage: tests/lint/layering_test.sh [WORKSPACE]   (default: this checkout)
# Prints one line per probe; exits non-zero if any probe got the wrong answer.
set -euo pipefail
src=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd -P)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/xferd-layering.XXXXXX")
cleanup() { chmod -R u+w "$scratch" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT

# probe label | what it depends on. Each must be refused as "not visible".
refused=(
  "//daemon/common:probe_common_on_memory|//daemon/memory:memory"
  "//daemon/memory:probe_memory_on_transport|//daemon/transport:transport"
  "//daemon/transport:probe_transport_on_engine|//daemon/engine:engine"
  "//daemon/transport/tcp:probe_tcp_on_engine|//daemon/engine:engine"
  "//daemon/engine:probe_engine_on_service|//daemon/service:service"
  "//daemon/engine:probe_engine_on_tcp|//daemon/transport/tcp:tcp"
  "//daemon/metrics:probe_metrics_on_service|//daemon/service:service"
  "//daemon/engine:probe_engine_on_cluster|//daemon/cluster:cluster"
  "//daemon/metrics:probe_metrics_on_cluster|//daemon/cluster:cluster"
  "//daemon/cluster:probe_cluster_on_service|//daemon/service:service"
  "//daemon/engine:probe_engine_on_etcd|//third_party/etcd:etcd_cc_grpc"
  "//daemon/service:probe_service_on_etcd|//third_party/etcd:etcd_cc_grpc"
  "//client/cpp:probe_client_on_cluster|//daemon/cluster:cluster"
  "//daemon/service:probe_service_on_factory|//daemon/transport:transport_factory"
  "//daemon/service:probe_service_on_verbs|//daemon/transport/verbs:verbs"
  "//daemon/service:probe_service_on_verbs_device|//daemon/transport/verbs:device"
  "//daemon/service:probe_service_on_verbs_checks|//daemon/transport/verbs:endpoint_check"
  "//daemon/service:probe_service_on_tcp|//daemon/transport/tcp:tcp"
  "//daemon/engine:probe_engine_on_verbs|//daemon/transport/verbs:verbs"
  "//client/cpp:probe_client_on_common|//daemon/common:common"
  "//client/cpp:probe_client_on_engine|//daemon/engine:engine"
)
# Each must be analysed without error.
allowed=(
  "//daemon/transport/tcp:probe_tcp_on_interface|//daemon/transport:transport"
  "//daemon/engine:probe_engine_on_transport|//daemon/transport:transport"
  "//daemon/service:probe_service_on_engine|//daemon/engine:engine"
  "//daemon/service:probe_service_on_transport_types|//daemon/transport:transport_types"
  "//daemon/service:probe_service_on_cluster|//daemon/cluster:cluster"
  "//daemon/cluster:probe_cluster_on_engine|//daemon/engine:engine"
  "//client/cpp:probe_client_on_base|//daemon/base:base"
)

mkdir "$scratch/ws"
tar -C "$src" --exclude='./bazel-*' --exclude=./.git -cf - . | tar -C "$scratch/ws" -xf -
targets=()
for entry in "${refused[@]}" "${allowed[@]}"; do
  probe=${entry%%|*} dep=${entry#*|}
  package=${probe%%:*} package=${package#//}
  printf '\ncc_library(\n    name = "%s",\n    deps = ["%s"],\n)\n' "${probe#*:}" "$dep" \
    >>"$scratch/ws/$package/BUILD"
  targets+=("$probe")
done

log=$scratch/analysis.log
(cd "$scratch/ws" && bazel --batch --output_base="$scratch/out" build --nobuild --keep_going \
  --noshow_progress "${targets[@]}") >"$log" 2>&1 || true

failed=0
for entry in "${refused[@]}"; do
  probe=${entry%%|*} dep=${entry#*|}
  if grep -qF "target '$dep' is not visible from target '$probe'" "$log"; then
    echo "ok: refused  $probe -> $dep"
  else
    echo "FAIL: Bazel accepted $probe -> $dep (a layering break)"
    failed=1
  fi
done
for entry in "${allowed[@]}"; do
  probe=${entry%%|*} dep=${entry#*|}
  if grep -E '^ERROR' "$log" | grep -qF "$probe"; then
    echo "FAIL: Bazel refused $probe -> $dep, which the layering allows"
    failed=1
  else
    echo "ok: allowed  $probe -> $dep"
  fi
done
if ! grep -qE '^INFO: Analyzed [0-9]+ targets' "$log"; then
  echo "FAIL: Bazel did not analyse the probes"
  failed=1
fi
if [ "$failed" != 0 ]; then
  echo "--- bazel output ---"
  cat "$log"
  echo "layering_test: FAILED"
  exit 1
fi
echo "layering_test: Bazel refuses all ${#refused[@]} layering breaks and allows ${#allowed[@]} legal dependencies"

#!/usr/bin/python3
"""Probes for xferd in a container: readiness, liveness and a preStop drain.

Installed in the image as /usr/local/bin/xferd-probe; the Kubernetes
DaemonSet (deploy/kubernetes/base) runs it as its exec probes and preStop
hook. It talks to the daemon over its unix socket, which has no TLS, so it
works whether or not the daemon's TCP address requires mutual TLS (the
kubelet's own gRPC probe cannot present a client certificate).

  xferd-probe ready   exit 0 iff grpc.health.v1 says SERVING
  xferd-probe live    exit 0 iff the health service answers at all
                      (NOT_SERVING, while draining, is alive)
  xferd-probe drain   SIGTERM the daemon, then wait until it refuses new work
                      and has no transfer in flight, or has stopped serving
"""

import argparse
import os
import signal
import sys
import time
from typing import Any, Callable, Tuple

import grpc  # Debian's python3-grpcio
import xferd  # the daemon's Python client, installed with it
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DEFAULT_TARGET = "unix:/run/xferd/xferd.sock"
# grpc.health.v1.HealthCheckResponse.ServingStatus.
STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1


def _health_messages() -> Tuple[Any, Any]:
    """The request and response classes of grpc.health.v1, built from their
    descriptors: Debian packages no grpcio-health-checking."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="grpc/health/v1/health.proto", package="grpc.health.v1", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    request = proto.message_type.add(name="HealthCheckRequest")
    request.field.add(name="service", number=1, type=field.TYPE_STRING,
                      label=field.LABEL_OPTIONAL)
    response = proto.message_type.add(name="HealthCheckResponse")
    status = response.enum_type.add(name="ServingStatus")
    for number, name in STATUS_NAMES.items():
        status.value.add(name=name, number=number)
    response.field.add(name="status", number=1, type=field.TYPE_ENUM, label=field.LABEL_OPTIONAL,
                       type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    factory = message_factory.MessageFactory(pool)
    return (factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")),
            factory.GetPrototype(pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")))


class Daemon:
    """Channels to the daemon, opened before anything is asked of it; each
    call is bounded by `timeout` seconds."""

    def __init__(self, target: str, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        request, response = _health_messages()
        self._request = request(service="")
        self._check: Callable[..., Any] = grpc.insecure_channel(target).unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=request.SerializeToString,
            response_deserializer=response.FromString)
        self._client = xferd.Client(target)

    def status(self) -> int:
        """The serving status; raises grpc.RpcError if the daemon does not answer."""
        return int(self._check(self._request, timeout=self.timeout).status)

    def in_flight(self) -> int:
        """Transfers queued or running; raises xferd.XferdError if it does not answer."""
        return int(self._client.stats().transfers_in_flight)


def probe(daemon: Daemon, serving_only: bool) -> int:
    try:
        status = daemon.status()
    except grpc.RpcError as e:
        print(f"xferd at {daemon.target} does not answer: {e}")
        return 1
    print(f"xferd at {daemon.target}: {STATUS_NAMES.get(status, str(status))}")
    return 0 if status == SERVING or not serving_only else 1


def drain(daemon: Daemon, pid: int, wait: float) -> int:
    """SIGTERM starts the daemon's own drain (engine.drain_timeout); this
    returns once it is done, so the kubelet's SIGTERM after the hook finds the
    daemon leaving. The daemon exits soon after: the exit is immediate
    (os._exit) so that the hook is gone before the container is."""
    try:
        # Both connections are up before the signal, so that nothing slow
        # stands between the drain's end and this hook's.
        before = daemon.in_flight()
        daemon.status()
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print(f"xferd (pid {pid}) has already exited")
        return 0
    except (grpc.RpcError, xferd.XferdError) as e:
        print(f"xferd at {daemon.target} does not answer ({e}); nothing to drain")
        return 0
    print(f"sent SIGTERM to xferd (pid {pid}) with {before} transfers in flight; "
          "waiting for its drain", flush=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if daemon.status() == SERVING:  # the signal is not handled yet
                time.sleep(0.02)
                continue
            left = daemon.in_flight()
        except (grpc.RpcError, xferd.XferdError):
            print("xferd has stopped serving: drained", flush=True)
            return 0
        if left == 0:
            print("xferd refuses new transfers and has none in flight: drained", flush=True)
            return 0
        time.sleep(0.02)
    print(f"xferd has not drained within {wait:g} s; it fails what is left at "
          "engine.drain_timeout", flush=True)
    return 1


def main(argv: "list[str]") -> int:
    parser = argparse.ArgumentParser(prog="xferd-probe",
                                     description="Readiness, liveness and preStop drain of xferd.")
    parser.add_argument("command", choices=["ready", "live", "drain"])
    parser.add_argument("--target", default=os.environ.get("XFERD_TARGET", DEFAULT_TARGET),
                        help=f"the daemon's address (default $XFERD_TARGET or {DEFAULT_TARGET})")
    parser.add_argument("--timeout", type=float, default=3.0,
                        help="seconds each call to the daemon may take")
    parser.add_argument("--pid", type=int, default=1,
                        help="drain: the daemon's process id (1: the container's entrypoint)")
    parser.add_argument("--wait", type=float, default=20.0,
                        help="drain: seconds to wait at most (less than the pod's "
                        "terminationGracePeriodSeconds)")
    args = parser.parse_args(argv)
    daemon = Daemon(args.target, args.timeout)
    if args.command == "drain":
        return drain(daemon, args.pid, args.wait)
    return probe(daemon, serving_only=args.command == "ready")


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: see drain()

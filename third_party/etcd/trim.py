#!/usr/bin/python3
"""Copies etcd's v3 API .proto files from Debian's golang-etcd-server-dev into
this directory, trimmed only of what protoc cannot resolve here.

Removed: the gogoproto import and its options (Go code-generation hints), and
the google.api.http annotations with their import (grpc-gateway's REST
mapping). Nothing else changes: messages, fields, numbers and services are
etcd's own. Run it again after a Debian upgrade of etcd and commit the diff:

    third_party/etcd/trim.py [/usr/share/gocode/src/go.etcd.io/etcd]
"""
import pathlib
import re
import sys

FILES = [
    "etcdserver/etcdserverpb/rpc.proto",
    "mvcc/mvccpb/kv.proto",
    "auth/authpb/auth.proto",
]
HEADER = ("// Vendored from etcd {version} (Debian golang-etcd-server-dev), {path};\n"
          "// trimmed by third_party/etcd/trim.py of gogoproto and google.api options.\n")


def trim(text: str) -> str:
    text = re.sub(r'^import "(gogoproto/gogo|google/api/annotations)\.proto";\n', "", text,
                  flags=re.M)
    text = re.sub(r"^// for grpc-gateway\n", "", text, flags=re.M)
    text = re.sub(r"^option \(gogoproto\.[a-z_]+\) = \w+;\n", "", text, flags=re.M)
    # rpc X(...) returns (...) { option (google.api.http) = { ... }; }, with
    # nested additional_bindings { ... } at most one level deep.
    text = re.sub(r"\s*option \(google\.api\.http\) = \{(?:[^{}]|\{[^{}]*\})*\};", "", text)
    # Field options: [(gogoproto.nullable) = false, ...]
    text = re.sub(r"\s*\[\(gogoproto\.[^\]]*\]", "", text)
    if "gogoproto" in text or "google.api" in text:
        raise SystemExit("trim.py: an option it does not know is left; extend trim()")
    return text


def main() -> None:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                       "/usr/share/gocode/src/go.etcd.io/etcd")
    version = re.search(r"\bVersion\s*=\s*\"([^\"]+)\"",
                        (src / "version/version.go").read_text()).group(1)
    here = pathlib.Path(__file__).resolve().parent
    for rel in FILES:
        out = here / "etcd" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(HEADER.format(version=version, path=rel) + trim((src / rel).read_text()))


if __name__ == "__main__":
    main()

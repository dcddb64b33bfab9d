"""C++ and Python gRPC code generation with Debian's protoc and plugins.

Native proto_library/cc_proto_library would pull @com_google_protobuf (a
download); these macros run /usr/bin/protoc (through @system_protoc) in a
genrule. The calling package is the import root: for //proto,
proto/xferd/v1/foo.proto is imported as "xferd/v1/foo.proto", generates
"xferd/v1/foo.pb.h" in C++ and the module xferd.v1.foo_pb2 in Python; for
//third_party/etcd (etcd's vendored API), "etcd/mvcc/mvccpb/kv.proto".
"""

_PROTOC = "@system_protoc//:protoc"
_GRPC_CPP = "@system_protoc//:grpc_cpp_plugin"
_GRPC_PY = "@system_protoc//:grpc_python_plugin"
_PROTO_ROOT = "proto"

def _stem(import_path):
    if not import_path.endswith(".proto"):
        fail("expected a .proto file: " + import_path)
    return import_path[:-len(".proto")]

def cc_grpc_system_library(name, srcs, grpc = True, deps = [], visibility = None):
    """cc_library with <x>.pb.{h,cc} (and <x>.grpc.pb.{h,cc}) for each src.

    The calling package is the import root; srcs are import paths below it,
    such as "xferd/v1/foo.proto" in //proto.
    """
    root = native.package_name()
    hdrs = []
    cc_srcs = []
    for s in srcs:
        hdrs.append(_stem(s) + ".pb.h")
        cc_srcs.append(_stem(s) + ".pb.cc")
        if grpc:
            hdrs.append(_stem(s) + ".grpc.pb.h")
            cc_srcs.append(_stem(s) + ".grpc.pb.cc")
    cmd = [
        "$(location %s)" % _PROTOC,
        "--proto_path=" + root,
        "--cpp_out=$(GENDIR)/" + root,
    ]
    tools = [_PROTOC]
    if grpc:
        cmd += [
            "--grpc_out=$(GENDIR)/" + root,
            "--plugin=protoc-gen-grpc=$(location %s)" % _GRPC_CPP,
        ]
        tools.append(_GRPC_CPP)
    native.genrule(
        name = name + "_codegen",
        srcs = srcs,
        outs = hdrs + cc_srcs,
        tools = tools,
        cmd = " ".join(cmd + ["$(SRCS)"]),
        message = "protoc (C++) %s" % name,
    )
    native.cc_library(
        name = name,
        srcs = cc_srcs,
        hdrs = hdrs,
        # -isystem bazel-bin/<root>: "xferd/v1/foo.pb.h" resolves, and warnings
        # in generated code stay out of our builds.
        includes = ["."],
        deps = deps + ["//third_party:grpc++"],
        visibility = visibility,
    )

def py_grpc_system_srcs(name, srcs, visibility = None):
    """Genrule writing <x>_pb2.py and <x>_pb2_grpc.py into the calling package.

    srcs are import paths ("xferd/v1/foo.proto") of files exported by //proto.
    Output paths mirror the import paths, so calling this from client/python
    places xferd/v1/foo_pb2.py inside the client's `xferd` Python package.
    """
    outs = []
    for s in srcs:
        outs += [_stem(s) + "_pb2.py", _stem(s) + "_pb2_grpc.py"]
    out_dir = "$(GENDIR)/" + native.package_name()
    native.genrule(
        name = name,
        srcs = ["//%s:%s" % (_PROTO_ROOT, s) for s in srcs],
        outs = outs,
        tools = [_PROTOC, _GRPC_PY],
        cmd = " ".join([
            "$(location %s)" % _PROTOC,
            "--proto_path=" + _PROTO_ROOT,
            "--python_out=" + out_dir,
            "--grpc_python_out=" + out_dir,
            "--plugin=protoc-gen-grpc_python=$(location %s)" % _GRPC_PY,
            "$(SRCS)",
        ]),
        message = "protoc (Python) %s" % name,
        visibility = visibility,
    )

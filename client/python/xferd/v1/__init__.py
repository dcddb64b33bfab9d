"""Generated gRPC stubs of the xferd.v1 protos (common, xferd, peer).

protoc writes *_pb2.py and *_pb2_grpc.py next to this file at build time
(//client/python:xferd_v1_stubs); they are not checked in.
"""

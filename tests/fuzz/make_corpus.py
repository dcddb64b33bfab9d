#!/usr/bin/python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (run from
anywhere; needs protoc). Seeds are small, valid messages and near misses, so
fuzzing starts from the formats' real shapes. Re-run after a format change;
inputs that libFuzzer found and that crashed are added by hand as crash-*.
"""
import pathlib
import struct
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/fuzz/corpus"

MAGIC = 0x32524658  # "XFR2"
HELLO, HELLO_ACK, WRITE, ACK, NACK, READ_REQ, READ_RESP, MISMATCH, SUMS = range(1, 10)
NOTICE_FLAG, VERDICT_FLAG, CHECKSUMS_FLAG, SUMS_LATER_FLAG = 1, 2, 4, 8
NOTICE_MAGIC = 0x4E465258  # "XRFN"


def header(ftype, flags=0, word=0, length=0, seq=0, blocks=0, landed=0):
    return struct.pack("<IBBHIIQQ", MAGIC, ftype, flags, blocks, word, length, landed, seq)


def crc64(data):
    """CRC-64/XZ, what a verified frame's checksum table holds."""
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xC96C5795D7870F42 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def notice(transfer_id, offset, length, blocks=1, nbytes=None):
    return struct.pack("<QQQQQ", transfer_id, offset, length, blocks,
                       length if nbytes is None else nbytes)


def table(*entries):
    return b"".join(struct.pack("<QI", offset, length) for offset, length in entries)


def write_frame(region, seq, entries, payload, flags=0, note=b""):
    length = sum(n for _, n in entries)
    return (header(WRITE, flags, region, length, seq, len(entries)) + note + table(*entries) +
            payload)


def read_req(region, seq, entries):
    length = sum(n for _, n in entries)
    return header(READ_REQ, 0, region, length, seq, len(entries)) + table(*entries)


def write(name, data):
    path = CORPUS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def encode(message, text, proto="xferd/v1/peer.proto"):
    return subprocess.run(
        ["protoc", "-I", str(ROOT / "proto"), f"--encode=xferd.v1.{message}", proto],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def tcp_frame():
    write("tcp_frame_fuzzer/write", header(WRITE, 0, 1, 4096, 1, 1))
    write("tcp_frame_fuzzer/write_notice", header(WRITE, 1, 1, 100, 2, 3) + notice(9, 0, 108))
    write("tcp_frame_fuzzer/read_req", header(READ_REQ, 0, 1, 8192, 3, 64))
    write("tcp_frame_fuzzer/read_resp", header(READ_RESP, 0, 0, 8192, 3))
    write("tcp_frame_fuzzer/hello", header(HELLO, 0, 0, 16) + b"T" * 16)
    write("tcp_frame_fuzzer/hello_ack", header(HELLO_ACK))
    write("tcp_frame_fuzzer/ack", header(ACK, seq=7))
    write("tcp_frame_fuzzer/nack", header(NACK, 0, 11, 5, 3) + b"range")
    write("tcp_frame_fuzzer/write_checksums", header(WRITE, CHECKSUMS_FLAG, 1, 8192, 4, 2))
    write("tcp_frame_fuzzer/read_req_checksums", header(READ_REQ, CHECKSUMS_FLAG, 1, 8192, 5, 2))
    write("tcp_frame_fuzzer/read_resp_checksums",
          header(READ_RESP, CHECKSUMS_FLAG | VERDICT_FLAG, 0, 8192, 5, 2))
    write("tcp_frame_fuzzer/read_resp_sums_later",
          header(READ_RESP, SUMS_LATER_FLAG, 0, 64 * 4096, 7, 64))
    write("tcp_frame_fuzzer/sums", header(SUMS, 0, 0, 0, 7, 64) + bytes(range(256)) * 2)
    write("tcp_frame_fuzzer/mismatch", header(MISMATCH, 0, 3, 0, 6, 2, 0x0123456789ABCDEF))
    write("tcp_frame_fuzzer/bad_magic", b"XFR3" + header(ACK)[4:])
    write("tcp_frame_fuzzer/protocol_1", b"XFR1" + header(ACK)[4:])


def tcp_lane():
    # byte 0: our ops in flight; byte 1: delivery chunk (1 + 16 * n bytes);
    # byte 2: which of our ops are READs (bit i); byte 3: even, raw bytes
    # follow; odd, a script of frames (tcp_peer_script.cc).
    payload = bytes(range(256)) * 2
    w = write_frame(1, 1, [(1000, 256), (3000, 256)], payload)
    wn = write_frame(1, 2, [(0, 64)], payload[:64], 1, notice(5, 0, 3256, 3, 576))
    write("tcp_lane_fuzzer/write_then_notice", b"\x00\xff\x00\x00" + w + wn)
    write("tcp_lane_fuzzer/write_bytewise", b"\x00\x00\x00\x00" + w)
    # Refused writes: a block past the end, read-only region, ACL, unknown
    # region, blocks that do not add up to the frame's length.
    refused = (write_frame(1, 1, [(0, 100), (65436 - 100, 200)], b"x" * 300) +
               write_frame(2, 2, [(0, 16)], b"y" * 16) +
               write_frame(3, 3, [(0, 16)], b"z" * 16) +
               write_frame(99, 4, [(0, 16)], b"w" * 16) +
               header(WRITE, 0, 1, 20, 5, 1) + table((0, 16)) + b"v" * 20)
    write("tcp_lane_fuzzer/refused_writes", b"\x00\x03\x00\x00" + refused)
    # Reads the lane serves (or refuses) from its regions.
    reads = (read_req(1, 1, [(0, 64), (4096, 64)]) + read_req(2, 2, [(0, 16)]) +
             read_req(1, 3, [(65436, 1)]))
    write("tcp_lane_fuzzer/read_requests", b"\x00\x10\x00\x00" + reads)
    # Acknowledgements of our own writes.
    write("tcp_lane_fuzzer/ack_all", b"\x04\x10\x00\x00" + header(ACK, seq=4))
    write("tcp_lane_fuzzer/ack_then_nack",
          b"\x03\x10\x00\x00" + header(ACK, seq=1) + header(NACK, 0, 11, 6, 2) + b"denied" +
          header(ACK, seq=3))
    write("tcp_lane_fuzzer/read_resp_for_a_write",
          b"\x02\x10\x00\x00" + header(READ_RESP, 0, 0, 64, 1) + b"r" * 64)
    write("tcp_lane_fuzzer/out_of_sequence",
          b"\x00\x10\x00\x00" + write_frame(1, 5, [(0, 8)], b"8" * 8))
    # Verified writes: a checksum table after the payload, one that
    # matches it (acknowledged) and one that does not (MISMATCH).
    blocks = [(1000, 256), (3000, 256)]
    sums = b"".join(struct.pack("<Q", crc64(payload[k * 256:(k + 1) * 256])) for k in range(2))
    verified = (header(WRITE, CHECKSUMS_FLAG, 1, 512, 1, 2) + table(*blocks) + payload + sums)
    wrong = (header(WRITE, CHECKSUMS_FLAG, 1, 512, 2, 2) + table(*blocks) + payload + sums[8:] +
             sums[:8])
    write("tcp_lane_fuzzer/verified_writes", b"\x00\x10\x00\x00" + verified + wrong)
    # A MISMATCH for a write of ours that carried no checksums.
    write("tcp_lane_fuzzer/mismatch_unasked",
          b"\x01\x10\x00\x00" + header(MISMATCH, 0, 0, 0, 1, 1, 5))
    write("tcp_lane_fuzzer/hello_on_lane",
          b"\x01\x10\x00\x00" + header(HELLO, 0, 0, 16) + b"T" * 16)
    # Scripts (command byte % 6: 0 READ_RESP, 1 ACK, 2 NACK, 3 READ_REQ,
    # 4 WRITE, 5 raw); fields right unless the input says otherwise.
    rr, ack, nack, rreq, wr = 0, 1, 2, 3, 4
    ok = 0  # "right" for a sequence number or a length
    # Our ops R W R W W R W R (0xa5), answered in order, right.
    answers = bytes([rr, ok, ok, ack, ok, 0, rr, ok, ok, ack, ok, 1, rr, ok, ok, ack, ok, 0,
                     rr, ok, ok])
    write("tcp_lane_fuzzer/script_reads_answered", b"\x08\x10\xa5\x01" + answers)
    write("tcp_lane_fuzzer/script_read_resp_short", b"\x02\x10\x03\x01" +
          bytes([rr, ok, 250, 50, 0, nack, ok, 5, 12]))
    write("tcp_lane_fuzzer/script_read_resp_wrong_seq", b"\x03\x10\x07\x01" +
          bytes([rr, 230]))

    def req(kind, region, blocks, total_ok=True):
        out = [kind, region, len(blocks) - 1]
        for offset, length in blocks:
            out += [0, offset & 0xff, offset >> 8, length & 0xff, length >> 8]
        return bytes(out + ([0] if total_ok else [245, 0x10, 0x00]) + [ok])
    # READ_REQs against each region (1 writable, 2 read-only, 3 other ACL,
    # 4 readable, 99 unknown): in range, at the end, past it, not adding up.
    reqs = (req(rreq, 3, [(0, 64), (16000, 300)]) + req(rreq, 0, [(0, 16)]) +
            req(rreq, 1, [(0, 16)]) + req(rreq, 2, [(0, 16)]) + req(rreq, 4, [(0, 16)]) +
            req(rreq, 3, [(16348 - 1, 1)]) + req(rreq, 3, [(16348 - 1, 2)]) +
            req(rreq, 3, [(0, 16)], total_ok=False))
    write("tcp_lane_fuzzer/script_read_requests", b"\x00\x10\x00\x01" + reqs)
    write("tcp_lane_fuzzer/script_mixed", b"\x04\x01\x05\x01" + req(rreq, 3, [(100, 200)]) +
          bytes([rr, ok, ok, ack, ok, 0]) + req(wr, 0, [(5, 10)]) + bytes([rr, ok, ok]))


def notice_record():
    def rec(region, tid, off, length, blocks=1, payload=None):
        return struct.pack("<IIQQQQQ", NOTICE_MAGIC, region, tid, off, length, blocks,
                           length if payload is None else payload)
    write("notice_record_fuzzer/whole_region", rec(1, 1, 0, 65436))
    write("notice_record_fuzzer/tail", rec(1, 2, 65000, 436))
    write("notice_record_fuzzer/past_end", rec(1, 3, 65000, 437))
    write("notice_record_fuzzer/read_only", rec(2, 4, 0, 16))
    write("notice_record_fuzzer/acl", rec(3, 5, 0, 16))
    write("notice_record_fuzzer/wrap", rec(1, 6, 2**64 - 8, 16))
    write("notice_record_fuzzer/blocks", rec(1, 7, 4096, 60000, 12, 49152))
    write("notice_record_fuzzer/more_bytes_than_span", rec(1, 8, 0, 4096, 2, 8192))
    write("notice_record_fuzzer/more_blocks_than_bytes", rec(1, 9, 0, 4096, 5000, 4096))


QP = """queue_pairs {{ qpn: {qpn} psn: 4660 lid: 0
  gid: "\\000\\000\\000\\000\\000\\000\\000\\000\\000\\000\\377\\377\\177\\000\\000\\001"
  gid_index: 1 mtu: 1024 }}"""


def handshake():
    node = 'node_id: "node-a" incarnation: 12345 address: "127.0.0.1:7300"'
    tcp = ('endpoints { transport: TRANSPORT_KIND_TCP lanes: 2 tcp { host: "127.0.0.1" '
           'port: 7301 session_token: "0123456789abcdef" } }')
    verbs = ("endpoints { transport: TRANSPORT_KIND_VERBS lanes: 2 " +
             QP.format(qpn=17) + " " + QP.format(qpn=18) +
             " notice_ring_addr: 140000000000 notice_ring_rkey: 77 notice_ring_slots: 256"
             " max_rd_atomic: 16 max_dest_rd_atomic: 128 }")
    for kind, endpoints in (("tcp", tcp), ("verbs", verbs)):
        write(f"handshake_fuzzer/request_{kind}",
              encode("HandshakeRequest", f"version: PROTOCOL_VERSION_1 caller {{ {node} }} "
                                         + endpoints))
        write(f"handshake_fuzzer/response_{kind}",
              encode("HandshakeResponse", f"version: PROTOCOL_VERSION_1 callee {{ {node} }} "
                                          + endpoints))
    write("handshake_fuzzer/verbs_missing_qp",
          encode("HandshakeRequest", f"caller {{ {node} }} endpoints {{ transport: "
                 "TRANSPORT_KIND_VERBS lanes: 2 " + QP.format(qpn=17) +
                 " notice_ring_slots: 256 }"))


def resolve():
    gib = 1 << 30
    cases = {
        "one_chunk": (4096, 4096, [5]),
        "two_chunks": (gib + 1, gib, [5, 6]),
        "too_few_rkeys": (3 * gib, gib, [5, 6]),
        "huge_size": (2**64 - 1, gib, []),
    }
    for name, (size, chunk, rkeys) in cases.items():
        text = (f"region_id: 3 size: {size} access {{ remote_write: true }} "
                f"addr: 140000000000 mr_chunk_bytes: {chunk} " +
                " ".join(f"rkeys: {k}" for k in rkeys))
        write(f"resolve_fuzzer/{name}", encode("ResolveRegionResponse", text))
    # Keys per lane (memory windows): two lanes of two chunks, and too few.
    for name, rkeys in {"per_lane": [5, 6, 7, 8], "per_lane_too_few": [5, 6, 7]}.items():
        text = (f"region_id: 3 size: {gib + 1} access {{ remote_write: true }} "
                f"addr: 140000000000 mr_chunk_bytes: {gib} key_lanes: 2 " +
                " ".join(f"rkeys: {k}" for k in rkeys))
        write(f"resolve_fuzzer/{name}", encode("ResolveRegionResponse", text))


def block_plan():
    # Header: source and destination sizes, slice exponent (4 KiB << n), a
    # layout's block length - 1, its block count - 1, flags (1: a write).
    def case(name, text, src=1 << 20, dst=1 << 20, slice_exp=4, layout_block=4095,
             layout_count=255, write_=1):
        head = struct.pack("<QQIHBB", src, dst, slice_exp, layout_block, layout_count, write_)
        write(f"block_plan_fuzzer/{name}", head + encode("Blocks", text, "xferd/v1/xferd.proto"))

    def u64s(*values):
        return "".join("\\%03o" % b for b in struct.pack(f"<{len(values)}Q", *values))

    case("list_permutation", f'list {{ src_offsets: "{u64s(0, 4096, 8192)}" '
         f'dst_offsets: "{u64s(8192, 0, 4096)}" block_length: 4096 }}')
    case("list_lengths_read", f'list {{ src_offsets: "{u64s(0, 100)}" dst_offsets: "{u64s(0, 100)}" '
         f'lengths: "{u64s(100, 5000)}" }}', write_=0)
    case("list_out_of_range", f'list {{ src_offsets: "{u64s(0)}" dst_offsets: "{u64s(1 << 20)}" '
         'block_length: 1 }')
    case("list_overlap", f'list {{ src_offsets: "{u64s(0, 4096)}" dst_offsets: "{u64s(0, 2048)}" '
         'block_length: 4096 }')
    case("list_wrap", f'list {{ src_offsets: "{u64s(0)}" dst_offsets: "{u64s(2**64 - 8)}" '
         'block_length: 16 }')
    case("strided", "strided { runs { src_start: 0 dst_start: 65536 block_length: 4096 "
         "src_stride: 8192 dst_stride: 4096 count: 16 } runs { src_start: 4096 "
         "block_length: 100 src_stride: 8192 dst_stride: 100 count: 3 } }")
    case("strided_merge", "strided { runs { block_length: 4096 src_stride: 4096 "
         "dst_stride: 4096 count: 256 } }", slice_exp=0)
    def u32s(*values):
        return "".join("\\%03o" % b for b in struct.pack(f"<{len(values)}I", *values))

    case("layout", 'layout { src_layout: "src" dst_layout: "dst" '
         f'src_indices: "{u32s(0, 1, 255)}" dst_indices: "{u32s(3, 2, 1)}" }}')
    case("layout_index_past_end", 'layout { src_layout: "src" dst_layout: "dst" '
         f'src_indices: "{u32s(256)}" dst_indices: "{u32s(0)}" }}')


def config():
    write("config_fuzzer/deploy_example", (ROOT / "deploy/xferd.toml").read_bytes())
    write("config_fuzzer/minimal", b'node_id = "a"\n[server]\nlisten = "127.0.0.1:7300"\n')
    write("config_fuzzer/sizes_and_durations",
          b'node_id = "a"\n[transport]\nkind = "tcp"\nverbs_mr_chunk = "1GiB"\n'
          b'[engine]\nslice_size = "1MiB"\nspin = "50us"\n')
    write("config_fuzzer/unknown_key", b'node_id = "a"\nnode_idd = "b"\n')
    write("config_fuzzer/bad_types", b'node_id = 5\n[server]\nlisten = true\n')


def security_input():
    """Selector byte (0 open, 1 create, 2 page token, 3 SAN\\nhost, 4 an
    Authorization header), then the
    string; '@' starts a path in the confined directory."""
    def case(name, selector, text):
        write(f"security_input_fuzzer/{name}", bytes([selector]) + text)
    case("open_inside", 0, b"@/f")
    case("open_nested", 0, b"@/sub/g")
    case("open_dotdot", 0, b"@/sub/../../outside/o")
    case("open_symlink_out", 0, b"@/out")
    case("open_symlink_dir", 0, b"@/outdir/o")
    case("open_symlink_up", 0, b"@/sub/up/f")
    case("open_hard_link", 0, b"@/h1")
    case("open_fifo", 0, b"@/p")
    case("open_nul", 0, b"@/f\0/../../outside/o")
    case("open_proc", 0, b"/proc/self/root@/f")
    case("create_inside", 1, b"@/new")
    case("create_through_symlink", 1, b"@/outdir/new")
    case("create_dotdot", 1, b"@/../outside/new")
    case("token_key", 2, b"\x01regions-key")
    case("token_issued", 2, b"eGZlcmQtcGFnZS0xOnJlZ2lvbnM6YQ==")
    case("san_exact", 3, b"node-b.example\nNODE-B.example")
    case("san_wildcard", 3, b"*.example\nb.example")
    case("san_wildcard_two_labels", 3, b"*.example\na.b.example")
    case("auth_bearer", 4, b"Bearer t0ken")
    case("auth_basic", 4, b"Basic cHJvbWV0aGV1czpzM2NyZXQ=")
    case("auth_basic_wrong", 4, b"basic  cHJvbWV0aGV1czpzM2NyZXU=")


def ring_entry():
    """Submission entries of a local client's ring (daemon/base/ring_layout.h):
    names 1..4 are node-b, src, dst, label; inline slots, then the buffer."""
    def sqe(op=1, form=0, ext=0, flags=0, slice_kib=0, peer=1, src=2, dst=3, label=0,
            a=0, b=0, c=0, timeout_ms=0, priority=0, expected=0):
        return struct.pack("<BBBBHBBIIIIQQQQII", op, form, ext, flags, slice_kib, priority, 0,
                           peer, src, dst, label, 7, a, b, c, timeout_ms, expected)
    def u64(*values):
        return struct.pack(f"<{len(values)}Q", *values)
    write("ring_entry_fuzzer/range", sqe(a=0, b=4096, c=65536, label=4, timeout_ms=1000))
    write("ring_entry_fuzzer/read_notice_detached", sqe(op=2, flags=3, c=4096, slice_kib=64))
    list_inline = u64(0, 8192) + u64(4096, 0)
    write("ring_entry_fuzzer/list_inline", sqe(form=1, ext=1, a=2, b=4096) + list_inline
          + bytes(64 - len(list_inline)))
    write("ring_entry_fuzzer/list_buffer_lengths",
          sqe(form=1, a=2, b=0, c=8) + bytes(8) + u64(0, 100) + u64(500, 0) + u64(50, 60))
    write("ring_entry_fuzzer/strided", sqe(form=2, a=1, c=0) + u64(0, 0, 512, 1024, 1024, 8))
    write("ring_entry_fuzzer/layout", sqe(form=3, src=2, dst=3, a=2)
          + struct.pack("<4I", 0, 1, 1, 0))
    write("ring_entry_fuzzer/buffer_past_end", sqe(form=1, a=3, b=4096, c=2**64 - 8) + u64(1))
    write("ring_entry_fuzzer/unknown_handle", sqe(peer=9, c=4096))
    write("ring_entry_fuzzer/too_many_blocks", sqe(form=1, a=2**40, b=4096))
    # Verified: a write asking for it, a restore of a range (its expected
    # checksums inline) and of a list (after its arrays in the buffer).
    write("ring_entry_fuzzer/verified_write", sqe(flags=4, c=1 << 20, slice_kib=64))
    write("ring_entry_fuzzer/restore_range", sqe(op=2, ext=1, c=2 << 20, expected=2)
          + u64(0x1234, 0x5678) + bytes(48))
    write("ring_entry_fuzzer/restore_list_buffer",
          sqe(op=2, form=1, a=2, b=4096, c=8, expected=2) + bytes(8) + u64(0, 8192)
          + u64(4096, 0) + u64(0xC1, 0xC2))


if __name__ == "__main__":
    tcp_frame()
    tcp_lane()
    notice_record()
    handshake()
    block_plan()
    resolve()
    config()
    security_input()
    ring_entry()

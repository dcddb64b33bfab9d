"""numpy arrays and torch tensors over SHM regions (Region.numpy/.torch,
Client.register_array) against two real daemons: what an array view holds
is what lands on the peer, byte for byte, and a view of a deregistered
region (or of a closed client's) raises instead of touching dead memory."""

from __future__ import annotations

import sys
from typing import Dict

import numpy as np
import pytest

import pytest_main
import xferd
from conftest import Regions
from daemons import Cluster
from testlib import WAIT_S

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

Clients = Dict[str, xferd.Client]

CLOSED = "region 'arr_gone' was deregistered or its client closed"


def test_numpy_views_land_byte_for_byte(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    kv = np.random.default_rng(7).standard_normal((64, 1024)).astype(np.float32)
    src = a.register_array("arr_src", kv.T)  # non-contiguous: copied in place, C order
    regions._made.append(("a", "arr_src"))
    assert src.size == kv.nbytes
    dst = regions.make("b", "arr_dst", 2 * kv.nbytes, remote_write=True)
    view = src.numpy(np.float32, kv.T.shape)
    assert view.shape == (1024, 64) and np.array_equal(view, kv.T)
    view[3, :] = 1.5  # in place: the write carries it
    a.write("arr_src", "b", "arr_dst", kv.nbytes, dst_offset=kv.nbytes).wait(WAIT_S)

    landed = dst.numpy(np.float32, (1024, 64), offset=kv.nbytes)
    expected = kv.T.copy()
    expected[3, :] = 1.5
    assert landed.tobytes() == expected.tobytes()
    assert bytes(dst.buffer[kv.nbytes:]) == expected.tobytes()
    assert not dst.numpy(np.uint8, kv.nbytes).any(), "bytes before the offset were touched"
    assert dst.numpy("<u8").shape == (2 * kv.nbytes // 8,)
    with pytest.raises(ValueError, match="needs 524289 bytes; region 'arr_dst' has 524288"):
        dst.numpy(np.uint8, 2 * kv.nbytes + 1)
    with pytest.raises(ValueError, match="only shm regions"):
        regions.make("b", "arr_anon", 4096, backing="anonymous").numpy(np.uint8)


def test_views_of_a_deregistered_region_raise(clients: Clients, regions: Regions) -> None:
    a = clients["a"]  # the client that mapped the region
    region = regions.make("a", "arr_gone", 1 << 20)
    view = region.numpy(np.uint32, (256, 1024))
    view[:] = 7
    row = view[5]  # a view numpy made: checked too
    total = view + 1  # a result in memory of its own: not tied to the region
    assert a.deregister_region("arr_gone") == 0
    for access in (lambda: view[0, 0], lambda: row[1], lambda: view.sum(),
                   lambda: view.tobytes(), lambda: np.copyto(view, 0), lambda: view.copy(),
                   lambda: view.__setitem__(0, 1), lambda: repr(row), lambda: float(view[0, 0])):
        with pytest.raises(ValueError, match=CLOSED):
            access()
    with pytest.raises(ValueError, match=CLOSED):
        view += 1
    with pytest.raises(ValueError, match=CLOSED):
        region.numpy(np.uint8)
    assert int(total.sum()) == 8 * 256 * 1024


def test_closing_the_client_makes_views_raise(cluster: Cluster) -> None:
    with xferd.Client(cluster["a"].target) as a:
        region = a.register_region("arr_gone", 4096, backing="shm")
        view = region.numpy(np.uint8)
        view[:] = 1
    with pytest.raises(ValueError, match=CLOSED):
        view[0]
    cluster["a"].client().deregister_region("arr_gone")


def test_torch_tensors_land_byte_for_byte(clients: Clients, regions: Regions) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (python3-torch): "
                                "the torch views are optional")
    a = clients["a"]
    weights = torch.arange(4096 * 4, dtype=torch.float32).reshape(64, 256) / 3
    src = a.register_array("arr_tsrc", weights.t())  # strided: copied in place
    regions._made.append(("a", "arr_tsrc"))
    dst = regions.make("b", "arr_tdst", src.size, remote_write=True)
    tensor = src.torch(torch.float32, (256, 64))
    assert torch.equal(tensor, weights.t())
    tensor[0] = -1.0
    a.write("arr_tsrc", "b", "arr_tdst", src.size).wait(WAIT_S)
    expected = weights.t().contiguous().clone()
    expected[0] = -1.0
    landed = dst.torch(torch.float32, (256, 64))
    assert torch.equal(landed, expected)
    assert bytes(dst.buffer) == expected.numpy().tobytes()

    column = landed[:, 3]  # a view torch made: checked too
    copied = landed * 2  # memory of its own
    regions.cleanup()  # deregisters arr_tdst (and arr_tsrc)
    for access in (lambda: landed[0], lambda: column.sum(), lambda: landed.numpy(),
                   lambda: landed.add_(1), lambda: torch.cat([landed, landed])):
        with pytest.raises(ValueError, match="region 'arr_tdst' was deregistered"):
            access()
    assert torch.equal(copied, expected * 2)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))

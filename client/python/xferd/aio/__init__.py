"""asyncio client of the xferd daemon, on grpc.aio: the surface of
`xferd.Client` with coroutines.

    import xferd.aio

    async with xferd.aio.Client("unix:/run/xferd/xferd.sock") as c:
        handle = await c.write("src", "node-b", "dst", 1 << 20)
        async for snapshot in handle:          # progress (WatchTransfer)
            print(snapshot.bytes_done)
        done = await handle.wait()             # one WaitTransfer call

One Client may be shared by any number of tasks of its event loop.
Cancelling a task cancels the call it is awaiting, never a transfer: a
transfer stops only through `handle.cancel()` (or `wait(cancel=True)`).
Requests, models and errors are those of `xferd`.
"""

from xferd.aio.client import Client
from xferd.aio.handles import RegionWatch, TransferHandle

__all__ = ["Client", "RegionWatch", "TransferHandle"]

"""asyncio handles: a submitted transfer (`TransferHandle`) and a region
subscription (`RegionWatch`), as `xferd.handles` with coroutines."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator, Generator, Optional

import grpc

from xferd.handles import END, HandleBase, QueueItem, WatchBase
from xferd.models import RegionEvent, Transfer
from xferd.requests import wait_error

if TYPE_CHECKING:  # pragma: no cover - typing only
    from xferd.aio.client import Client

__all__ = ["TransferHandle", "RegionWatch"]


class TransferHandle(HandleBase):
    """A transfer submitted through an `xferd.aio.Client`.

    `async for snapshot in handle` follows its progress; `await
    handle.wait()` returns its final snapshot. Attributes: HandleBase.
    """

    def __init__(self, client: "Client", submitted: Transfer) -> None:
        """Wraps the submission snapshot of a transfer of `client`'s daemon."""
        super().__init__(submitted)
        self._client = client

    async def snapshot(self) -> Transfer:
        """Fetches the transfer's current state (GetTransfer)."""
        self._last = await self._client.transfer(self.id)
        return self._last

    async def progress(self, interval: float = 0.1,
                       timeout: Optional[float] = None) -> AsyncIterator[Transfer]:
        """Yields snapshots (WatchTransfer) at most every `interval` seconds
        until the terminal one, which is always yielded last.

        Raises:
            TimeoutError: the transfer did not end within `timeout` seconds.
            XferdError: the watch itself failed (e.g. NotFound).
        """
        call = self._client.stub.WatchTransfer(self._watch_request(interval), timeout=timeout)
        try:
            async for message in call:
                yield self._seen(message)
        except grpc.RpcError as e:
            raise wait_error(e, self.id, timeout) from None
        finally:
            call.cancel()

    def __aiter__(self) -> AsyncIterator[Transfer]:
        """Same as progress() with its defaults."""
        return self.progress()

    async def wait(self, timeout: Optional[float] = None, cancel: bool = False) -> Transfer:
        """Waits until the transfer ends and returns its final snapshot: at
        once when the handle has seen the end (a transfer that ended within
        the client's linger), else one WaitTransfer call.

        Cancelling the awaiting task (or `timeout`) cancels the call only;
        with `cancel`, it cancels the transfer as well.

        Raises:
            XferdError: the transfer ended FAILED or CANCELLED (as
                `xferd.TransferHandle.wait()`).
            TimeoutError: it is still running after `timeout` seconds.
        """
        if not self._last.terminal:
            try:
                reply = await self._client.stub.WaitTransfer(self._wait_request(), timeout=timeout)
            except (asyncio.CancelledError, grpc.RpcError) as e:
                if cancel:
                    await asyncio.shield(self.cancel())
                if isinstance(e, grpc.RpcError):
                    raise wait_error(e, self.id, timeout) from None
                raise
            self._seen(reply)
        return self._last.raise_for_state()

    async def cancel(self) -> Transfer:
        """Cancels the transfer (no effect once it ended); returns its state."""
        self._last = await self._client.cancel(self.id)
        return self._last


class RegionWatch(WatchBase):
    """A live subscription to a region's events (`xferd.RegionWatch` on
    asyncio).

    Made by `Client.watch_region()`: `async with c.watch_region(name) as
    watch` (or `watch = await c.watch_region(name)`) returns once the daemon
    confirmed the subscription, so every landing of a transfer started
    afterwards is reported. A reader task drains the stream, so that
    `next_event()` can wait with a bound and be cancelled safely.
    """

    def __init__(self, call: Any, subscribe_timeout: Optional[float]) -> None:
        """Keeps `call` (a WatchRegion stream); nothing runs until awaited."""
        super().__init__(call)
        self._subscribe_timeout = subscribe_timeout
        self._events: "asyncio.Queue[QueueItem]" = asyncio.Queue()
        self._reader: Optional["asyncio.Task[None]"] = None
        self.subscribed: Optional[RegionEvent] = None

    async def _subscribe(self) -> "RegionWatch":
        """Starts the reader and waits for SUBSCRIBED.

        Raises:
            XferdError: the daemon refused the watch (e.g. NotFound).
            TimeoutError: no SUBSCRIBED event within the timeout.
        """
        if self.subscribed is not None:
            return self
        self._reader = asyncio.ensure_future(self._read())
        try:
            self.subscribed = self._subscribed(await self.next_event(self._subscribe_timeout))
        except BaseException:
            await self.close()
            raise
        return self

    def __await__(self) -> Generator[Any, None, "RegionWatch"]:
        return self._subscribe().__await__()

    async def _read(self) -> None:
        try:
            async for message in self._call:
                self._events.put_nowait(self._item(message))
        except grpc.RpcError as e:
            failure = self._failure(e)
            if failure is not None:
                self._events.put_nowait(failure)
        except asyncio.CancelledError:
            pass
        self._events.put_nowait(END)

    async def next_event(self, timeout: Optional[float] = None) -> Optional[RegionEvent]:
        """The next event, or None once the stream has ended.

        Raises:
            TimeoutError: no event within `timeout` seconds (None: no bound).
            XferdError: the stream failed.
        """
        if self._ended:
            return None
        try:
            return self._take(await asyncio.wait_for(self._events.get(), timeout))
        except asyncio.TimeoutError:
            raise TimeoutError(f"no region event within {timeout} s") from None

    async def __aiter__(self) -> AsyncIterator[RegionEvent]:
        """Yields events until the stream ends (after "deregistered")."""
        while True:
            event = await self.next_event()
            if event is None:
                return
            yield event

    async def close(self) -> None:
        """Cancels the subscription and stops the reader. Idempotent."""
        self._closing = True
        self._call.cancel()
        if self._reader is not None and self._reader is not asyncio.current_task():
            await asyncio.gather(self._reader, return_exceptions=True)

    async def __aenter__(self) -> "RegionWatch":
        return await self._subscribe()

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

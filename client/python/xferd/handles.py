"""Handles on things that outlive one call: a submitted transfer
(`TransferHandle`) and a region subscription (`RegionWatch`)."""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any, Iterator, Optional, Union

import grpc
from xferd.errors import XferdError, error_for, from_rpc_error
from xferd.models import RegionEvent, Transfer
from xferd.requests import duration, wait_error
from xferd.v1 import xferd_pb2

if TYPE_CHECKING:  # pragma: no cover - typing only
    from xferd.client import Client

__all__ = ["TransferHandle", "RegionWatch"]


class HandleBase:
    """What the blocking and the asyncio transfer handles share: the id and
    the snapshots seen, with no RPC.

    Attributes:
        id: The daemon's transfer id.
        submitted: The snapshot the daemon returned at submission.
    """

    def __init__(self, submitted: Transfer) -> None:
        """Starts from the submission snapshot."""
        self.id = submitted.id
        self.submitted = submitted
        self._last = submitted

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id}, state={self._last.state!r})"

    @property
    def last(self) -> Transfer:
        """The most recent snapshot this handle has seen (no RPC)."""
        return self._last

    def _seen(self, message: Any) -> Transfer:
        """Takes a Transfer message of this transfer as the latest snapshot."""
        self._last = Transfer.from_proto(message)
        return self._last

    def _watch_request(self, interval: float) -> xferd_pb2.WatchTransferRequest:
        return xferd_pb2.WatchTransferRequest(id=self.id, interval=duration(interval))

    def _wait_request(self) -> xferd_pb2.WaitTransferRequest:
        return xferd_pb2.WaitTransferRequest(id=self.id)


class TransferHandle(HandleBase):
    """A transfer submitted through a Client (attributes: HandleBase)."""

    def __init__(self, client: "Client", submitted: Transfer) -> None:
        """Wraps the submission snapshot of a transfer of `client`'s daemon."""
        super().__init__(submitted)
        self._client = client

    def snapshot(self) -> Transfer:
        """Fetches the transfer's current state (GetTransfer)."""
        self._last = self._client.transfer(self.id)
        return self._last

    def progress(self, interval: float = 0.1,
                 timeout: Optional[float] = None) -> Iterator[Transfer]:
        """Yields snapshots (WatchTransfer) at most every `interval` seconds
        until the terminal one, which is always yielded last.

        A failed or cancelled transfer ends the iteration normally; call
        `raise_for_state()` on the last snapshot to turn it into an error.

        Raises:
            TimeoutError: the transfer did not end within `timeout` seconds.
            XferdError: the watch itself failed (e.g. NotFound).
        """
        call = self._client.stub.WatchTransfer(self._watch_request(interval), timeout=timeout)
        try:
            for message in call:
                yield self._seen(message)
        except grpc.RpcError as e:
            raise wait_error(e, self.id, timeout) from None
        finally:
            call.cancel()

    def __iter__(self) -> Iterator[Transfer]:
        """Same as progress() with its defaults."""
        return self.progress()

    def wait(self, timeout: Optional[float] = None) -> Transfer:
        """Blocks until the transfer ends and returns its final snapshot.

        At once, with no call, when this handle has already seen the end:
        as it has for a transfer that ended within the client's linger (most
        small ones), so write(...).wait() costs what write(..., wait=True)
        does. Otherwise one WaitTransfer call (no stream). Giving up (the
        timeout, an interrupt) leaves the transfer running.

        Raises:
            XferdError: the transfer ended FAILED or CANCELLED; the subclass
                matches its error code (e.g. Unavailable, DeadlineExceeded,
                Cancelled) and `.transfer` holds the final snapshot.
            TimeoutError: it is still running after `timeout` seconds.
        """
        if not self._last.terminal:
            try:
                self._seen(self._client.stub.WaitTransfer(self._wait_request(), timeout=timeout))
            except grpc.RpcError as e:
                raise wait_error(e, self.id, timeout) from None
        return self._last.raise_for_state()

    def cancel(self) -> Transfer:
        """Cancels the transfer (no effect once it ended); returns its state."""
        self._last = self._client.cancel(self.id)
        return self._last


#: Put on a watch's queue after its stream's last event.
END = object()

#: What a watch's reader queues: an event, the stream's error, or END.
QueueItem = Union[RegionEvent, XferdError, object]


class WatchBase:
    """What the blocking and the asyncio region watches share: turning the
    stream's messages, its error and its end into queued items, and items
    into next_event()'s answers."""

    def __init__(self, call: Any) -> None:
        """Keeps `call`, a WatchRegion stream."""
        self._call = call
        self._closing = False
        self._ended = False

    def _item(self, message: Any) -> QueueItem:
        return RegionEvent.from_proto(message)

    def _failure(self, error: grpc.RpcError) -> Optional[QueueItem]:
        """The item a stream error queues: none when close() caused it."""
        return None if self._closing else from_rpc_error(error)

    def _take(self, item: QueueItem) -> Optional[RegionEvent]:
        """next_event()'s answer for a dequeued item (raises its error)."""
        if item is END:
            self._ended = True
            return None
        if isinstance(item, XferdError):
            self._ended = True
            raise item
        assert isinstance(item, RegionEvent)
        return item

    @staticmethod
    def _subscribed(first: Optional[RegionEvent]) -> RegionEvent:
        """The watch's first event, which must be SUBSCRIBED."""
        if first is None or first.kind != "subscribed":
            raise error_for(grpc.StatusCode.INTERNAL,
                            f"WatchRegion began with {first!r} instead of SUBSCRIBED")
        return first


class RegionWatch(WatchBase):
    """A live subscription to a region's events.

    Created by Client.watch_region(), which returns only once the daemon has
    confirmed the subscription (`subscribed`), so every landing of a transfer
    started afterwards is reported. Iterating yields the following events
    ("landed", and "deregistered" last if the region goes away). A reader
    thread drains the stream so that `next_event()` can wait with a bound.
    """

    def __init__(self, call: Any, subscribe_timeout: Optional[float]) -> None:
        """Starts reading `call` (a WatchRegion stream) and waits for SUBSCRIBED.

        Raises:
            XferdError: the daemon refused the watch (e.g. NotFound).
            TimeoutError: no SUBSCRIBED event within `subscribe_timeout` s.
        """
        super().__init__(call)
        self._events: "queue.Queue[QueueItem]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="xferd-watch", daemon=True)
        self._reader.start()
        try:
            #: The daemon's SUBSCRIBED event: later landings are all reported.
            self.subscribed: RegionEvent = self._subscribed(self.next_event(subscribe_timeout))
        except BaseException:
            self.close()
            raise

    def _read(self) -> None:
        try:
            for message in self._call:
                self._events.put(self._item(message))
        except grpc.RpcError as e:
            failure = self._failure(e)
            if failure is not None:
                self._events.put(failure)
        self._events.put(END)

    def next_event(self, timeout: Optional[float] = None) -> Optional[RegionEvent]:
        """The next event, or None once the stream has ended.

        Raises:
            TimeoutError: no event within `timeout` seconds (None: no bound).
            XferdError: the stream failed.
        """
        if self._ended:
            return None
        try:
            return self._take(self._events.get(timeout=timeout))
        except queue.Empty:
            raise TimeoutError(f"no region event within {timeout} s") from None

    def __iter__(self) -> Iterator[RegionEvent]:
        """Yields events until the stream ends (after "deregistered")."""
        while True:
            event = self.next_event()
            if event is None:
                return
            yield event

    def close(self) -> None:
        """Cancels the subscription and stops the reader. Idempotent."""
        self._closing = True
        self._call.cancel()
        if self._reader is not threading.current_thread():
            self._reader.join()

    def __enter__(self) -> "RegionWatch":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

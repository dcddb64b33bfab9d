"""The request rings on an asyncio event loop: completions are reaped when
the completion doorbell (an eventfd) becomes readable, watched with
loop.add_reader, and handed to the futures of their requests by user_data.
No thread per request and no spinning: the loop sleeps in its selector.
"""

from __future__ import annotations

import asyncio
from typing import Dict, List, Optional, Tuple

import grpc

from xferd.errors import error_for
from xferd.ring_requests import LINGER_MAX_BYTES
from xferd.rings import LocalRings, RingCompletion, RingRequest

__all__ = ["AioRings"]

Waiters = Tuple["asyncio.Future[RingCompletion]", "asyncio.Future[RingCompletion]"]


class AioRings:
    """`LocalRings` driven by one event loop (the only one to use them)."""

    def __init__(self, rings: LocalRings, loop: asyncio.AbstractEventLoop) -> None:
        self.rings = rings
        self._loop = loop
        # user_data -> (its queued notice, its final completion); a refusal
        # has only the final, which then resolves both.
        self._waiters: Dict[int, Waiters] = {}
        self._room: List["asyncio.Future[None]"] = []
        # The daemon rings the doorbell after every completion from now on.
        # This store precedes every tail store of a submission (program
        # order, kept by TSO), so the daemon sees it before any entry it
        # completes: no wakeup is lost and no fence is needed here.
        rings.set_client_waits(True)
        loop.add_reader(rings.complete_fd, self._on_doorbell)

    def close(self) -> None:
        """Stops watching the doorbell and ends the session; requests still
        waited for fail UNAVAILABLE."""
        self._loop.remove_reader(self.rings.complete_fd)
        self._fail_all("the client closed its rings")
        self.rings.close()

    def _on_doorbell(self) -> None:
        # The count first, then the ring: a completion after the last look
        # rings again and brings us back.
        self.rings.drain_doorbell()
        while True:
            got = self.rings.reap_ready()
            if not got:
                break
            self.rings.settle(got)
            for c in got:
                self._file(c)
        if self.rings.closed():
            self._fail_all("the daemon closed this session's rings")
        while self._room:
            waiter = self._room.pop()
            if not waiter.done():
                waiter.set_result(None)

    def _file(self, c: RingCompletion) -> None:
        waiters = self._waiters.get(c.user_data)
        if waiters is None:  # forgotten: nobody waits for it
            return
        queued, final = waiters
        if not queued.done():
            queued.set_result(c)
        if not c.queued:
            del self._waiters[c.user_data]
            if not final.done():
                final.set_result(c)

    def _fail_all(self, message: str) -> None:
        for queued, final in self._waiters.values():
            for f in (queued, final):
                if not f.done():
                    f.set_exception(error_for(grpc.StatusCode.UNAVAILABLE, message))
                    f.exception()  # retrieved: a forgotten one must not warn
        self._waiters.clear()

    async def submit(self, r: RingRequest) -> Tuple[int, Waiters]:
        """Submits `r`; its user_data and the futures of its queued notice
        and final completion. Waits (on the loop) while the rings are full.
        New names are interned over the local socket, a blocking exchange of
        one small packet the daemon answers at once, once per name."""
        handles = self.rings.handles([r.peer, r.src, r.dst, r.label])
        while not self.rings.reserve():
            room = self._loop.create_future()
            self._room.append(room)
            await room
        try:
            while True:
                user_data = self.rings.try_put(r, handles)
                if user_data is not None:
                    break
                await asyncio.sleep(0)  # the daemon is taking the entries before
        except BaseException:
            self.rings.unreserve()
            raise
        final = self._loop.create_future()
        # Without a queued notice the final completion is the only one: one
        # future stands for both (resolved once, by it).
        waiters = (self._loop.create_future() if r.queued_notice else final, final)
        self._waiters[user_data] = waiters
        return user_data, waiters

    def forget(self, user_data: int) -> None:
        """Nobody will wait for `user_data`'s completions."""
        self._waiters.pop(user_data, None)

    async def call(self, r: RingRequest, timeout: Optional[float], linger: float
                   ) -> RingCompletion:
        """Submits `r` and waits as its gRPC call does: for the end (wait),
        else for the queued notice and then up to `linger` for the end."""
        user_data, (queued, final) = await self.submit(r)
        first = queued if r.queued_notice else final
        try:
            # With no bound, the future itself: a caller cancelled while it
            # waits cancels only that future, which _file then passes over.
            done = await (first if timeout is None
                          else asyncio.wait_for(asyncio.shield(first), timeout))
        except asyncio.TimeoutError:
            self.forget(user_data)
            raise error_for(grpc.StatusCode.DEADLINE_EXCEEDED,
                            "no completion from the daemon before the deadline") from None
        if done.queued and linger > 0 and done.length <= LINGER_MAX_BYTES:
            try:
                done = await asyncio.wait_for(asyncio.shield(final), linger)
            except asyncio.TimeoutError:
                self.forget(user_data)  # still running: its queued snapshot
        elif done.queued:
            self.forget(user_data)
        return done

"""An asyncio event loop on a thread of its own, for obstore's async requests made from synchronous code:
requests handed in from any thread run there side by side, at most ``in_flight`` at once, and each result
comes back as a :class:`concurrent.futures.Future`, as from a thread pool. Many requests then wait on one
thread instead of one thread each."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


class EventLoopThread:
    """A running event loop on a daemon thread; :meth:`close` cancels what is still pending and ends it."""

    def __init__(self, in_flight: int, name: str = "zsarchive-requests") -> None:
        self.in_flight = in_flight
        self._loop = asyncio.new_event_loop()
        self._gate: asyncio.Semaphore | None = None
        self._running = 0
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: Callable[[], Awaitable[T]]) -> Future[T]:
        """Run ``request()`` on the loop once fewer than ``in_flight`` requests are running; its result
        (or exception) as a future. The awaitable is made only when its turn comes, so a request cancelled
        before then never starts."""
        return asyncio.run_coroutine_threadsafe(self._gated(request), self._loop)

    async def _gated(self, request: Callable[[], Awaitable[T]]) -> T:
        if self._gate is None:  # made on the loop's thread, the only one touching it
            self._gate = asyncio.Semaphore(self.in_flight)
        async with self._gate:
            self._running += 1
            try:
                return await request()
            finally:
                self._running -= 1

    def close(self) -> None:
        """Cancel the requests still pending, stop the loop and wait for its thread."""
        if not self._thread.is_alive():
            return

        async def cancel_all() -> bool:
            cut = self._running > 0
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return cut

        cut = asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        if not cut:  # a request cut off may still answer into the loop from obstore's own threads: left open
            self._loop.close()

    def __enter__(self) -> EventLoopThread:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

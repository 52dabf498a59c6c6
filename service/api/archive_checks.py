"""Uploaded archives are checked in a small pool of separate, low-priority processes, never in the API's.

``check_project`` decompresses up to ``max_archive_bytes`` (512 MiB) in pure Python. Run on the API
process's threads, eight gzip bombs took every thread of its pool (and the GIL) for seconds, and every
other request waited, ``/healthz`` included. Here each check runs in a child process, spawned rather than
forked (the server is threaded), that lowers its own CPU priority so the API wins the CPU, and ends when
the API process does. The pool is made on first use, shut down with the app, and made again when a child
dies.

Before a check is queued it is admitted, on the event loop:

* a token with ``per_token`` checks in flight, or ``per_token_per_minute`` started in the last minute,
  gets 429;
* with ``max_waiting`` checks already waiting for a free process, anyone gets 503.

The counts are per API process: each uvicorn worker process has its own pool and its own counts.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import signal
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from intelliperf.project_archive import ArchiveLimits, check_project

__all__ = ["ArchiveChecks", "CheckRefused", "CheckerDied"]

CHILD_NICENESS = 10
PARENT_POLL_S = 1.0
RETRY_AFTER_S = 5
WINDOW_S = 60.0


class CheckRefused(Exception):
    """The check was not started: too many in flight (the service's or this token's), or too many this
    minute. ``status_code`` is 503 or 429; retry after ``retry_after_s``."""

    def __init__(self, status_code: int, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class CheckerDied(Exception):
    """The process checking the archive ended before it answered (killed, out of memory)."""


def _prepare_child() -> None:
    """Runs first in each checking process: lower its priority, and end it once the API process is gone (one
    killed with SIGKILL never shuts its pool down, and the child holds both ends of its queue's pipe, so
    it would wait for work forever). A terminal's Ctrl-C, which reaches every process of its group, is left
    to the API process, which shuts its pool down (here it only printed a KeyboardInterrupt's traceback)."""
    os.nice(CHILD_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(os.getppid(),), daemon=True).start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _check(data: bytes, limits: ArchiveLimits) -> int:
    return check_project(data, limits)


class ArchiveChecks:
    def __init__(
        self,
        limits: ArchiveLimits,
        *,
        workers: int,
        max_waiting: int,
        per_token: int,
        per_token_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.workers = workers
        self.max_waiting = max_waiting
        self.per_token = per_token
        self.per_token_per_minute = per_token_per_minute
        self._clock = clock
        # the counts: taken on the event loop and by done callbacks, which run on the pool's thread
        self._lock = threading.Lock()
        # the pool: never taken by a callback, so no callback waits on a submit that waits on the pool
        self._pool_lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._in_flight = 0
        self._started = 0
        self._token_in_flight: defaultdict[Hashable, int] = defaultdict(int)
        self._token_starts: defaultdict[Hashable, deque[float]] = defaultdict(deque)

    @property
    def started(self) -> int:
        """Checks admitted and handed to the pool since the app started."""
        return self._started

    @property
    def in_flight(self) -> int:
        """Checks running or waiting for a process."""
        return self._in_flight

    async def check(self, data: bytes, token: Hashable, who: str) -> int:
        """The archive's member count; raises ArchiveError (the archive is refused), CheckRefused (not
        checked now) or CheckerDied. ``token`` identifies the caller for the per-token limits, ``who``
        names it in a refusal."""
        self._admit(token, who)
        try:
            future = self._submit(data)
        except BaseException:
            self._release(token)
            raise
        future.add_done_callback(lambda _: self._release(token))
        try:
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            raise CheckerDied(
                "the process checking the archive ended before it answered (killed, or out of memory); "
                "retry the submission"
            ) from None

    def shutdown(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _admit(self, token: Hashable, who: str) -> None:
        with self._lock:
            now = self._clock()
            starts = self._token_starts[token]
            while starts and starts[0] <= now - WINDOW_S:
                starts.popleft()
            if self._token_in_flight[token] >= self.per_token:
                raise CheckRefused(
                    429,
                    f"token {who!r} already has {self.per_token} archive check(s) in progress, the most one "
                    "token may have (INTELLIPERF_ARCHIVE_CHECKS_PER_TOKEN); retry when one has finished",
                    RETRY_AFTER_S,
                )
            if len(starts) >= self.per_token_per_minute:
                wait_s = max(1, math.ceil(starts[0] + WINDOW_S - now))
                raise CheckRefused(
                    429,
                    f"token {who!r} has started {len(starts)} archive checks in the last minute, the most "
                    f"one token may (INTELLIPERF_ARCHIVE_CHECKS_PER_TOKEN_PER_MINUTE); retry in {wait_s} s",
                    wait_s,
                )
            if self._in_flight - self.workers >= self.max_waiting:
                raise CheckRefused(
                    503,
                    f"the service is checking {self._in_flight} uploaded archives, as many as it queues; "
                    f"retry in {RETRY_AFTER_S} s",
                    RETRY_AFTER_S,
                )
            starts.append(now)
            self._token_in_flight[token] += 1
            self._in_flight += 1
            self._started += 1

    def _release(self, token: Hashable) -> None:
        with self._lock:
            self._in_flight -= 1
            self._token_in_flight[token] -= 1
            if not self._token_in_flight[token]:
                del self._token_in_flight[token]

    def _submit(self, data: bytes) -> Future[int]:
        """Hand the check to the pool, making a new pool when there is none or the last one broke (a
        child died: every check it held has failed with BrokenProcessPool)."""
        with self._pool_lock:
            if self._pool is not None:
                try:
                    return self._pool.submit(_check, data, self.limits)
                except BrokenProcessPool:
                    self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_prepare_child,
            )
            return self._pool.submit(_check, data, self.limits)

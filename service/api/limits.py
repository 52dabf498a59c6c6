"""A request body larger than the limit is refused while it streams in, before it fills memory or disk."""

from __future__ import annotations

import re
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodySizeLimit", "BodyTooLarge"]


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body exceeds {limit} bytes")
        self.limit = limit


class BodySizeLimit:
    """``max_bytes`` for every request but those whose path fully matches a pattern of ``overrides``
    (pattern, limit): the first match's limit."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, overrides: Sequence[tuple[re.Pattern[str], int]] = ()
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = tuple(overrides)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        received = 0
        path = scope.get("path", "")
        limit = next((n for pattern, n in self.overrides if pattern.fullmatch(path)), self.max_bytes)

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited_receive, send)

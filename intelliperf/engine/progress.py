"""How the engine reports what it is doing: the CLI draws it, the worker turns it into job events."""

from __future__ import annotations

from typing import Protocol

__all__ = ["NullProgress", "Progress"]


class Progress(Protocol):
    def start(self, stage: str, detail: str = "") -> None: ...

    def done(self, stage: str, detail: str = "") -> None: ...

    def note(self, message: str) -> None: ...


class NullProgress:
    def start(self, stage: str, detail: str = "") -> None:
        pass

    def done(self, stage: str, detail: str = "") -> None:
        pass

    def note(self, message: str) -> None:
        pass

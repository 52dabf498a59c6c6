"""An OpenAI-compatible chat server on 127.0.0.1 that answers from a script, for tests (and the GPU runs)
of the optimization loop: the real DSPy/LiteLLM client talks real HTTP to it.

    with ScriptedLLM(["first reply", Failure(503), "second reply"], key="sk-test") as server:
        lm = dspy.LM("openai/scripted", api_base=server.api_base, api_key="sk-test", cache=False)
        ...
        server.requests[0]["messages"]   # what the client sent
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Failure", "ScriptedLLM", "dspy_reply"]


@dataclass(frozen=True)
class Failure:
    """An HTTP error instead of a reply (e.g. 503 for a transient error, 401 for a bad key)."""

    status: int
    message: str = "scripted failure"


def dspy_reply(**fields: str) -> str:
    """A reply in DSPy's ChatAdapter format: ``[[ ## field ## ]]`` sections, then the completed marker."""
    body = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items())
    return body + "[[ ## completed ## ]]"


class ScriptedLLM:
    def __init__(
        self, script: Iterable[str | Failure], *, key: str = "sk-test", model: str = "scripted"
    ) -> None:
        self.script: list[str | Failure] = list(script)
        self.key = key
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def api_base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def remaining(self) -> int:
        with self._lock:
            return len(self.script)

    def _next(self, request: dict[str, Any]) -> str | Failure:
        with self._lock:
            self.requests.append(request)
            if not self.script:
                return Failure(500, "the script has no more replies")
            return self.script.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {server.key}":
                    return True
                self._send(
                    401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
                )
                return False

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self._authorized():
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                reply = server._next(body)
                if isinstance(reply, Failure):
                    self._send(reply.status, {"error": {"message": reply.message, "type": "server_error"}})
                    return
                prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
                usage = {
                    "prompt_tokens": prompt_chars // 4,
                    "completion_tokens": len(reply) // 4,
                    "total_tokens": prompt_chars // 4 + len(reply) // 4,
                }
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", server.model),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": usage,
                    },
                )

        return Handler

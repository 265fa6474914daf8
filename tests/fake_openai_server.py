"""A loopback Chat Completions server that speaks the real wire format and records requests.

``POST /v1/chat/completions`` answers with a ``chat.completion`` JSON object, or, when the body
asks for ``"stream": true``, with ``text/event-stream`` chunks (``data: {...}`` lines and a final
``data: [DONE]``). Every request's headers and JSON body are recorded, and every SSE event sent
is kept byte for byte so tests can compare what the client yielded.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeChatServer:
    """Run with ``with FakeChatServer() as server:``; ``server.base_url`` goes to the client."""

    reply: str = "Sure: the answer is 42."
    prompt_tokens: int = 1234
    chunk_size: int = 5
    requests: list[Recorded] = field(default_factory=list)
    sent_events: list[list[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeChatServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(Recorded(self.path, dict(self.headers), body))
                    number = len(server.requests)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send_json(404, {"error": {"message": "not found", "type": "invalid"}})
                elif body.get("stream"):
                    self._stream(body, number)
                else:
                    self._send_json(200, server.completion(body, number))

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], number: int) -> None:
                events = server.stream_events(body, number)
                with server._lock:
                    server.sent_events.append(events)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    # ------------------------------------------------------------------ payloads

    def completion(self, body: dict[str, Any], number: int) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1700000000 + number,
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.reply, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": 7,
                "total_tokens": self.prompt_tokens + 7,
            },
        }

    def stream_events(self, body: dict[str, Any], number: int) -> list[bytes]:
        base = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion.chunk",
            "created": 1700000000 + number,
            "model": body.get("model", ""),
        }
        size = self.chunk_size
        pieces = [self.reply[i : i + size] for i in range(0, len(self.reply), size)]
        chunks = [{**base, "choices": [_delta({"role": "assistant", "content": ""})]}]
        chunks += [{**base, "choices": [_delta({"content": piece})]} for piece in pieces]
        chunks.append({**base, "choices": [_delta({}, finish_reason="stop")]})
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": 7,
                "total_tokens": self.prompt_tokens + 7,
            }
            chunks.append({**base, "choices": [], "usage": usage})
        events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        events.append(b"data: [DONE]\n\n")
        return events


def _delta(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}

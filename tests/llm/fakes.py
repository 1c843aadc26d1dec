"""Local HTTP servers that speak the Anthropic and OpenAI wire protocols, so the backends
are tested through the real SDKs and real HTTP without calling a real LLM.

Each server checks the API key and the model the way the real API does (401, 404) and
serves the model endpoints itself; answers to generation requests are queued by the test,
in order. Every request is recorded (method, path, headers, JSON body) for assertions.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

API_KEY = "test-key"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # decoded JSON, or None


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, data: object, **headers: str) -> Reply:
        return cls(status, json.dumps(data).encode(), {k.replace("_", "-"): v for k, v in headers.items()})


class FakeServer:
    """One provider's API on 127.0.0.1, served from a thread."""

    def __init__(self, models: set[str]) -> None:
        self.models = models
        self.requests: list[Request] = []
        self._replies: deque[Reply] = deque()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = Request(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or "null")
                )
                server.requests.append(request)
                reply = server.handle(request)
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = _serve

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *replies: Reply) -> None:
        """Answers to the next generation requests, in order."""
        self._replies.extend(replies)

    def generation_requests(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST"]

    def next_reply(self) -> Reply:
        if not self._replies:
            return self.error(500, "the test queued no reply for this request")
        return self._replies.popleft()

    def handle(self, request: Request) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str, **headers: str) -> Reply:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropic(FakeServer):
    """POST /v1/messages and GET /v1/models/{id}. The key may come as x-api-key or, as the
    SDK 2.x sends it, as a bearer token."""

    def handle(self, request: Request) -> Reply:
        if API_KEY not in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:]):
            return self.error(401, "invalid x-api-key")
        if request.method == "GET" and (m := re.fullmatch(r"/v1/models/([^/?]+)", request.path)):
            if m[1] not in self.models:
                return self.error(404, f"model: {m[1]}")
            return Reply.json(
                200, {"type": "model", "id": m[1], "display_name": m[1], "created_at": "2026-01-01T00:00:00Z"}
            )
        if request.method == "POST" and request.path == "/v1/messages":
            if request.body["model"] not in self.models:
                return self.error(404, f"model: {request.body['model']}")
            return self.next_reply()
        return self.error(404, f"no route {request.method} {request.path}")

    def error(self, status: int, message: str, **headers: str) -> Reply:
        kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return Reply.json(status, {"type": "error", "error": {"type": kind, "message": message}}, **headers)


def anthropic_message(
    *blocks: dict[str, Any],
    model: str = "claude-sonnet-5-5",
    stop_reason: str = "end_turn",
    input_tokens: int = 100,
    output_tokens: int = 50,
    cache_write: int = 0,
    cache_read: int = 0,
    request_id: str = "req_test_1",
) -> Reply:
    body = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }
    return Reply.json(200, body, request_id=request_id)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(thinking: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thinking, "signature": "sig"}


def tool_use_block(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_test", "name": name, "input": data}


class FakeOpenAI(FakeServer):
    """POST /v1/chat/completions and GET /v1/models, with bearer auth."""

    def handle(self, request: Request) -> Reply:
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return self.error(401, "Incorrect API key provided", code="invalid_api_key")
        if request.method == "GET" and request.path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in sorted(self.models)]
            return Reply.json(200, {"object": "list", "data": data})
        if request.method == "POST" and request.path == "/v1/chat/completions":
            if request.body["model"] not in self.models:
                return self.error(404, f"The model `{request.body['model']}` does not exist", code="model_not_found")
            return self.next_reply()
        return self.error(404, f"no route {request.method} {request.path}")

    def error(self, status: int, message: str, code: str | None = None, **headers: str) -> Reply:
        return Reply.json(
            status, {"error": {"message": message, "type": "invalid_request_error", "code": code}}, **headers
        )


def chat_completion(
    content: str | None = None,
    *,
    reasoning_content: str | None = None,
    tool_calls: list[tuple[str, str]] | None = None,
    finish_reason: str = "stop",
    model: str = "deepseek-reasoner",
    prompt_tokens: int = 100,
    completion_tokens: int = 50,
    cached_tokens: int | None = None,
    usage: bool = True,
    extra_message: dict[str, Any] | None = None,
    extra_usage: dict[str, Any] | None = None,
) -> Reply:
    """A chat completion; `tool_calls` are (function name, arguments JSON text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, **(extra_message or {})}
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(tool_calls)
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **({"prompt_tokens_details": {"cached_tokens": cached_tokens}} if cached_tokens is not None else {}),
            **(extra_usage or {}),
        }
    return Reply.json(200, body, x_request_id="req_openai_1")


def closed_port_url() -> str:
    """A URL nothing listens on: a port just bound and released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"

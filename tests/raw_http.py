"""HTTP/1.1 over a plain asyncio socket, for requests no HTTP client would send.

aiohttp's client (and yarl) normalise paths and refuse bytes that are not valid in a header;
probes of a path escape or of undecodable header bytes need the exact bytes on the wire.
Each request uses its own connection (``Connection: close``) and reads the answer to EOF.
``exchange`` sends bytes exactly as given (bad framing, TLS bytes …); ``malformed_requests`` is a
catalogue of requests aiohttp's parser refuses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

READ_TIMEOUT = 10.0

# A TLS 1.2 ClientHello's first bytes: what a client sends when told https:// for a plain port.
TLS_CLIENT_HELLO = bytes.fromhex("16 03 01 02 00 01 00 01 fc 03 03") + bytes(range(32)) + b"\x00\x00\x02\x13\x01"


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]  # lower-case names; the last value wins
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


async def raw_request(
    url: str,
    method: str,
    target: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    body: bytes = b"",
) -> RawResponse:
    """Send ``method target`` with exactly these header bytes (plus Host, Connection and, for a
    body, Content-Length) to the server at ``url`` (``http://host:port``)."""
    host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: " + host.encode(), b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), READ_TIMEOUT)
    finally:
        writer.close()
    return parse_response(raw)


def parse_response(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    elif "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return RawResponse(int(status_line.split(" ")[1]), headers, body)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


async def read_until_closed(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (TimeoutError if it never does)."""
    data = bytearray()
    async with asyncio.timeout(timeout):
        while chunk := await reader.read(65536):
            data += chunk
    return bytes(data)


async def exchange(host: str, port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send ``request`` as is and return every byte of the answer, up to the server's close."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request)
        await writer.drain()
        return await read_until_closed(reader, timeout)
    finally:
        writer.close()


def malformed_requests(secret: str) -> dict[str, bytes]:
    """Requests aiohttp's parser refuses, each carrying ``secret`` in an Authorization header
    and, where the request has one, in its body."""
    auth = f"Authorization: Bearer {secret}\r\n"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": secret}]})
    chat = "POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n"
    return {
        "content_length_and_chunked": (
            f"{chat}{auth}Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n{body}"
        ).encode(),
        "invalid_content_length": f"{chat}{auth}Content-Length: 12{secret}\r\n\r\n{body}".encode(),
        "control_char_in_header_name": f"{chat}{auth}X-Bad\x01Name: {secret}\r\nContent-Length: 2\r\n\r\n{{}}".encode(),
        "bad_chunk_size": f"{chat}{auth}Transfer-Encoding: chunked\r\n\r\nzz{secret}\r\n{body}\r\n0\r\n\r\n".encode(),
        "bad_method": f"P@ST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\n{auth}\r\n".encode(),
        "bad_version": f"POST /v1/chat/completions HTTP/9.{secret}\r\nHost: proxy\r\n{auth}\r\n".encode(),
        "nul_in_url": f"GET /v1/mo\x00{secret} HTTP/1.1\r\nHost: proxy\r\n{auth}\r\n".encode(),
        "oversize_header": f"{chat}{auth}X-Big: {secret}{'a' * 20_000}\r\n\r\n".encode(),
        "long_url": f"GET /v1/{secret}{'a' * 100_000} HTTP/1.1\r\nHost: proxy\r\n{auth}\r\n".encode(),
        "tls_client_hello": TLS_CLIENT_HELLO + secret.encode(),
    }

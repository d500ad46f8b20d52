"""HTTP/1.1 over a plain asyncio socket, for requests no HTTP client would send.

aiohttp's client (and yarl) normalise paths and refuse bytes that are not valid in a header;
probes of a path escape or of undecodable header bytes need the exact bytes on the wire.
Each request uses its own connection (``Connection: close``) and reads the answer to EOF.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

READ_TIMEOUT = 10.0


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
    return _parse(raw)


def _parse(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
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

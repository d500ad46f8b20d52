"""An upstream that answers with bytes given by the test, written to the socket as they are.

For what a real server will not send: a close-delimited body, a garbage status line, a header
too long, a body shorter than its ``Content-Length``, a reset. Each request is read whole (its
head, then ``Content-Length`` bytes) before the answer is written; ``then`` says what follows the
answer: ``"keep"`` (the connection stays open), ``"close"`` or ``"reset"``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class RawUpstream:
    answer: bytes
    then: str = "close"
    port: int = 0
    requests: list[bytes] = field(default_factory=list)  # each request's head

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(self.answer)
                await writer.drain()
                if self.then != "keep":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        if self.then == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()


@asynccontextmanager
async def raw_upstream(answer: bytes, then: str = "close") -> AsyncIterator[RawUpstream]:
    upstream = RawUpstream(answer, then)
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    upstream.port = server.sockets[0].getsockname()[1]
    try:
        yield upstream
    finally:
        server.close()

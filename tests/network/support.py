"""Helpers shared by the socket-level tests: length-prefixed frames and a scripted dispatcher
whose requests say how to answer them."""

import asyncio
import struct

from kafkalite.network.connection import NO_RESPONSE, Exclusive
from kafkalite.protocol.errors import InvalidRequestError


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class ScriptedDispatcher:
    """Request payload = 4-byte id + command byte. 'E' echoes now, 'W' waits for release(id),
    'N' gets no response, 'X' is unparsable; 'A' waits for release(id) as an Exclusive request
    (taken alone), 'F' too, then is found malformed. The response echoes id and payload
    length."""

    def __init__(self):
        self.gates: dict[int, asyncio.Future] = {}
        self.seen: list[int] = []

    def _gate(self, ident) -> asyncio.Future:
        return self.gates.setdefault(ident, asyncio.get_running_loop().create_future())

    def release(self, ident):
        self._gate(ident).set_result(None)

    def dispatch(self, frame_bytes, connection):
        ident = int.from_bytes(frame_bytes[:4], "big")
        command = frame_bytes[4:5]
        self.seen.append(ident)
        response = frame(struct.pack(">ii", ident, len(frame_bytes)))
        if command == b"E":
            return response
        if command == b"N":
            return NO_RESPONSE
        if command == b"W":
            gate = self._gate(ident)

            async def later():
                await gate
                return [response[:3], response[3:]]

            return later()
        if command in (b"A", b"F"):
            gate = self._gate(ident)

            async def alone():
                await gate
                if command == b"F":
                    raise InvalidRequestError(f"request {ident} found malformed")
                return response

            return Exclusive(alone())
        raise InvalidRequestError(f"cannot parse {bytes(frame_bytes[:8])!r}")


async def read_response(reader):
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return struct.unpack(">ii", await reader.readexactly(size))

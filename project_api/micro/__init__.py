"""Host side of the device RPC: talk to a microcontroller running the project-api C runtime.

Layers, bottom up (spec §4): :mod:`.framing` (frames, escaping, CRC), :mod:`.session`
(handshake, session ids, device logs), :mod:`.rpc` (MinRPC packets and a client), and the
high-level :class:`Session` / :class:`Model` API in :mod:`.api`.
"""

from project_api.micro.api import Model, Session
from project_api.micro.timing import TimingResult

__all__ = ["Model", "Session", "TimingResult"]

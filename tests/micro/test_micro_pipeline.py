"""Pipelined copies: several requests in flight, replies matched in order, errors drained."""

from __future__ import annotations

import numpy as np
import pytest
from micro_fake_device import FakeDevice, FakeTransport, Timeouts, exception_packet

from project_api.api.transport import ProjectTransport, TransportLogger
from project_api.errors import RPCError
from project_api.micro.rpc import DataType, RPCClient, RPCCode
from project_api.micro.session import FIFO_PIPELINE_DEPTH, SessionChannel, pipeline_depth_for


class CountingChannel(SessionChannel):
    """Counts requests sent and not yet answered, as the RPC client sees them."""

    in_flight = 0
    max_in_flight = 0

    def send(self, packet: bytes) -> None:
        super().send(packet)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def receive(self, max_wait_sec: float | None = None) -> bytes:
        reply = super().receive(max_wait_sec)
        self.in_flight -= 1
        return reply


def client_for(device: FakeDevice, depth: int) -> tuple[RPCClient, CountingChannel]:
    transport = FakeTransport(device)
    transport.open()
    channel = CountingChannel(transport, Timeouts(0, 0, 0))
    channel.start()
    channel.pipeline_depth = depth
    return RPCClient(channel), channel


@pytest.mark.parametrize("depth", [1, 2, 5])
@pytest.mark.parametrize("nbytes", [0, 1, 5000, 70001])
def test_pipelined_copies_round_trip(depth: int, nbytes: int) -> None:
    device = FakeDevice(max_packet_size=512)
    client, channel = client_for(device, depth)
    tensor = client.alloc((nbytes,), DataType(1, 8))
    payload = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    channel.max_in_flight = 0
    client.copy_to_remote(tensor, payload)
    assert bytes(device.memory[tensor.data]) == payload
    assert client.copy_from_remote(tensor) == payload
    assert channel.in_flight == 0
    if nbytes >= 5000:
        assert channel.max_in_flight == depth  # the window filled, and never overflowed
    else:
        assert channel.max_in_flight == 1


def test_error_reply_mid_pipeline_drains_and_stays_in_sync() -> None:
    device = FakeDevice(max_packet_size=512)
    client, channel = client_for(device, 4)
    tensor = client.alloc((20_000,), DataType(1, 8))
    process = device.process
    copies = 0

    def failing_process(packet: bytes) -> bytes | None:
        nonlocal copies
        reply = process(packet)
        if device.requests[-1] == RPCCode.COPY_TO_REMOTE:
            copies += 1
            if copies == 3:
                return exception_packet("copy number three failed")
        return reply

    device.process = failing_process  # type: ignore[method-assign]
    with pytest.raises(RPCError, match="copy number three failed"):
        client.copy_to_remote(tensor, bytes(20_000))
    # No more than the window was sent after the failing request, and every reply was read:
    # the next request gets its own reply.
    assert copies <= 3 + 3
    assert channel.in_flight == 0
    assert client.get_global_func("runtime.SystemLib") is not None


def test_depth_only_for_fifo_endpoints() -> None:
    fake = FakeTransport(FakeDevice())
    assert pipeline_depth_for(fake) == 1
    project = ProjectTransport(api_client=None)
    assert pipeline_depth_for(project) == 1  # JSON-RPC read/write_transport
    project.endpoint = {"type": "serial", "port": "/dev/null"}
    assert pipeline_depth_for(project) == 1
    project.endpoint = {"type": "fifo", "rx_path": "a", "tx_path": "b"}
    assert pipeline_depth_for(project) == FIFO_PIPELINE_DEPTH
    assert pipeline_depth_for(TransportLogger("x", project)) == FIFO_PIPELINE_DEPTH
    # An endpoint may ask for less (never more); a bad value is ignored.
    for asked, want in ((1, 1), (2, 2), (99, FIFO_PIPELINE_DEPTH), (0, FIFO_PIPELINE_DEPTH),
                        ("2", FIFO_PIPELINE_DEPTH), (True, FIFO_PIPELINE_DEPTH)):
        project.endpoint = {"type": "fifo", "rx_path": "a", "tx_path": "b",
                            "pipeline_depth": asked}
        assert pipeline_depth_for(project) == want, asked


def test_emulated_microcontroller_gets_one_request_in_flight(tmp_path) -> None:
    """QEMU's FIFO endpoint asks for one request in flight: the firmware's receive ring holds
    one packet, and a second one sent while it works on the first may overflow it."""
    from project_api.template.qemu import QemuSerialLine

    line = QemuSerialLine(tmp_path)
    try:
        project = ProjectTransport(api_client=None)
        project.endpoint = line.to_json()
        assert pipeline_depth_for(project) == 1
    finally:
        line.close()


def test_big_message_is_written_in_pieces() -> None:
    from project_api.micro.session import STREAM_MESSAGE_BYTES, STREAM_PIECE_BYTES

    device = FakeDevice(max_packet_size=1 << 21, with_packet_size_func=False)
    client, channel = client_for(device, 1)
    nbytes = STREAM_MESSAGE_BYTES + 3 * STREAM_PIECE_BYTES + 5
    tensor = client.alloc((nbytes,), DataType(1, 8))
    payload = np.random.default_rng(3).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    transport = channel.transport
    assert isinstance(transport, FakeTransport)
    before = len(transport.writes)
    client.copy_to_remote(tensor, payload)
    writes = transport.writes[before:]
    assert len(writes) >= nbytes // STREAM_PIECE_BYTES  # streamed, not one big write
    assert bytes(device.memory[tensor.data]) == payload
    assert client.copy_from_remote(tensor) == payload

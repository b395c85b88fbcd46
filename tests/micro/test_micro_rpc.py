"""RPC packets (spec §4.6) byte-exact, the §4.8 worked example, and the client against a fake device."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from micro_fake_device import FakeDevice, FakeModel, FakeTransport, Timeouts

from project_api.errors import RPCError, SessionError, SessionTimeoutError
from project_api.micro.framing import Framer, Unframer
from project_api.micro.rpc import (
    CPU,
    DataType,
    DLDevice,
    DLTensor,
    FunctionHandle,
    ModuleHandle,
    NDArray,
    OpaqueHandle,
    RPCClient,
    RPCCode,
    TypeCode,
    call_func_packet,
    copy_from_remote_packet,
    copy_overhead_bytes,
    copy_to_remote_packet,
    decode_packed_seq,
    decode_reply,
    encode_packed_seq,
    return_value,
    syscall_packet,
)
from project_api.micro.session import SessionChannel

SESSION = b"\x82\x66\x10"  # session id 0x6682, kNormal


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("..", ""))


# §4.8 worked example, frame by frame.
GET_GLOBAL_FRAME = h(
    "ff fd 30 00 00 00 82 66 10 25 00 00 00 00 00 00 00 09 00 00 00 01 00 00 00 0b 00 00 00"
    "11 00 00 00 00 00 00 00 72 75 6e 74 69 6d 65 2e 53 79 73 74 65 6d 4c 69 62 30 3b"
)
RETURN_HANDLE_FRAME = h(
    "ff fd 1f 00 00 00 82 66 10 14 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 03 00 00 00"
    "00 80 02 80 00 00 00 00 67 52"
)
CALL_FUNC_FRAME = h(
    "ff fd 1b 00 00 00 82 66 10 10 00 00 00 00 00 00 00 03 00 00 00 00 80 02 80 00 00 00 00"
    "00 00 00 00 94 9b"
)
RETURN_MODULE_FRAME = h(
    "ff fd 2b 00 00 00 82 66 10 20 00 00 00 00 00 00 00 04 00 00 00 02 00 00 00 00 00 00 00"
    "03 00 00 00 09 00 00 00 00 00 00 00 00 80 00 00 00 00 00 00 20 70"
)


def frame(packet: bytes) -> bytes:
    return Framer().frame(SESSION + packet)[1:]


def unframe(wire: bytes) -> bytes:
    (payload,) = Unframer().feed(wire)
    assert payload[:3] == SESSION
    return payload[3:]


def test_worked_example_get_global_func() -> None:
    packet = syscall_packet(RPCCode.GET_GLOBAL_FUNC, ["runtime.SystemLib"])
    assert len(packet) == 8 + 37
    assert frame(packet) == GET_GLOBAL_FRAME


def test_worked_example_return_handle() -> None:
    reply = decode_reply(unframe(RETURN_HANDLE_FRAME))
    assert reply.code == RPCCode.RETURN
    assert reply.values == [(TypeCode.OPAQUE_HANDLE, 0x80028000)]
    built = struct.pack("<Qi", 20, 4) + encode_packed_seq([OpaqueHandle(0x80028000)])
    assert frame(built) == RETURN_HANDLE_FRAME


def test_worked_example_call_func() -> None:
    packet = call_func_packet(0x80028000, [])
    assert len(packet) == 8 + 16
    assert frame(packet) == CALL_FUNC_FRAME


def test_worked_example_return_module() -> None:
    reply = decode_reply(unframe(RETURN_MODULE_FRAME))
    assert reply.values == [(TypeCode.INT, 9), (TypeCode.OPAQUE_HANDLE, 0x8000)]
    value = return_value(reply.values)
    assert isinstance(value, ModuleHandle) and value == 0x8000


def test_packed_seq_all_types_round_trip() -> None:
    tensor = DLTensor(0x20001000, DLDevice(1, 0), DataType(0, 8), (1, 28, 28, 1), 64)
    args = [
        -5,
        2.5,
        "name",
        b"\x00\xff",
        None,
        DLDevice(1, 0),
        DataType(2, 32, 1),
        OpaqueHandle(7),
        ModuleHandle(0x8000),
        FunctionHandle(0x80028001),
        tensor,
    ]
    data = encode_packed_seq(args)
    codes = [0, 2, 11, 12, 4, 6, 5, 3, 9, 10, 7]
    assert data[:4] == struct.pack("<i", len(args))
    assert data[4 : 4 + 4 * len(args)] == struct.pack(f"<{len(args)}i", *codes)
    values, end = decode_packed_seq(data)
    assert end == len(data)
    assert [c for c, _ in values] == codes
    assert [v for _, v in values] == args


def test_packed_seq_layouts() -> None:
    assert encode_packed_seq([]) == b"\x00\x00\x00\x00"
    assert encode_packed_seq([DataType(2, 32, 1)])[8:] == b"\x02\x20\x01\x00\x00\x00\x00\x00"
    assert encode_packed_seq([1.0])[8:] == struct.pack("<d", 1.0)
    tensor = DLTensor(0x1000, DLDevice(1, 0), DataType(0, 8), (2, 3), 16)
    enc = encode_packed_seq([tensor])[8:]
    assert len(enc) == 32 + 8 * 2
    assert enc == struct.pack("<QiiiBBHqqQ", 0x1000, 1, 0, 2, 0, 8, 1, 2, 3, 16)


def test_request_packet_layouts() -> None:
    tensor = DLTensor(0x1000, CPU, DataType(0, 8), (4,), 0)
    to_remote = copy_to_remote_packet(tensor, b"abcd")
    tensor_bytes = struct.pack("<QiiiBBHqQ", 0x1000, 1, 0, 1, 0, 8, 1, 4, 0)
    assert (
        to_remote
        == struct.pack("<Qi", 4 + 40 + 8 + 4, 7) + tensor_bytes + struct.pack("<Q", 4) + b"abcd"
    )
    assert copy_from_remote_packet(tensor, 4) == struct.pack(
        "<Qi", 4 + 40 + 8, 6
    ) + tensor_bytes + struct.pack("<Q", 4)
    assert len(to_remote) - 8 - 4 == copy_overhead_bytes(1)
    assert syscall_packet(RPCCode.FREE_HANDLE, [OpaqueHandle(5), 13]) == struct.pack(
        "<Qiiii Q q", 32, 10, 2, 3, 0, 5, 13
    )


def test_return_conventions() -> None:
    assert return_value([(0, 4), (4, None)]) is None
    assert return_value([(0, 0), (0, 42)]) == 42
    assert return_value([(0, 11), (11, "x")]) == "x"
    f = return_value([(0, 10), (3, 0x80028003)])
    assert isinstance(f, FunctionHandle) and f == 0x80028003
    t = DLTensor(0x10, CPU, DataType(2, 32), (3,), 0)
    assert return_value([(0, 13), (7, t), (3, 99)]) == NDArray(t, 99)


def test_exception_reply_raises_rpc_error() -> None:
    body = encode_packed_seq(["boom: bad things"])
    packet = struct.pack("<Qi", 4 + len(body), 5) + body
    reply = decode_reply(packet)
    assert reply.code == RPCCode.EXCEPTION and reply.message == "boom: bad things"

    class OneShot:
        def send(self, packet: bytes) -> None:
            pass

        def receive(self) -> bytes:
            return struct.pack("<Qi", 4 + len(body), 5) + body

        def set_max_payload_bytes(self, n: int) -> None:
            pass

    with pytest.raises(RPCError, match="Error caught from RPC call:\nboom: bad things"):
        RPCClient(OneShot()).call(1)
    body = encode_packed_seq(["RPCSessionTimeoutError: device timer"])
    with pytest.raises(SessionTimeoutError, match="device timer"):
        RPCClient(OneShot()).call(1)


def test_malformed_replies_are_session_errors() -> None:
    with pytest.raises(SessionError, match="length field"):
        decode_reply(struct.pack("<Qi", 99, 4))
    with pytest.raises(SessionError, match="truncated"):
        decode_reply(struct.pack("<Qiii", 12, 4, 1, 0))
    with pytest.raises(SessionError, match="reply code"):
        decode_reply(struct.pack("<Qi", 4, 77))


# --- client against the fake device ----------------------------------------------------------


def client_for(device: FakeDevice) -> tuple[RPCClient, SessionChannel, FakeTransport]:
    transport = FakeTransport(device)
    transport.open()
    channel = SessionChannel(transport, Timeouts(0, 0, 0))
    channel.start()
    return RPCClient(channel), channel, transport


@pytest.mark.parametrize("max_packet", [128, 512, 2048])
@pytest.mark.parametrize("nbytes", [0, 1, 83, 84, 85, 1000, 5000, 70001])
def test_chunked_copies_round_trip(max_packet: int, nbytes: int) -> None:
    device = FakeDevice(max_packet_size=max_packet)
    client, channel, _ = client_for(device)
    tensor = client.alloc((nbytes,), DataType(1, 8))
    payload = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8).tobytes()
    client.copy_to_remote(tensor, payload)
    assert bytes(device.memory[tensor.data]) == payload
    assert client.copy_from_remote(tensor) == payload
    # Every request fitted in the device's receive buffer, and a large copy filled it exactly.
    assert device.largest_payload <= max_packet
    if nbytes > max_packet:
        assert device.largest_payload == max_packet
    assert channel.protocol.unframer.max_payload_bytes == max_packet
    # Chunk count is what the spec's block formula gives.
    block = max_packet - 11 - copy_overhead_bytes(1)
    copies = sum(1 for c in device.requests if c == RPCCode.COPY_TO_REMOTE)
    assert copies == -(-nbytes // block)


def test_chunked_copy_at_offset_of_2d_tensor() -> None:
    device = FakeDevice(max_packet_size=256)
    client, _, _ = client_for(device)
    tensor = client.alloc((40, 25), DataType(2, 32))
    data = np.arange(1000, dtype=np.float32)
    client.copy_to_remote(tensor, data.tobytes())
    back = np.frombuffer(client.copy_from_remote(tensor), dtype=np.float32)
    np.testing.assert_array_equal(back, data)


def test_no_packet_size_function_means_single_packet() -> None:
    device = FakeDevice(max_packet_size=1 << 20, with_packet_size_func=False)
    client, _, _ = client_for(device)
    tensor = client.alloc((100_000,), DataType(1, 8))
    data = bytes(range(256)) * 390 + bytes(160)
    client.copy_to_remote(tensor, data)
    assert client.copy_from_remote(tensor) == data
    assert device.requests.count(RPCCode.COPY_TO_REMOTE) == 1
    assert device.requests.count(RPCCode.COPY_FROM_REMOTE) == 1


def test_get_global_func_missing_is_none() -> None:
    client, _, _ = client_for(FakeDevice())
    assert client.get_global_func("no.such.function") is None
    handle = client.get_global_func("runtime.SystemLib")
    assert isinstance(handle, FunctionHandle)
    assert client.call(handle) == ModuleHandle(0x8000)


def test_device_exception_becomes_rpc_error() -> None:
    device = FakeDevice(
        models={"default": FakeModel([("x", "int8", (1,))], [("y", "int8", (1,))], lambda a: a)}
    )
    client, _, _ = client_for(device)
    create = client.get_global_func("tvm.aot_executor.create")
    syslib = client.call(client.get_global_func("runtime.SystemLib"))
    with pytest.raises(RPCError, match="no model named other"):
        client.call(create, syslib, CPU, "other")
    # The session is still usable after an error reply.
    assert isinstance(client.call(create, syslib, CPU, "default"), ModuleHandle)

"""RPC layer of the device protocol (spec §4.6): packet encoding and a client for MinRPC devices.

Every packet is ``[u64 nbytes][i32 code][body]``; ``nbytes`` counts from the code on. Arguments
and return values travel as a *packed sequence*: ``i32 n, i32 type_codes[n]`` then each value.

Python values map to type codes as follows (both directions)::

    int -> kDLInt          float -> kDLFloat         str -> kTVMStr        bytes -> kTVMBytes
    None -> kTVMNullptr    DLDevice -> kDLDevice      DataType -> kTVMDataType
    DLTensor -> kTVMDLTensorHandle
    OpaqueHandle / ModuleHandle / FunctionHandle -> kTVMOpaqueHandle / kTVMModuleHandle / kTVMPackedFuncHandle
"""

from __future__ import annotations

import enum
import inspect
import logging
import math
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from project_api.archive import dtypes
from project_api.errors import RPCError, SessionDesyncError, SessionError, SessionTimeoutError

_LOG = logging.getLogger(__name__)

U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")
I32 = struct.Struct("<i")
_DEVICE = struct.Struct("<ii")
_DTYPE = struct.Struct("<BBH")
_TENSOR_HEAD = struct.Struct("<Q ii i BBH")  # data, device, ndim, dtype

#: MinRPC protocol version (never checked by MinRPC devices; the micro host never sends it).
PROTOCOL_VERSION = "0.8.0"


class RPCCode(enum.IntEnum):
    NONE = 0
    SHUTDOWN = 1
    INIT_SERVER = 2
    CALL_FUNC = 3
    RETURN = 4
    EXCEPTION = 5
    COPY_FROM_REMOTE = 6
    COPY_TO_REMOTE = 7
    COPY_ACK = 8
    GET_GLOBAL_FUNC = 9
    FREE_HANDLE = 10
    DEV_SET_DEVICE = 11
    DEV_GET_ATTR = 12
    DEV_ALLOC_DATA = 13
    DEV_FREE_DATA = 14
    DEV_STREAM_SYNC = 15
    COPY_AMONG_REMOTE = 16
    DEV_ALLOC_DATA_WITH_SCOPE = 17
    DEV_CREATE_STREAM = 18
    DEV_FREE_STREAM = 19
    DEV_SET_STREAM = 20


class TypeCode(enum.IntEnum):
    INT = 0
    UINT = 1
    FLOAT = 2
    OPAQUE_HANDLE = 3
    NULLPTR = 4
    DATA_TYPE = 5
    DL_DEVICE = 6
    DL_TENSOR_HANDLE = 7
    OBJECT_HANDLE = 8
    MODULE_HANDLE = 9
    PACKED_FUNC_HANDLE = 10
    STR = 11
    BYTES = 12
    NDARRAY_HANDLE = 13


class DLDevice(NamedTuple):
    device_type: int = 1  # kDLCPU
    device_id: int = 0


CPU = DLDevice(1, 0)


class DataType(NamedTuple):
    """DLPack data type: ``code`` 0 int, 1 uint, 2 float; ``bits``; ``lanes``."""

    code: int
    bits: int
    lanes: int = 1

    @classmethod
    def from_numpy(cls, dtype: Any) -> DataType:
        try:
            dt = dtypes.from_numpy(dtype)
        except dtypes.DTypeError as exc:
            raise SessionError(str(exc)) from None
        return cls(dt.code, dt.bits, dt.lanes)

    def to_numpy(self) -> np.dtype:
        try:
            return dtypes.from_dlpack(self.code, self.bits, self.lanes).to_numpy()
        except dtypes.DTypeError:
            raise SessionError(f"device tensor has unsupported DLPack dtype {tuple(self)}") from None

    @property
    def itemsize(self) -> int:
        return (self.bits * self.lanes + 7) // 8


class OpaqueHandle(int):
    """A device address or handle sent as kTVMOpaqueHandle."""


class ModuleHandle(int):
    """A module handle (kTVMModuleHandle)."""


class FunctionHandle(int):
    """A packed-function handle (kTVMPackedFuncHandle)."""


@dataclass(frozen=True)
class DLTensor:
    """A DLTensor as it travels on the wire (strides are always null)."""

    data: int
    device: DLDevice
    dtype: DataType
    shape: tuple[int, ...]
    byte_offset: int = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class NDArray:
    """An NDArray returned by a device function: its tensor plus the handle to free it with."""

    tensor: DLTensor
    handle: int


# --- packed sequences ------------------------------------------------------------------------


def encode_tensor(t: DLTensor) -> bytes:
    head = _TENSOR_HEAD.pack(t.data, t.device[0], t.device[1], len(t.shape), *t.dtype)
    return head + struct.pack(f"<{len(t.shape)}q", *t.shape) + U64.pack(t.byte_offset)


def decode_tensor(buf: bytes | memoryview, pos: int) -> tuple[DLTensor, int]:
    data, dev_type, dev_id, ndim, code, bits, lanes = _TENSOR_HEAD.unpack_from(buf, pos)
    pos += _TENSOR_HEAD.size
    if ndim < 0 or ndim > 64:
        raise SessionDesyncError(f"malformed reply: DLTensor ndim {ndim}")
    shape = struct.unpack_from(f"<{ndim}q", buf, pos)
    pos += 8 * ndim
    (byte_offset,) = U64.unpack_from(buf, pos)
    pos += 8
    tensor = DLTensor(
        data, DLDevice(dev_type, dev_id), DataType(code, bits, lanes), shape, byte_offset
    )
    return tensor, pos


def _type_code(value: Any) -> TypeCode:
    if value is None:
        return TypeCode.NULLPTR
    if isinstance(value, ModuleHandle):
        return TypeCode.MODULE_HANDLE
    if isinstance(value, FunctionHandle):
        return TypeCode.PACKED_FUNC_HANDLE
    if isinstance(value, OpaqueHandle):
        return TypeCode.OPAQUE_HANDLE
    if isinstance(value, bool | int | np.integer):
        return TypeCode.INT
    if isinstance(value, float | np.floating):
        return TypeCode.FLOAT
    if isinstance(value, str):
        return TypeCode.STR
    if isinstance(value, bytes | bytearray | memoryview):
        return TypeCode.BYTES
    if isinstance(value, DLDevice):
        return TypeCode.DL_DEVICE
    if isinstance(value, DataType):
        return TypeCode.DATA_TYPE
    if isinstance(value, DLTensor):
        return TypeCode.DL_TENSOR_HANDLE
    raise TypeError(f"cannot send a {type(value).__name__} to the device")


def encode_value(tcode: int, value: Any) -> bytes:
    """Encode one value of type code ``tcode`` as in a packed sequence."""
    if tcode in (TypeCode.INT, TypeCode.UINT):
        return I64.pack(int(value)) if tcode == TypeCode.INT else U64.pack(int(value))
    if tcode == TypeCode.FLOAT:
        return struct.pack("<d", float(value))
    if tcode in (TypeCode.OPAQUE_HANDLE, TypeCode.MODULE_HANDLE, TypeCode.PACKED_FUNC_HANDLE):
        return U64.pack(int(value))
    if tcode == TypeCode.NULLPTR:
        return b""
    if tcode == TypeCode.DATA_TYPE:
        return _DTYPE.pack(*value) + I32.pack(0)
    if tcode == TypeCode.DL_DEVICE:
        return _DEVICE.pack(*value)
    if tcode == TypeCode.STR:
        raw = value.encode("utf-8")
        return U64.pack(len(raw)) + raw
    if tcode == TypeCode.BYTES:
        raw = bytes(value)
        return U64.pack(len(raw)) + raw
    if tcode == TypeCode.DL_TENSOR_HANDLE:
        return encode_tensor(value)
    raise TypeError(f"type code {tcode} cannot travel in a packed sequence")


def encode_packed_seq(args: Sequence[Any], type_codes: Sequence[int] | None = None) -> bytes:
    """Encode ``args`` (type codes inferred from the Python types unless given)."""
    codes = (
        [int(c) for c in type_codes] if type_codes is not None else [_type_code(a) for a in args]
    )
    if len(codes) != len(args):
        raise ValueError("args and type_codes differ in length")
    parts = [I32.pack(len(args))]
    if args:
        parts.append(struct.pack(f"<{len(codes)}i", *codes))
    parts += [encode_value(c, a) for c, a in zip(codes, args, strict=True)]
    return b"".join(parts)


def decode_packed_seq(buf: bytes | memoryview, pos: int = 0) -> tuple[list[tuple[int, Any]], int]:
    """Decode a packed sequence at ``buf[pos:]``: ``([(type_code, value), ...], new_pos)``."""
    try:
        (n,) = I32.unpack_from(buf, pos)
        pos += 4
        if n < 0 or n * 4 > len(buf) - pos:
            raise SessionDesyncError(f"malformed packed sequence: {n} arguments")
        codes = struct.unpack_from(f"<{n}i", buf, pos)
        pos += 4 * n
        out: list[tuple[int, Any]] = []
        for code in codes:
            value: Any
            if code == TypeCode.INT:
                (value,) = I64.unpack_from(buf, pos)
                pos += 8
            elif code == TypeCode.UINT:
                (value,) = U64.unpack_from(buf, pos)
                pos += 8
            elif code == TypeCode.FLOAT:
                (value,) = struct.unpack_from("<d", buf, pos)
                pos += 8
            elif code in (
                TypeCode.OPAQUE_HANDLE,
                TypeCode.MODULE_HANDLE,
                TypeCode.PACKED_FUNC_HANDLE,
            ):
                (raw,) = U64.unpack_from(buf, pos)
                pos += 8
                value = {
                    TypeCode.OPAQUE_HANDLE: OpaqueHandle,
                    TypeCode.MODULE_HANDLE: ModuleHandle,
                    TypeCode.PACKED_FUNC_HANDLE: FunctionHandle,
                }[TypeCode(code)](raw)
            elif code == TypeCode.NULLPTR:
                value = None
            elif code == TypeCode.DATA_TYPE:
                value = DataType(*_DTYPE.unpack_from(buf, pos))
                pos += 8
            elif code == TypeCode.DL_DEVICE:
                value = DLDevice(*_DEVICE.unpack_from(buf, pos))
                pos += 8
            elif code in (TypeCode.STR, TypeCode.BYTES):
                (length,) = U64.unpack_from(buf, pos)
                pos += 8
                if length > len(buf) - pos:
                    raise SessionDesyncError(f"malformed packed sequence: {length}-byte string overruns")
                raw_bytes = bytes(buf[pos : pos + length])
                pos += length
                value = (
                    raw_bytes.decode("utf-8", errors="replace")
                    if code == TypeCode.STR
                    else raw_bytes
                )
            elif code == TypeCode.DL_TENSOR_HANDLE:
                value, pos = decode_tensor(buf, pos)
            else:
                raise SessionDesyncError(f"malformed packed sequence: type code {code} cannot be decoded")
            out.append((code, value))
        return out, pos
    except struct.error as err:
        raise SessionDesyncError(f"malformed packed sequence: truncated ({err})") from err


# --- packets ---------------------------------------------------------------------------------


def make_packet(code: int, body: bytes = b"") -> bytes:
    """``[u64 nbytes][i32 code][body]``."""
    return U64.pack(4 + len(body)) + I32.pack(int(code)) + body


def call_func_packet(
    handle: int, args: Sequence[Any], type_codes: Sequence[int] | None = None
) -> bytes:
    return make_packet(RPCCode.CALL_FUNC, U64.pack(handle) + encode_packed_seq(args, type_codes))


def syscall_packet(
    code: RPCCode, args: Sequence[Any], type_codes: Sequence[int] | None = None
) -> bytes:
    if code < RPCCode.GET_GLOBAL_FUNC:
        raise ValueError(f"{code!r} is not a syscall")
    return make_packet(code, encode_packed_seq(args, type_codes))


def copy_to_remote_packet(dst: DLTensor, data: bytes | memoryview) -> bytes:
    """kCopyToRemote of ``data`` into ``dst.data + dst.byte_offset``."""
    data = memoryview(data).cast("B")
    body = encode_tensor(dst) + U64.pack(len(data))
    head = U64.pack(4 + len(body) + len(data)) + I32.pack(RPCCode.COPY_TO_REMOTE) + body
    return b"".join((head, data))  # the one copy of the tensor bytes


def copy_from_remote_packet(src: DLTensor, nbytes: int) -> bytes:
    return make_packet(RPCCode.COPY_FROM_REMOTE, encode_tensor(src) + U64.pack(nbytes))


def copy_overhead_bytes(ndim: int) -> int:
    """Bytes of a copy packet besides the data: code, DLTensor, nbytes (§4.6: 44 + 8·ndim)."""
    return 4 + 8 + 8 + 4 + 4 + 8 + 8 * ndim + 8


@dataclass
class Reply:
    """A decoded reply packet: kReturn values, kCopyAck data, or an exception message."""

    code: RPCCode
    values: list[tuple[int, Any]] = field(default_factory=list)
    data: bytes = b""
    message: str = ""


def decode_packet(packet: bytes | memoryview) -> tuple[int, memoryview]:
    """Split ``[u64 nbytes][i32 code][body]``; check the length against the message."""
    if len(packet) < 12:
        raise SessionDesyncError(f"malformed RPC packet: {len(packet)} bytes is shorter than a header")
    (nbytes,) = U64.unpack_from(packet, 0)
    if nbytes != len(packet) - 8:
        raise SessionDesyncError(
            f"malformed RPC packet: length field says {nbytes} bytes but {len(packet) - 8} arrived"
        )
    (code,) = I32.unpack_from(packet, 8)
    return code, memoryview(packet)[12:]


def decode_reply(packet: bytes | memoryview) -> Reply:
    code, body = decode_packet(packet)
    if code == RPCCode.COPY_ACK:
        return Reply(RPCCode.COPY_ACK, data=bytes(body))
    if code == RPCCode.RETURN:
        values, end = decode_packed_seq(body)
        if end != len(body):
            raise SessionDesyncError(f"malformed reply: {len(body) - end} trailing bytes")
        return Reply(RPCCode.RETURN, values=values)
    if code == RPCCode.EXCEPTION:
        values, _ = decode_packed_seq(body)
        message = next((v for c, v in values if c == TypeCode.STR), "")
        return Reply(RPCCode.EXCEPTION, message=message)
    raise SessionDesyncError(f"unexpected RPC reply code {code}")


def return_value(values: list[tuple[int, Any]]) -> Any:
    """Interpret a kCallFunc reply (§4.6 convention: ``[kDLInt actual_tcode][value...]``)."""
    if not values or values[0][0] != TypeCode.INT:
        raise SessionDesyncError(f"malformed kCallFunc reply: {values!r}")
    actual = values[0][1]
    rest = values[1:]
    if actual == TypeCode.NULLPTR:
        return None
    if actual == TypeCode.NDARRAY_HANDLE:
        if len(rest) != 2 or not isinstance(rest[0][1], DLTensor):
            raise SessionDesyncError(f"malformed NDArray return: {rest!r}")
        return NDArray(rest[0][1], int(rest[1][1]))
    if len(rest) != 1:
        raise SessionDesyncError(f"malformed kCallFunc reply: {values!r}")
    value = rest[0][1]
    if actual == TypeCode.MODULE_HANDLE:
        return ModuleHandle(value)
    if actual == TypeCode.PACKED_FUNC_HANDLE:
        return FunctionHandle(value)
    return value


# --- client ----------------------------------------------------------------------------------


class Channel(Protocol):
    """What the client needs from the session: one packet out, one packet back."""

    def send(self, packet: bytes) -> None: ...

    def receive(self, max_wait_sec: float | None = None) -> bytes: ...

    # Channels may also take ``timeout_sec=`` and ``what=`` keywords (SessionChannel does);
    # the client passes them only when a caller asked for a specific wait.

    def set_max_payload_bytes(self, n: int) -> None: ...


#: How many copy requests the client keeps in flight when the channel does not say
#: (``Channel.pipeline_depth``, optional): 1, strictly one request then its reply.
DEFAULT_PIPELINE_DEPTH = 1

#: Session header (3) + frame start (2) + length (4) + CRC (2): what the device's
#: ``TVM_CRT_MAX_PACKET_SIZE_BYTES`` covers beyond the value GetCRTMaxPacketSize reports.
FRAME_OVERHEAD_BYTES = 11


def _keywords_of(function: Callable[..., Any]) -> frozenset[str]:
    """The keyword arguments ``function`` accepts (all of ours when it takes ``**kwargs``)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return frozenset({"timeout_sec", "what"})
    return frozenset(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


class RPCClient:
    """Synchronous client for a MinRPC device: one request, one reply.

    Copies are split into packets that fit the device's receive buffer, learned once from
    ``tvm.rpc.server.GetCRTMaxPacketSize``.
    """

    def __init__(self, channel: Channel,
                 block_sizer: Callable[[int], int] | None = None) -> None:
        self.channel = channel
        self._max_packet: int | None | bool = False  # False: not asked yet; None: no limit
        self._receive_keywords = _keywords_of(channel.receive)
        #: Cuts a copy's block (what fits the device's packets) smaller, e.g. on a noisy link
        #: (:meth:`Recovery.block_bytes <project_api.micro.recovery.Recovery.block_bytes>`).
        self.block_sizer = block_sizer

    def request(
        self,
        packet: bytes,
        max_wait_sec: float | None = None,
        *,
        timeout_sec: float | None = None,
        what: str | None = None,
    ) -> Reply:
        """Send one request packet and return its decoded reply.

        ``timeout_sec`` replaces the channel's usual wait for this reply (0: forever) and
        ``what`` names the request in a timeout message. An exception reply raises
        :class:`RPCError` with the device's message (or :class:`SessionTimeoutError` when the
        device reports ``RPCSessionTimeoutError: ...``).
        """
        self.channel.send(packet)
        kwargs: dict[str, Any] = {}
        if timeout_sec is not None:
            if "timeout_sec" not in self._receive_keywords:
                raise SessionError(f"{type(self.channel).__name__}.receive takes no timeout_sec")
            kwargs["timeout_sec"] = timeout_sec
        if what is not None and "what" in self._receive_keywords:
            kwargs["what"] = what
        if max_wait_sec is not None:
            raw = self.channel.receive(max_wait_sec, **kwargs)
        else:
            raw = self.channel.receive(**kwargs)
        return self._checked(raw)

    def _desync(self, text: str) -> SessionDesyncError:
        """A reply that does not fit its request: the channel is put out of step."""
        self.lose_step(text)
        return SessionDesyncError(text)

    def lose_step(self, reason: str) -> None:
        """Put the channel out of step (when it can be): a reply did not fit its request."""
        lose = getattr(self.channel, "lose_step", None)
        if lose is not None:
            lose(reason)

    def syscall(
        self, code: RPCCode, *args: Any, max_wait_sec: float | None = None,
        what: str | None = None,
    ) -> list[tuple[int, Any]]:
        reply = self.request(
            syscall_packet(code, args), max_wait_sec, what=what or f"the {code.name} syscall"
        )
        if reply.code != RPCCode.RETURN:
            raise self._desync(f"{code.name}: expected a return, got {reply.code.name}")
        return reply.values

    def get_global_func(self, name: str) -> FunctionHandle | None:
        """The handle of global function ``name``, or None if the device has none."""
        values = self.syscall(RPCCode.GET_GLOBAL_FUNC, name, what=f"looking up {name}")
        if len(values) != 1 or values[0][0] not in (TypeCode.OPAQUE_HANDLE, TypeCode.NULLPTR):
            raise self._desync(f"malformed kGetGlobalFunc reply: {values!r}")
        handle = values[0][1]
        return FunctionHandle(handle) if handle else None

    def call(
        self, handle: int, *args: Any, timeout_sec: float | None = None, what: str | None = None
    ) -> Any:
        """Call a device function; return its value (NDArray, handles, int, str, bytes, None...).

        ``timeout_sec`` and ``what`` are as for :meth:`request`.
        """
        reply = self.request(call_func_packet(handle, args), timeout_sec=timeout_sec, what=what)
        if reply.code != RPCCode.RETURN:
            raise self._desync(f"kCallFunc: expected a return, got {reply.code.name}")
        try:
            return return_value(reply.values)
        except SessionDesyncError as err:
            raise self._desync(str(err)) from None

    def free_handle(self, handle: int, type_code: int, max_wait_sec: float | None = None) -> None:
        """Release an NDArray (13), function (10) or module (9) handle on the device."""
        self.syscall(
            RPCCode.FREE_HANDLE, OpaqueHandle(handle), int(type_code), max_wait_sec=max_wait_sec
        )

    def alloc(self, shape: Sequence[int], dtype: DataType, device: DLDevice = CPU) -> DLTensor:
        """Allocate device memory for a tensor (kDevAllocDataWithScope); return the tensor."""
        template = DLTensor(0, device, dtype, tuple(int(s) for s in shape))
        values = self.syscall(RPCCode.DEV_ALLOC_DATA_WITH_SCOPE, template, None)
        if len(values) != 1 or values[0][0] not in (TypeCode.OPAQUE_HANDLE, TypeCode.NULLPTR):
            raise self._desync(f"malformed kDevAllocDataWithScope reply: {values!r}")
        if not values[0][1]:
            raise RPCError(f"the device could not allocate {template.nbytes} bytes")
        return DLTensor(int(values[0][1]), device, dtype, template.shape)

    def free_data(self, tensor: DLTensor) -> None:
        self.syscall(RPCCode.DEV_FREE_DATA, tensor.device, OpaqueHandle(tensor.data))

    def stream_sync(self, device: DLDevice = CPU) -> None:
        self.syscall(RPCCode.DEV_STREAM_SYNC, device, OpaqueHandle(0))

    @property
    def max_packet_bytes(self) -> int | None:
        """The device's RPC packet limit (GetCRTMaxPacketSize), or None when it has none."""
        if self._max_packet is False:
            fn = self.get_global_func("tvm.rpc.server.GetCRTMaxPacketSize")
            size = None if fn is None else int(self.call(fn))
            if size is not None:
                if size <= 0:
                    raise SessionError(f"the device reports a packet size of {size} bytes")
                self.channel.set_max_payload_bytes(size + FRAME_OVERHEAD_BYTES)
            self._max_packet = size
        return self._max_packet  # type: ignore[return-value]

    def learn_limits(self, earlier: RPCClient) -> None:
        """Take the device's packet limit as ``earlier`` (a client of an earlier session with
        the same firmware) learned it, sparing the call."""
        if earlier._max_packet is not False and self._max_packet is False:
            self._max_packet = earlier._max_packet
            if earlier._max_packet is not None:
                self.channel.set_max_payload_bytes(int(earlier._max_packet) + FRAME_OVERHEAD_BYTES)

    def _block_bytes(self, tensor: DLTensor) -> int | None:
        limit = self.max_packet_bytes
        if limit is None:
            return None
        block = limit - copy_overhead_bytes(tensor.ndim)
        if block <= 0:
            raise SessionError(
                f"the device's packet size ({limit} B) cannot carry a {tensor.ndim}-d tensor copy"
            )
        if self.block_sizer is not None:
            block = max(1, min(block, self.block_sizer(block)))
        return block

    @property
    def pipeline_depth(self) -> int:
        """Copy requests in flight at once: the channel's ``pipeline_depth``, else 1."""
        return max(1, int(getattr(self.channel, "pipeline_depth", DEFAULT_PIPELINE_DEPTH)))

    def _checked(self, raw: bytes) -> Reply:
        try:
            reply = decode_reply(raw)
        except SessionDesyncError as err:
            self.lose_step(str(err))
            raise
        if reply.code == RPCCode.EXCEPTION:
            if reply.message.startswith("RPCSessionTimeoutError: "):
                raise SessionTimeoutError(reply.message)
            error = RPCError(f"Error caught from RPC call:\n{reply.message}")
            error.device_message = reply.message  # type: ignore[attr-defined]
            raise error
        return reply

    def _pipelined(self, packets: Iterator[bytes], on_reply: Callable[[Reply], None]) -> None:
        """Send ``packets`` with up to :attr:`pipeline_depth` in flight; replies in order.

        The device answers requests in order, so the n-th reply is the n-th packet's. A reply
        that is an error stops further sending; the replies still owed are read (so the next
        request meets its own reply) and then the first error is raised.
        """
        depth = self.pipeline_depth
        in_flight = 0
        error: Exception | None = None
        while True:
            if error is None and in_flight < depth:
                packet = next(packets, None)
                if packet is not None:
                    self.channel.send(packet)
                    in_flight += 1
                    continue
            if in_flight == 0:
                break
            raw = self.channel.receive()
            in_flight -= 1
            try:
                reply = self._checked(raw)
                if error is None:
                    on_reply(reply)
            except SessionDesyncError as err:
                self.lose_step(str(err))
                raise
            except (RPCError, SessionError) as err:
                error = error or err
        if error is not None:
            raise error

    def copy_to_remote(self, tensor: DLTensor, data: bytes | memoryview) -> None:
        """Write ``data`` to the device tensor, in as many packets as its buffer needs."""
        view = memoryview(data).cast("B")
        block = self._block_bytes(tensor) or max(len(view), 1)

        def packets() -> Iterator[bytes]:
            for offset in range(0, len(view), block):
                dst = DLTensor(
                    tensor.data, tensor.device, tensor.dtype, tensor.shape,
                    tensor.byte_offset + offset,
                )
                yield copy_to_remote_packet(dst, view[offset : offset + block])

        def check(reply: Reply) -> None:
            if reply.code != RPCCode.RETURN:
                raise self._desync(f"kCopyToRemote: expected a return, got {reply.code.name}")

        self._pipelined(packets(), check)

    def copy_from_remote(self, tensor: DLTensor, nbytes: int | None = None) -> bytes:
        """Read ``nbytes`` (default: the whole tensor) from the device, in packets that fit."""
        total = tensor.nbytes if nbytes is None else nbytes
        block = self._block_bytes(tensor)
        if block is None:
            # No device limit: one reply carries everything, so let the receiver accept it.
            block = max(total, 1)
            self.channel.set_max_payload_bytes(max(block + 64, 64 * 1024))
        sizes = [min(block, total - offset) for offset in range(0, total, block)]
        pieces: list[bytes] = []

        def packets() -> Iterator[bytes]:
            for offset, n in zip(range(0, total, block), sizes, strict=True):
                src = DLTensor(
                    tensor.data, tensor.device, tensor.dtype, tensor.shape,
                    tensor.byte_offset + offset,
                )
                yield copy_from_remote_packet(src, n)

        def collect(reply: Reply) -> None:
            n = sizes[len(pieces)]
            if reply.code != RPCCode.COPY_ACK or len(reply.data) != n:
                raise self._desync(
                    f"kCopyFromRemote: expected {n} bytes of CopyAck, got {reply.code.name} "
                    f"with {len(reply.data)} bytes"
                )
            pieces.append(reply.data)

        self._pipelined(packets(), collect)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

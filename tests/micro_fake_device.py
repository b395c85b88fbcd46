"""An in-Python device for the micro host tests: a session responder plus a small MinRPC server.

It speaks the wire protocol through the same SessionProtocol the host uses, but its RPC side is
written here from the spec (§4.6/§4.7), independently of the host's client: it parses request
packets with ``struct`` and enforces the device's receive buffer (``max_packet_size``), so a host
that sends an oversized packet is caught.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from project_api.api.server import TransportTimeouts
from project_api.errors import IoTimeoutError, TransportClosedError
from project_api.micro.framing import Framer
from project_api.micro.rpc import (
    DataType,
    DLTensor,
    TypeCode,
    decode_packed_seq,
    decode_tensor,
    encode_packed_seq,
)
from project_api.micro.session import EventKind, MessageType, SessionProtocol

Timeouts = TransportTimeouts


def reply_packet(code: int, body: bytes) -> bytes:
    return struct.pack("<Qi", 4 + len(body), code) + body


def return_values(codes: list[int], values: list[Any]) -> bytes:
    return reply_packet(4, encode_packed_seq(values, codes))


def exception_packet(message: str) -> bytes:
    return reply_packet(5, encode_packed_seq([message], [TypeCode.STR]))


@dataclass
class FakeTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    address: int = 0


@dataclass
class FakeModel:
    """inputs/outputs as (name, dtype, shape); ``compute`` maps input arrays to output arrays."""

    inputs: list[tuple[str, str, tuple[int, ...]]]
    outputs: list[tuple[str, str, tuple[int, ...]]]
    compute: Callable[[list[np.ndarray]], list[np.ndarray]]
    runs: int = 0


@dataclass
class FakeDevice:
    max_packet_size: int = 2048  # TVM_CRT_MAX_PACKET_SIZE_BYTES
    nonce: int = 0xAB
    models: dict[str, FakeModel] = field(default_factory=dict)
    with_packet_size_func: bool = True
    device_type: int = 1  # of the tensors get_input/get_output return (1 = kDLCPU)
    #: Emulated seconds one model run keeps the device busy: its reply becomes readable that
    #: much later (FakeTransport waits for it, or times out), and the time evaluator counts it.
    run_sec: float = 0.0
    #: Like TVM v0.15's own C runtime (aot_executor_module.c): the AOT executor lives in a
    #: static, is created at most once per boot and freeing its module does not reset it; a
    #: second create fails with kTvmErrorExecutorModuleAlreadyCreated, without setting an error
    #: string, so the reply carries ``last_error``, whatever it was (empty, or stale).
    executor_once_per_boot: bool = False

    def __post_init__(self) -> None:
        self.output = bytearray()
        self.memory: dict[int, bytearray] = {}
        self.next_address = 0x10000
        self.handles: dict[int, Callable[..., bytes]] = {}
        self.live_ndarrays: set[int] = set()
        self.freed: list[tuple[int, int]] = []
        self.stream_syncs = 0
        self.largest_payload = 0
        self.requests: list[int] = []
        self.executors: dict[int, tuple[FakeModel, list[FakeTensor], list[FakeTensor]]] = {}
        self.globals: dict[str, int] = {}
        self.time_evaluators = 0
        self.live_executors: set[int] = set()
        self.silent = False  # when set, requests get no reply (a hung device)
        self.ready_at = 0.0  # time.monotonic() when the queued output becomes readable
        self.busy_sec = 0.0  # emulated work (run_sec per run) done so far
        self.last_error = ""  # TVMGetLastError() of a device running TVM's C runtime
        self._next_handle = 0x80028000
        for name, fn in [
            ("runtime.SystemLib", self._system_lib),
            ("tvm.rpc.server.ModuleGetFunction", self._module_get_function),
            ("runtime.RPCTimeEvaluator", self._time_evaluator),
            ("tvm.aot_executor.create", self._aot_create),
        ]:
            self.globals[name] = self._register(fn)
        if self.with_packet_size_func:
            self.globals["tvm.rpc.server.GetCRTMaxPacketSize"] = self._register(
                lambda: self._ret(TypeCode.INT, self.max_packet_size - 11)
            )
        self.module_functions: dict[int, dict[str, int]] = {}
        self.boot()

    # --- session --------------------------------------------------------------------------

    def boot(self) -> None:
        """(Re)start: a fresh session layer that announces itself with FE + TerminateSession."""
        self.session = SessionProtocol(max_payload_bytes=self.max_packet_size)
        self.executor_created = False  # TVM's static aot_executor is zeroed by a reset
        self.session.initialize(self.nonce)
        self.output += self.session.take_output()

    def log(self, text: str) -> None:
        self.session.send_message(MessageType.LOG, text.encode())
        self.output += self.session.take_output()

    def receive(self, data: bytes) -> None:
        busy_before = self.busy_sec
        for event in self.session.receive(data):
            if event.kind == EventKind.NORMAL:
                self.largest_payload = max(self.largest_payload, len(event.data) + 3)
                reply = self.process(event.data)
                if reply is not None and not self.silent:
                    self.session.send_message(MessageType.NORMAL, reply)
        if self.busy_sec > busy_before:  # the replies come once the emulated work is done
            self.ready_at = max(self.ready_at, time.monotonic()) + (self.busy_sec - busy_before)
        self.output += self.session.take_output()

    # --- RPC ------------------------------------------------------------------------------

    def count(self, code: int, since: int = 0) -> int:
        """How many requests with RPC code ``code`` arrived from ``requests[since]`` on."""
        return self.requests[since:].count(int(code))

    def _register(self, fn: Callable[..., bytes]) -> int:
        handle = self._next_handle
        self._next_handle += 1
        self.handles[handle] = fn
        return handle

    @staticmethod
    def _ret(tcode: int, value: Any) -> bytes:
        """kCallFunc return convention: [kDLInt actual][value]."""
        if tcode == TypeCode.NULLPTR:
            return return_values([TypeCode.INT, TypeCode.NULLPTR], [int(tcode), None])
        wire_code = tcode
        if tcode in (TypeCode.MODULE_HANDLE, TypeCode.PACKED_FUNC_HANDLE):
            wire_code = TypeCode.OPAQUE_HANDLE
        return return_values([TypeCode.INT, wire_code], [int(tcode), value])

    def process(self, packet: bytes) -> bytes | None:
        (nbytes, code) = struct.unpack_from("<Qi", packet)
        assert nbytes == len(packet) - 8, "host sent a packet whose length field is wrong"
        self.requests.append(code)
        body = memoryview(packet)[12:]
        if code == 3:  # kCallFunc
            (handle,) = struct.unpack_from("<Q", body)
            args, end = decode_packed_seq(body, 8)
            assert end == len(body)
            fn = self.handles.get(handle)
            if fn is None:
                return exception_packet(f"no function with handle {handle:#x}")
            return fn(*[v for _, v in args])
        if code == 7:  # kCopyToRemote
            tensor, pos = decode_tensor(body, 0)
            (n,) = struct.unpack_from("<Q", body, pos)
            data = bytes(body[pos + 8 :])
            assert len(data) == n
            buf, off = self._locate(tensor.data + tensor.byte_offset, n)
            buf[off : off + n] = data
            return return_values([TypeCode.NULLPTR], [None])
        if code == 6:  # kCopyFromRemote
            tensor, pos = decode_tensor(body, 0)
            (n,) = struct.unpack_from("<Q", body, pos)
            buf, off = self._locate(tensor.data + tensor.byte_offset, n)
            return reply_packet(8, bytes(buf[off : off + n]))
        args, end = decode_packed_seq(body, 0)
        assert end == len(body)
        values = [v for _, v in args]
        if code == 9:  # kGetGlobalFunc
            return return_values([TypeCode.OPAQUE_HANDLE], [self.globals.get(values[0], 0)])
        if code == 10:  # kFreeHandle
            handle, tcode = values
            self.freed.append((handle, tcode))
            if tcode == TypeCode.NDARRAY_HANDLE:
                self.live_ndarrays.remove(handle)
            elif tcode == TypeCode.MODULE_HANDLE:
                self.live_executors.remove(handle)
            return return_values([TypeCode.NULLPTR], [None])
        if code == 15:  # kDevStreamSync
            self.stream_syncs += 1
            return return_values([TypeCode.NULLPTR], [None])
        if code == 17:  # kDevAllocDataWithScope
            tensor = values[0]
            return return_values([TypeCode.OPAQUE_HANDLE], [self._alloc(tensor.nbytes)])
        return exception_packet("Syscall not recognized")

    def _alloc(self, nbytes: int) -> int:
        address = self.next_address
        self.memory[address] = bytearray(nbytes)
        self.next_address += (nbytes + 0xFFFF) & ~0xFFFF or 0x10000
        return address

    def _locate(self, address: int, n: int) -> tuple[bytearray, int]:
        for base, buf in self.memory.items():
            if base <= address and address + n <= base + len(buf):
                return buf, address - base
        raise AssertionError(f"host accessed unallocated memory {address:#x}+{n}")

    # --- device functions -----------------------------------------------------------------

    def _system_lib(self) -> bytes:
        return self._ret(TypeCode.MODULE_HANDLE, 0x8000)

    def _aot_create(self, module: int, device: Any, name: str) -> bytes:
        assert module == 0x8000 and tuple(device) == (1, 0)
        if self.executor_once_per_boot and self.executor_created:
            return exception_packet(self.last_error)
        model = self.models.get(name)
        if model is None:
            return exception_packet(f"no model named {name}")
        self.executor_created = True
        if self.live_executors:  # like the CRT: one executor at a time
            return exception_packet("kTvmErrorExecutorModuleAlreadyCreated")
        handle = 0x8001 + len(self.executors)
        self.live_executors.add(handle)
        ins = [FakeTensor(n, d, s, self._alloc(_nbytes(d, s))) for n, d, s in model.inputs]
        outs = [FakeTensor(n, d, s, self._alloc(_nbytes(d, s))) for n, d, s in model.outputs]
        self.executors[handle] = (model, ins, outs)
        return self._ret(TypeCode.MODULE_HANDLE, handle)

    def _module_get_function(self, module: int, name: str, query_imports: int) -> bytes:
        model, ins, outs = self.executors[module]
        table = self.module_functions.setdefault(module, {})
        if name not in table:
            fn = getattr(self, f"_exec_{name}", None)
            if fn is None:
                return self._ret(TypeCode.PACKED_FUNC_HANDLE, 0)
            table[name] = self._register(lambda *a, fn=fn: fn(module, *a))
        return self._ret(TypeCode.PACKED_FUNC_HANDLE, table[name])

    def _ndarray(self, t: FakeTensor) -> bytes:
        handle = 0x20000000 + len(self.freed) * 16 + len(self.live_ndarrays)
        while handle in self.live_ndarrays:
            handle += 1
        self.live_ndarrays.add(handle)
        dl = DLTensor(t.address, (self.device_type, 0), DataType.from_numpy(t.dtype), t.shape, 0)
        codes = [TypeCode.INT, TypeCode.DL_TENSOR_HANDLE, TypeCode.OPAQUE_HANDLE]
        return return_values(codes, [int(TypeCode.NDARRAY_HANDLE), dl, handle])

    def _exec_get_input(self, module: int, key: Any) -> bytes:
        _, ins, _ = self.executors[module]
        if isinstance(key, str):
            found = [t for t in ins if t.name == key]
            if not found:
                return exception_packet(f"no input named {key}")
            return self._ndarray(found[0])
        if not 0 <= key < len(ins):
            return exception_packet("input index out of range")
        return self._ndarray(ins[key])

    def _exec_get_output(self, module: int, index: int) -> bytes:
        _, _, outs = self.executors[module]
        return self._ndarray(outs[index])

    def _exec_get_num_inputs(self, module: int) -> bytes:
        return self._ret(TypeCode.INT, len(self.executors[module][1]))

    def _exec_get_num_outputs(self, module: int) -> bytes:
        return self._ret(TypeCode.INT, len(self.executors[module][2]))

    def _exec_get_input_index(self, module: int, name: str) -> bytes:
        names = [t.name for t in self.executors[module][1]]
        return self._ret(TypeCode.INT, names.index(name) if name in names else -1)

    def _exec_get_input_name(self, module: int, index: int) -> bytes:
        return self._ret(TypeCode.STR, self.executors[module][1][index].name)

    def _exec_set_input(self, module: int, *args: Any) -> bytes:
        return exception_packet("set_input is not implemented; use get_input + copy")

    def _exec_run(self, module: int) -> bytes:
        model, ins, outs = self.executors[module]
        arrays = [
            np.frombuffer(self._locate(t.address, _nbytes(t.dtype, t.shape))[0], dtype=t.dtype)
            .reshape(t.shape)
            .copy()
            for t in ins
        ]
        results = model.compute(arrays)
        self.busy_sec += self.run_sec
        for t, r in zip(outs, results, strict=True):
            data = np.ascontiguousarray(r, dtype=t.dtype).tobytes()
            buf, off = self._locate(t.address, len(data))
            buf[off : off + len(data)] = data
        model.runs += 1
        return self._ret(TypeCode.NULLPTR, None)

    def _time_evaluator(self, module: int, name: str, dev_type: int, dev_id: int, number: int,
                        repeat: int, min_repeat_ms: int, limit_zero: int, cooldown_ms: int,
                        repeats_to_cooldown: int, cache_flush_bytes: int, f_preproc: str) -> bytes:  # fmt: skip
        fn_handle = self.module_functions[module][name]
        fn = self.handles[fn_handle]
        self.time_evaluators += 1

        def evaluate() -> bytes:
            fn()  # warm-up
            results = []
            for _ in range(repeat):
                start, busy = time.perf_counter(), self.busy_sec
                for _ in range(number):
                    fn()
                elapsed = time.perf_counter() - start + self.busy_sec - busy
                results.append(elapsed / number)
            payload = struct.pack(f"<{repeat}d", *results)
            return self._ret(TypeCode.BYTES, payload)

        return self._ret(TypeCode.PACKED_FUNC_HANDLE, self._register(evaluate))


def _nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


class FakeTransport:
    """A synchronous transport to a FakeDevice: a write is processed at once, replies queue up.

    ``drop_writes`` loses that many host writes (a lossy link); ``inject`` puts raw bytes in
    front of the device's next output; ``interrupt_reads`` makes that many reads that would
    wait raise KeyboardInterrupt instead (a Ctrl-C while the host waits). Output the device is
    still "computing" (``FakeDevice.run_sec``) is readable only once done. A read that would
    have to wait forever fails the test.
    """

    def __init__(self, device: FakeDevice, timeouts: Any = None) -> None:
        self.device = device
        self._timeouts = timeouts or Timeouts(0, 0, 0)
        self.is_open = False
        self.drop_writes = 0
        self.interrupt_reads = 0
        self.writes: list[bytes] = []
        self.read_sizes: list[int] = []
        self.pending = bytearray()

    def timeouts(self) -> Any:
        return self._timeouts

    def open(self) -> None:
        self.is_open = True

    def close(self) -> None:
        self.is_open = False

    def inject(self, data: bytes) -> None:
        self.pending += data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if not self.is_open:
            raise TransportClosedError()
        self.writes.append(bytes(data))
        if self.drop_writes:
            self.drop_writes -= 1
            return
        self.device.receive(bytes(data))

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if not self.is_open:
            raise TransportClosedError()
        self.read_sizes.append(n)
        wait = self.device.ready_at - time.monotonic()
        if self.device.output and wait > 0 and not self.pending:
            if self.interrupt_reads:
                self.interrupt_reads -= 1
                raise KeyboardInterrupt
            if timeout_sec is not None and timeout_sec < wait:
                time.sleep(timeout_sec)
                raise IoTimeoutError()
            time.sleep(wait)
        if self.device.ready_at <= time.monotonic():
            self.pending += self.device.output
            self.device.output.clear()
        if not self.pending:
            if self.interrupt_reads:
                self.interrupt_reads -= 1
                raise KeyboardInterrupt
            if timeout_sec is None:
                raise AssertionError("host waits forever for a device that will never answer")
            time.sleep(min(timeout_sec, 0.5))
            raise IoTimeoutError()
        out = bytes(self.pending[:n])
        del self.pending[:n]
        return out


def framed(payload: bytes) -> bytes:
    """One frame (no FE prefix) carrying ``payload``."""
    return Framer().frame(payload)[1:]

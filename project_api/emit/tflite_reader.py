"""Read a TFLite flatbuffer into the emitter's :class:`~.graph.Graph`.

This is a small, bounds-checked flatbuffer reader written for untrusted input: every offset and
length is checked against the buffer before use, vectors can never be longer than the bytes that
remain, and nothing recurses. Any malformed file (truncated, bit-flipped, not a TFLite model)
raises :class:`~project_api.errors.EmitError` with a one-line reason; it never crashes or hangs.

Field numbers follow the TFLite schema (``schema.fbs``): a table's field ``i`` sits at vtable
slot ``4 + 2*i``.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from ..errors import EmitError, UnsupportedOperatorError
from .graph import TFLITE_TYPES, Graph, Operator, Quantization, Tensor

# BuiltinOperator codes the emitter knows by name (others are reported by number).
BUILTIN_NAMES = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D",
    6: "DEQUANTIZE", 9: "FULLY_CONNECTED", 14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL",
    19: "RELU", 21: "RELU6", 22: "RESHAPE", 25: "SOFTMAX", 28: "TANH", 40: "MEAN", 41: "SUB",
    114: "QUANTIZE",
}

# BuiltinOptions union type ids of the options we read.
_OPT_CONV = 1
_OPT_DWCONV = 2
_OPT_POOL = 5
_OPT_FC = 8
_OPT_SOFTMAX = 9
_OPT_ADD = 11
_OPT_RESHAPE = 17
_OPT_MUL = 21

_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_PADDINGS = {0: "SAME", 1: "VALID"}


class _Buf:
    """Checked access to a flatbuffer's bytes."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)

    def _need(self, pos: int, n: int, what: str) -> None:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise EmitError(f"corrupt TFLite file: {what} at byte {pos} runs past the end "
                            f"({self.size} bytes); re-export the model")

    def u8(self, pos: int) -> int:
        self._need(pos, 1, "byte")
        return self.data[pos]

    def u16(self, pos: int) -> int:
        self._need(pos, 2, "u16")
        return struct.unpack_from("<H", self.data, pos)[0]

    def i32(self, pos: int) -> int:
        self._need(pos, 4, "i32")
        return struct.unpack_from("<i", self.data, pos)[0]

    def u32(self, pos: int) -> int:
        self._need(pos, 4, "u32")
        return struct.unpack_from("<I", self.data, pos)[0]

    def f32(self, pos: int) -> float:
        self._need(pos, 4, "f32")
        return struct.unpack_from("<f", self.data, pos)[0]

    def u64(self, pos: int) -> int:
        self._need(pos, 8, "u64")
        return struct.unpack_from("<Q", self.data, pos)[0]


class _Table:
    """A flatbuffer table at ``pos``: scalar fields with defaults, vectors, sub-tables."""

    def __init__(self, buf: _Buf, pos: int, what: str):
        self.buf = buf
        self.pos = pos
        self.what = what
        vt = pos - buf.i32(pos)
        self.vt = vt
        self.vt_size = buf.u16(vt)
        if self.vt_size < 4 or self.vt_size % 2:
            raise EmitError(f"corrupt TFLite file: bad vtable for {what}")
        buf._need(vt, self.vt_size, f"vtable of {what}")

    def _field(self, i: int) -> int:
        slot = 4 + 2 * i
        if slot + 2 > self.vt_size:
            return 0
        off = self.buf.u16(self.vt + slot)
        return self.pos + off if off else 0

    def scalar(self, i: int, kind: str, default: int | float = 0) -> int | float:
        p = self._field(i)
        if not p:
            return default
        return {"u8": self.buf.u8, "i32": self.buf.i32, "u32": self.buf.u32, "f32": self.buf.f32,
                "u64": self.buf.u64}[kind](p) if kind != "i8" else struct.unpack(
                    "<b", bytes([self.buf.u8(p)]))[0]

    def _vector(self, i: int, elem_size: int) -> tuple[int, int] | None:
        p = self._field(i)
        if not p:
            return None
        start = p + self.buf.u32(p)
        n = self.buf.u32(start)
        self.buf._need(start + 4, n * elem_size, f"vector in {self.what}")
        return start + 4, n

    def table(self, i: int, what: str) -> _Table | None:
        p = self._field(i)
        if not p:
            return None
        return _Table(self.buf, p + self.buf.u32(p), what)

    def tables(self, i: int, what: str) -> list[_Table]:
        v = self._vector(i, 4)
        if v is None:
            return []
        start, n = v
        return [_Table(self.buf, start + 4 * k + self.buf.u32(start + 4 * k), f"{what}[{k}]")
                for k in range(n)]

    def array(self, i: int, dtype: str) -> np.ndarray | None:
        dt = np.dtype(dtype).newbyteorder("<")
        v = self._vector(i, dt.itemsize)
        if v is None:
            return None
        start, n = v
        return np.frombuffer(self.buf.data, dtype=dt, count=n, offset=start).astype(dtype)

    def string(self, i: int) -> str:
        a = self.array(i, "uint8")
        if a is None:
            return ""
        return a.tobytes().decode("utf-8", errors="replace")


def _parse_quant(t: _Table | None) -> Quantization | None:
    if t is None:
        return None
    scale = t.array(2, "float32")
    zp = t.array(3, "int64")
    if scale is None or len(scale) == 0:
        return None
    if t.scalar(5, "u8") != 0:
        raise UnsupportedOperatorError("custom quantization details are not supported")
    zps = [int(z) for z in zp] if zp is not None and len(zp) else [0] * len(scale)
    if len(zps) != len(scale):
        if len(zps) == 1:
            zps = zps * len(scale)
        else:
            raise EmitError("corrupt TFLite file: quantization scale/zero_point lengths differ")
    return Quantization([float(s) for s in scale], zps, int(t.scalar(6, "i32")))


def _parse_options(kind: int, t: _Table | None, opcode: str) -> dict:
    """Options of a builtin op as a plain dict with TFLite's defaults."""
    if t is None:
        t_scalar = None
    else:
        t_scalar = t.scalar

    def s(i: int, k: str, d: int | float = 0) -> int | float:
        return t_scalar(i, k, d) if t_scalar else d

    def act(i: int) -> str:
        return _ACTIVATIONS.get(int(s(i, "i8")), f"activation {int(s(i, 'i8'))}")

    def pad(i: int) -> str:
        return _PADDINGS.get(int(s(i, "i8")), f"padding {int(s(i, 'i8'))}")

    if opcode == "CONV_2D":
        return {"padding": pad(0), "stride_w": int(s(1, "i32")), "stride_h": int(s(2, "i32")),
                "activation": act(3), "dilation_w": int(s(4, "i32", 1)),
                "dilation_h": int(s(5, "i32", 1))}
    if opcode == "DEPTHWISE_CONV_2D":
        return {"padding": pad(0), "stride_w": int(s(1, "i32")), "stride_h": int(s(2, "i32")),
                "depth_multiplier": int(s(3, "i32")), "activation": act(4),
                "dilation_w": int(s(5, "i32", 1)), "dilation_h": int(s(6, "i32", 1))}
    if opcode in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        return {"padding": pad(0), "stride_w": int(s(1, "i32")), "stride_h": int(s(2, "i32")),
                "filter_w": int(s(3, "i32")), "filter_h": int(s(4, "i32")), "activation": act(5)}
    if opcode == "FULLY_CONNECTED":
        return {"activation": act(0), "weights_format": int(s(1, "i8")),
                "keep_num_dims": bool(s(2, "u8")), "asymmetric_quantize_inputs": bool(s(3, "u8"))}
    if opcode == "SOFTMAX":
        return {"beta": float(s(0, "f32", 0.0))}
    if opcode == "ADD":
        return {"activation": act(0)}
    if opcode == "MUL":
        return {"activation": act(0)}
    if opcode == "RESHAPE":
        ns = t.array(0, "int32") if t is not None else None
        return {"new_shape": None if ns is None else [int(x) for x in ns]}
    return {}


_EXPECTED_OPTIONS = {"CONV_2D": _OPT_CONV, "DEPTHWISE_CONV_2D": _OPT_DWCONV,
                     "AVERAGE_POOL_2D": _OPT_POOL, "MAX_POOL_2D": _OPT_POOL,
                     "FULLY_CONNECTED": _OPT_FC, "SOFTMAX": _OPT_SOFTMAX, "ADD": _OPT_ADD,
                     "RESHAPE": _OPT_RESHAPE, "MUL": _OPT_MUL}


def read_tflite(model: bytes | bytearray | str | Path) -> Graph:
    """Parse a TFLite flatbuffer (bytes or a path) into a :class:`Graph`.

    Raises :class:`EmitError` for anything that is not a well-formed single-subgraph TFLite
    model, and :class:`UnsupportedOperatorError` for custom operators.
    """
    if isinstance(model, (str, Path)):
        try:
            data = Path(model).read_bytes()
        except OSError as e:
            raise EmitError(f"cannot read model {model}: {e.strerror}") from None
    else:
        data = bytes(model)
    if len(data) < 8:
        raise EmitError(f"not a TFLite model: only {len(data)} bytes")
    if data[4:8] != b"TFL3":
        raise EmitError("not a TFLite model: file identifier is not 'TFL3' (expected a .tflite "
                        "flatbuffer)")
    try:
        return _read(data)
    except EmitError:
        raise
    except (struct.error, ValueError, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise EmitError(f"corrupt TFLite file: {e}") from None


def _read(data: bytes) -> Graph:
    buf = _Buf(data)
    root = _Table(buf, buf.u32(0), "Model")
    version = int(root.scalar(0, "u32"))
    if version != 3:
        raise EmitError(f"unsupported TFLite schema version {version} (expected 3)")
    opcodes: list[str] = []
    for oc in root.tables(1, "OperatorCode"):
        code = max(int(oc.scalar(0, "i8")), int(oc.scalar(3, "i32")))
        if code == 32:  # CUSTOM
            opcodes.append(f"CUSTOM:{oc.string(1)}")
        else:
            opcodes.append(BUILTIN_NAMES.get(code, f"builtin operator {code}"))
    buffers = root.tables(4, "Buffer")
    subgraphs = root.tables(2, "SubGraph")
    if len(subgraphs) != 1:
        raise UnsupportedOperatorError(
            f"the model has {len(subgraphs)} subgraphs; only single-subgraph models are supported")
    sg = subgraphs[0]

    def buffer_bytes(idx: int) -> bytes | None:
        if idx == 0 or idx >= len(buffers):
            if idx >= len(buffers) and idx != 0:
                raise EmitError(f"corrupt TFLite file: buffer index {idx} out of range")
            return None
        b = buffers[idx]
        arr = b.array(0, "uint8")
        if arr is not None and len(arr):
            return arr.tobytes()
        off = int(b.scalar(1, "u64"))
        size = int(b.scalar(2, "u64"))
        if off > 1:
            buf._need(off, size, f"buffer {idx}")
            return data[off:off + size]
        return None

    tensors: list[Tensor] = []
    for i, t in enumerate(sg.tables(0, "Tensor")):
        shape_arr = t.array(0, "int32")
        shape = tuple(int(x) for x in shape_arr) if shape_arr is not None else ()
        if any(d < 0 for d in shape):
            raise UnsupportedOperatorError(
                f"tensor {i} has a dynamic shape {list(shape)}; only static shapes are supported")
        ttype = int(t.scalar(1, "i8"))
        name = t.string(3) or f"tensor_{i}"
        if ttype not in TFLITE_TYPES:
            raise UnsupportedOperatorError(f"tensor {i} '{name}' has unsupported type {ttype}")
        if t.scalar(6, "u32") != 0:
            raise UnsupportedOperatorError(f"tensor {i} '{name}' is sparse; not supported")
        dtype, np_dtype = TFLITE_TYPES[ttype]
        raw = buffer_bytes(int(t.scalar(2, "u32")))
        arr = None
        if raw is not None:
            n = 1
            for d in shape:
                n *= d
            itemsize = np.dtype(np_dtype).itemsize
            if len(raw) != n * itemsize:
                raise EmitError(f"corrupt TFLite file: tensor {i} '{name}' holds {len(raw)} "
                                f"bytes of data, shape {list(shape)} needs {n * itemsize}")
            arr = np.frombuffer(raw, dtype=np.dtype(np_dtype).newbyteorder("<")).astype(
                np_dtype).reshape(shape)
        tensors.append(Tensor(i, name, dtype, shape, _parse_quant(t.table(4, "Quantization")), arr))

    def indices(a: np.ndarray | None, what: str, allow_absent: bool) -> list[int]:
        out = [] if a is None else [int(x) for x in a]
        for x in out:
            if not (0 <= x < len(tensors) or (allow_absent and x == -1)):
                raise EmitError(f"corrupt TFLite file: {what} refers to tensor {x} of "
                                f"{len(tensors)}")
        return out

    operators: list[Operator] = []
    for k, o in enumerate(sg.tables(3, "Operator")):
        oc = int(o.scalar(0, "u32"))
        if oc >= len(opcodes):
            raise EmitError(f"corrupt TFLite file: node {k} uses opcode {oc} of {len(opcodes)}")
        opcode = opcodes[oc]
        ins = indices(o.array(1, "int32"), f"node {k} inputs", True)
        outs = indices(o.array(2, "int32"), f"node {k} outputs", False)
        opt_type = int(o.scalar(3, "u8"))
        expected = _EXPECTED_OPTIONS.get(opcode)
        opt_table = o.table(4, "options")
        if expected is not None and opt_table is not None and opt_type != expected:
            raise EmitError(f"corrupt TFLite file: node {k} {opcode} has options of type "
                            f"{opt_type}")
        options = _parse_options(opt_type, opt_table, opcode)
        operators.append(Operator(k, opcode, ins, outs, options))

    return Graph(tensors, operators, indices(sg.array(1, "int32"), "subgraph inputs", False),
                 indices(sg.array(2, "int32"), "subgraph outputs", False),
                 root.string(3))

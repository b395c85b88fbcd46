"""The model builder writes valid TFLite: both interpreters load its models, the ``tflite``
package reads back the operators and options asked for, and float32 results match numpy.

The numpy reference here reads weights, biases and options back from the serialized model
(with the ``tflite`` package's generated reader), not from the builder's own state, so a
builder bug in layout or quantization shows up as a mismatch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import tflite

from project_api.emit import reference as R
from project_api.tflite import builder as B

# (op, options) cases; every case runs in each mode its op supports.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("CONV_2D", {}),
    ("CONV_2D", {"stride": 2, "padding": "VALID", "activation": "RELU"}),
    ("CONV_2D", {"dilation": 2, "activation": "RELU6", "kernel_size": (3, 2)}),
    ("CONV_2D", {"stride": (2, 1), "padding": "SAME", "filters": 6}),
    ("DEPTHWISE_CONV_2D", {}),
    ("DEPTHWISE_CONV_2D", {"depth_multiplier": 2, "stride": 2, "padding": "VALID",
                           "activation": "RELU"}),
    ("DEPTHWISE_CONV_2D", {"dilation": 2, "activation": "RELU6"}),
    ("FULLY_CONNECTED", {}),
    ("FULLY_CONNECTED", {"bias": False, "activation": "RELU"}),
    ("FULLY_CONNECTED", {"keep_num_dims": True, "input_shape": (1, 2, 12)}),
    ("FULLY_CONNECTED", {"input_shape": (3, 12)}),
    ("AVERAGE_POOL_2D", {}),
    ("AVERAGE_POOL_2D", {"filter_size": 3, "stride": 1, "padding": "SAME"}),
    ("AVERAGE_POOL_2D", {"filter_size": (3, 2), "stride": 2, "padding": "SAME",
                         "activation": "RELU6"}),
    ("MAX_POOL_2D", {}),
    ("MAX_POOL_2D", {"filter_size": 3, "stride": 1, "padding": "SAME", "activation": "RELU"}),
    ("MAX_POOL_2D", {"filter_size": (2, 3), "stride": 2, "padding": "VALID"}),
    ("ADD", {}),
    ("ADD", {"b_shape": (1, 1, 1, 3), "activation": "RELU"}),
    ("ADD", {"b_shape": (3,), "b_input": False}),
    ("MUL", {}),
    ("MUL", {"b_shape": (1, 4, 1, 1), "activation": "RELU6"}),
    ("MUL", {"b_shape": (1, 4, 4, 3), "b_input": False}),
    ("RESHAPE", {}),
    ("RESHAPE", {"shape": (1, 12, 4), "shape_input": False}),
    ("SOFTMAX", {}),
    ("SOFTMAX", {"beta": 0.5}),
    ("QUANTIZE", {}),
    ("DEQUANTIZE", {}),
    ("SQUEEZE", {}),
    ("SQUEEZE", {"dims": (-2,), "input_shape": (2, 1, 3)}),
    ("EXPAND_DIMS", {"axis": 1}),
    ("EXPAND_DIMS", {"axis": -1, "input_shape": (2, 5)}),
    # shape and data movement (issue 20)
    ("PAD", {}),
    ("PAD", {"paddings": ((1, 0), (0, 2)), "input_shape": (2, 3)}),
    ("PADV2", {"value": -0.25}),
    ("MIRROR_PAD", {}),
    ("MIRROR_PAD", {"padding_mode": "SYMMETRIC", "paddings": ((2, 1), (0, 3)), "input_shape": (3, 4)}),
    ("CONCATENATION", {}),
    ("CONCATENATION", {"axis": 0, "b_shape": (2, 4, 4, 3), "b_input": False}),
    ("SPLIT", {}),
    ("SPLIT", {"num_splits": 3, "axis": 0, "input_shape": (6, 2)}),
    ("SPLIT_V", {}),
    ("SLICE", {}),
    ("SLICE", {"begin": (1, 0), "size": (-1, 2), "input_shape": (3, 4), "index_dtype": "int64"}),
    ("STRIDED_SLICE", {}),
    ("STRIDED_SLICE", {"begin": (0, 1), "end": (0, 3), "strides": (1, 1), "begin_mask": 1,
                       "end_mask": 1, "shrink_axis_mask": 2, "input_shape": (3, 4)}),
    ("TRANSPOSE", {}),
    ("TRANSPOSE", {"perm": (1, 0), "input_shape": (3, 5)}),
    ("PACK", {}),
    ("PACK", {"axis": -1, "b_input": False}),
    ("UNPACK", {}),
    ("GATHER", {}),
    ("GATHER", {"indices": ((1, 0), (2, 2)), "axis": 1, "input_shape": (2, 3, 2)}),
    ("GATHER_ND", {}),
    ("SHAPE", {}),
    ("BROADCAST_TO", {}),
    ("DEPTH_TO_SPACE", {}),
    ("SPACE_TO_DEPTH", {}),
    ("BATCH_TO_SPACE_ND", {}),
    ("SPACE_TO_BATCH_ND", {"paddings": ((0, 0), (0, 0))}),
    ("RESIZE_NEAREST_NEIGHBOR", {}),
    ("RESIZE_NEAREST_NEIGHBOR", {"size": (2, 2), "align_corners": True}),
    ("RESIZE_BILINEAR", {}),
    ("RESIZE_BILINEAR", {"size": (6, 8), "half_pixel_centers": True}),
    ("ZEROS_LIKE", {}),
    ("FILL", {}),
    # the ops-math family (issue 20)
    ("SUB", {}),
    ("SUB", {"b_shape": (1, 1, 1, 3), "activation": "RELU6"}),
    ("SUB", {"b_shape": (3,), "b_input": False, "activation": "RELU"}),
    ("DIV", {"b_input": False}),
    ("DIV", {"b_shape": (1, 4, 1, 1), "b_input": False, "activation": "RELU_N1_TO_1"}),
    ("SQUARED_DIFFERENCE", {}),
    ("SQUARED_DIFFERENCE", {"b_shape": (1, 4, 1, 3), "b_input": False}),
    ("MAXIMUM", {}),
    ("MAXIMUM", {"b_shape": (3,), "b_input": False}),
    ("MINIMUM", {"b_shape": (1, 1, 4, 1)}),
    ("PRELU", {}),
    ("PRELU", {"alpha_shape": (1, 4, 4, 3)}),
    ("ABS", {}),
    ("NEG", {}),
    ("SQRT", {}),
    ("RSQRT", {"value_range": (0.05, 4.0)}),
    ("EXP", {}),
    ("LOG", {}),
    ("FLOOR", {}),
    ("CEIL", {}),
    ("ROUND", {}),
    ("RELU", {}),
    ("RELU6", {"value_range": (-2.0, 8.0)}),
    ("RELU_N1_TO_1", {}),
    ("LEAKY_RELU", {}),
    ("LEAKY_RELU", {"alpha": -0.5}),
    ("HARD_SWISH", {"value_range": (-5.0, 5.0)}),
    ("ELU", {}),
    ("LOG_SOFTMAX", {}),
    ("LOG_SOFTMAX", {"input_shape": (3, 7)}),
    ("L2_NORMALIZATION", {}),
    ("L2_NORMALIZATION", {"input_shape": (2, 3, 5)}),
]

WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


#: The ops-math family's modes where TFLM and LiteRT both take them: LiteRT lacks int16
#: SQUARED_DIFFERENCE and computes int16 RSQRT differently; TFLM takes RSQRT inputs at or above
#: the zero point only (int16's random inputs are not); TFLM lacks RELU_N1_TO_1 (see
#: TFLM_LACKS).
MATH_MODES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("SUB", "MAXIMUM", "MINIMUM"), ("int8", "float32", "int16x8", "int32")),
    "SQUARED_DIFFERENCE": ("int8", "float32", "int32"), "DIV": ("int8", "float32", "int32"),
    **dict.fromkeys(("PRELU", "ABS", "RELU", "RELU6", "LEAKY_RELU"),
                    ("int8", "float32", "int16x8")),
    **dict.fromkeys(("NEG", "SQRT", "EXP", "LOG", "FLOOR", "CEIL", "ROUND"), ("float32",)),
    **dict.fromkeys(("RSQRT", "HARD_SWISH", "ELU", "LOG_SOFTMAX", "L2_NORMALIZATION",
                     "RELU_N1_TO_1"), ("int8", "float32")),
}
#: Operators TFLM has no kernel for: its interpreter must refuse them; LiteRT runs them.
TFLM_LACKS = ("RELU_N1_TO_1",)


def modes_for(op: str) -> tuple[str, ...]:
    """Modes that make sense for ``op`` (per-channel only where there are weights)."""
    if op in WEIGHTED:
        return tuple(m for m in B.MODES if m not in ("int32", "int64", "bool"))
    if op == "QUANTIZE":  # float32 -> int8, int8 -> int8, int16 -> int16, int32 -> int8
        return ("float32", "int8", "int16x8", "int32")
    if op == "DEQUANTIZE":
        return ("int8", "int16x8")
    if op in MOVER_MODES:
        return MOVER_MODES[op]
    if op in MATH_MODES:
        return MATH_MODES[op]
    return ("int8", "float32", "int16x8")


#: The shape and data movement operators' modes: the types both interpreters take.
MOVER_MODES = {
    "MIRROR_PAD": ("int8", "float32"), "GATHER": ("int8", "float32"),
    "GATHER_ND": ("int8", "float32"), "DEPTH_TO_SPACE": ("int8", "float32"),
    "SPACE_TO_DEPTH": ("int8", "float32"), "BATCH_TO_SPACE_ND": ("int8", "float32"),
    "SPACE_TO_BATCH_ND": ("int8", "float32"), "RESIZE_BILINEAR": ("int8", "float32"),
    "ZEROS_LIKE": ("float32", "int32", "int64"), "FILL": ("int8", "float32", "int32"),
    "TRANSPOSE": ("int8", "float32", "int16x8"), "SHAPE": ("int8", "float32"),
    "CONCATENATION": ("int8", "float32", "int16x8", "int32", "int64", "bool"),
    "BROADCAST_TO": ("int8", "float32", "int16x8", "int32", "int64", "bool"),
    "SLICE": ("int8", "float32", "int16x8", "int32", "bool"),
    "STRIDED_SLICE": ("int8", "float32", "int16x8", "int32", "bool"),
    "PACK": ("int8", "float32", "int16x8", "int32", "int64"),
}


def case_params() -> list[Any]:
    params = []
    for i, (op, opts) in enumerate(CASES):
        for mode in modes_for(op):
            label = ",".join(f"{k}={v}" for k, v in opts.items()) or "default"
            params.append(pytest.param(op, dict(opts), mode, id=f"{op}-{mode}-{i}-{label}"))
    return params


def make(op: str, opts: dict[str, Any], mode: str, seed: int = 0) -> bytes:
    opts = dict(opts)
    shape = opts.pop("input_shape", None)
    return B.single_op_model(op, mode, seed=seed, input_shape=shape, **opts)


# --- reading a model back -------------------------------------------------------------------

_NP = {0: np.float32, 2: np.int32, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}
_OPTION_CLASSES = {
    "CONV_2D": tflite.Conv2DOptions, "DEPTHWISE_CONV_2D": tflite.DepthwiseConv2DOptions,
    "FULLY_CONNECTED": tflite.FullyConnectedOptions, "AVERAGE_POOL_2D": tflite.Pool2DOptions,
    "MAX_POOL_2D": tflite.Pool2DOptions, "ADD": tflite.AddOptions, "MUL": tflite.MulOptions,
    "RESHAPE": tflite.ReshapeOptions, "SOFTMAX": tflite.SoftmaxOptions,
    "QUANTIZE": tflite.QuantizeOptions, "DEQUANTIZE": tflite.DequantizeOptions,
    "SQUEEZE": tflite.SqueezeOptions, "EXPAND_DIMS": tflite.ExpandDimsOptions,
    "PAD": tflite.PadOptions, "PADV2": tflite.PadV2Options, "MIRROR_PAD": tflite.MirrorPadOptions,
    "CONCATENATION": tflite.ConcatenationOptions, "SPLIT": tflite.SplitOptions,
    "SPLIT_V": tflite.SplitVOptions, "SLICE": tflite.SliceOptions,
    "STRIDED_SLICE": tflite.StridedSliceOptions, "TRANSPOSE": tflite.TransposeOptions,
    "PACK": tflite.PackOptions, "UNPACK": tflite.UnpackOptions, "GATHER": tflite.GatherOptions,
    "GATHER_ND": tflite.GatherNdOptions, "SHAPE": tflite.ShapeOptions,
    "BROADCAST_TO": tflite.BroadcastToOptions, "DEPTH_TO_SPACE": tflite.DepthToSpaceOptions,
    "SPACE_TO_DEPTH": tflite.SpaceToDepthOptions,
    "BATCH_TO_SPACE_ND": tflite.BatchToSpaceNDOptions,
    "SPACE_TO_BATCH_ND": tflite.SpaceToBatchNDOptions,
    "RESIZE_NEAREST_NEIGHBOR": tflite.ResizeNearestNeighborOptions,
    "RESIZE_BILINEAR": tflite.ResizeBilinearOptions, "ZEROS_LIKE": tflite.ZerosLikeOptions,
    "FILL": tflite.FillOptions,
    "SUB": tflite.SubOptions, "DIV": tflite.DivOptions,
    "SQUARED_DIFFERENCE": tflite.SquaredDifferenceOptions,
    "MAXIMUM": tflite.MaximumMinimumOptions, "MINIMUM": tflite.MaximumMinimumOptions,
    "ABS": tflite.AbsOptions, "NEG": tflite.NegOptions, "EXP": tflite.ExpOptions,
    "LEAKY_RELU": tflite.LeakyReluOptions, "HARD_SWISH": tflite.HardSwishOptions,
    "LOG_SOFTMAX": tflite.LogSoftmaxOptions, "L2_NORMALIZATION": tflite.L2NormOptions,
}
#: Operators without an options table.
_NO_OPTIONS = ("PRELU", "SQRT", "RSQRT", "LOG", "FLOOR", "CEIL", "ROUND", "RELU", "RELU6",
               "RELU_N1_TO_1", "ELU")
_OP_NAMES = {getattr(tflite.BuiltinOperator, n): n for n in (*_OPTION_CLASSES, *_NO_OPTIONS)}


class ReadTensor:
    def __init__(self, model: Any, t: Any):
        self.name = t.Name().decode()
        self.shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        self.type = t.Type()
        data = model.Buffers(t.Buffer())
        self.data = None
        if data is not None and data.DataLength():
            raw = data.DataAsNumpy().tobytes()
            self.data = np.frombuffer(raw, _NP[self.type]).reshape(self.shape)
        q = t.Quantization()
        self.scale = q.ScaleAsNumpy().astype(np.float64) if q and q.ScaleLength() else None
        self.zero_point = q.ZeroPointAsNumpy().astype(np.int64) if q and q.ZeroPointLength() else None
        self.axis = q.QuantizedDimension() if q else 0

    def real(self, values: np.ndarray | None = None) -> np.ndarray:
        """Float values of ``values`` (default: the constant data) under this tensor's quantization."""
        v = self.data if values is None else values
        assert v is not None
        if self.scale is None:
            return np.asarray(v, dtype=np.float64)
        return B.dequantize_array(v, self.scale, self.zero_point, axis=self.axis)


def read_model(model: bytes) -> tuple[list[ReadTensor], list[tuple[str, list[int], list[int], Any]],
                                      list[int], list[int]]:
    m = tflite.Model.GetRootAsModel(model, 0)
    assert tflite.Model.ModelBufferHasIdentifier(model, 0)
    assert m.Version() == 3
    sg = m.Subgraphs(0)
    tensors = [ReadTensor(m, sg.Tensors(i)) for i in range(sg.TensorsLength())]
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = _OP_NAMES[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
        opts = None
        table = op.BuiltinOptions()
        if table is not None:
            assert name in _OPTION_CLASSES, f"{name} has options, but none are expected"
            opts = _OPTION_CLASSES[name]()
            opts.Init(table.Bytes, table.Pos)
        ops.append((name, [int(v) for v in op.InputsAsNumpy()], [int(v) for v in op.OutputsAsNumpy()],
                    opts))
    return tensors, ops, [int(v) for v in sg.InputsAsNumpy()], [int(v) for v in sg.OutputsAsNumpy()]


# --- numpy reference (float64, from the serialized model) ------------------------------------

_ACT = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def _pads(size: int, k: int, stride: int, dil: int, same: bool) -> tuple[int, int, int]:
    eff = (k - 1) * dil + 1
    out = -(-size // stride) if same else (size - eff) // stride + 1
    total = max((out - 1) * stride + eff - size, 0) if same else 0
    return out, total // 2, total - total // 2


def _windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, same: bool,
             fill: float) -> tuple[np.ndarray, np.ndarray]:
    """All (KH, KW) windows of NHWC x: array [N, OH, OW, KH, KW, C] plus a validity mask."""
    n, h, w, c = x.shape
    oh, pt, pb = _pads(h, kh, sh, dh, same)
    ow, pl, pr = _pads(w, kw, sw, dw, same)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill)
    valid = np.pad(np.ones((h, w)), ((pt, pb), (pl, pr)))
    win = np.empty((n, oh, ow, kh, kw, c))
    mask = np.empty((oh, ow, kh, kw))
    for i in range(oh):
        for j in range(ow):
            rows = i * sh + dh * np.arange(kh)
            cols = j * sw + dw * np.arange(kw)
            win[:, i, j] = xp[:, rows][:, :, cols]
            mask[i, j] = valid[rows][:, cols]
    return win, mask


def _act(opts: Any, y: np.ndarray) -> np.ndarray:
    lo, hi = _ACT[opts.FusedActivationFunction()]
    return np.clip(y, lo, hi)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


#: Float64 results of the ops-math family, from the real values of their inputs.
MATH_NUMPY: dict[str, Any] = {
    "SUB": lambda o, a, b: _act(o, a - b),
    "DIV": lambda o, a, b: _act(o, a / b),
    "SQUARED_DIFFERENCE": lambda o, a, b: (a - b) ** 2,
    "MAXIMUM": lambda o, a, b: np.maximum(a, b),
    "MINIMUM": lambda o, a, b: np.minimum(a, b),
    "PRELU": lambda o, x, alpha: np.where(x >= 0, x, x * alpha),
    "ABS": lambda o, x: np.abs(x),
    "NEG": lambda o, x: -x,
    "SQRT": lambda o, x: np.sqrt(np.where(x >= 0, x, np.nan)),
    "RSQRT": lambda o, x: 1.0 / np.sqrt(np.where(x >= 0, x, np.nan)),
    "EXP": lambda o, x: np.exp(x),
    "LOG": lambda o, x: np.log(np.where(x > 0, x, np.nan)),
    "FLOOR": lambda o, x: np.floor(x),
    "CEIL": lambda o, x: np.ceil(x),
    "ROUND": lambda o, x: np.round(x),  # half to even, as TFLite
    "RELU": lambda o, x: np.maximum(x, 0.0),
    "RELU6": lambda o, x: np.clip(x, 0.0, 6.0),
    "RELU_N1_TO_1": lambda o, x: np.clip(x, -1.0, 1.0),
    "LEAKY_RELU": lambda o, x: np.where(x > 0, x, x * o.Alpha()),
    "HARD_SWISH": lambda o, x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "ELU": lambda o, x: np.where(x < 0, np.expm1(np.minimum(x, 0.0)), x),
    "LOG_SOFTMAX": lambda o, x: _log_softmax(x),
    "L2_NORMALIZATION": lambda o, x: x / np.maximum(
        np.sqrt((x * x).sum(axis=-1, keepdims=True)), 1e-6),
}


def int32_reference(name: str, opts: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The int32 result of a binary op of the ops-math family: integer arithmetic wrapping at
    32 bits (as TFLM's), the quotient truncated."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    if name == "DIV":
        q = np.abs(a64) // np.abs(b64) * np.sign(a64) * np.sign(b64)
        y = _act(opts, q)
    elif name == "SUB":
        y = _act(opts, a64 - b64)
    elif name == "SQUARED_DIFFERENCE":
        y = (a64 - b64) ** 2
    else:
        y = np.maximum(a64, b64) if name == "MAXIMUM" else np.minimum(a64, b64)
    return ((y.astype(np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def numpy_op(name: str, opts: Any, ins: list[np.ndarray], consts: list[ReadTensor | None]) -> np.ndarray:
    """Float64 result of one operator. ``ins`` are real-valued inputs (constants dequantized)."""
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        x, w = ins[0], ins[1]
        same = opts.Padding() == tflite.Padding.SAME
        kh, kw = w.shape[1], w.shape[2]
        win, _ = _windows(x, kh, kw, opts.StrideH(), opts.StrideW(), opts.DilationHFactor(),
                          opts.DilationWFactor(), same, 0.0)
        if name == "CONV_2D":
            y = np.einsum("nijhwc,ohwc->nijo", win, w)
        else:
            mult = opts.DepthMultiplier()
            win = np.repeat(win, mult, axis=-1)  # output channel k reads input channel k // mult
            y = np.einsum("nijhwk,hwk->nijk", win, w[0])
        if len(ins) > 2:
            y = y + ins[2]
        lo, hi = _ACT[opts.FusedActivationFunction()]
        return np.clip(y, lo, hi)
    if name == "FULLY_CONNECTED":
        x, w = ins[0], ins[1]
        y = x.reshape(-1, w.shape[1]) @ w.T
        if len(ins) > 2 and ins[2] is not None:
            y = y + ins[2]
        if opts.KeepNumDims():
            y = y.reshape(*x.shape[:-1], w.shape[0])
        lo, hi = _ACT[opts.FusedActivationFunction()]
        return np.clip(y, lo, hi)
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        same = opts.Padding() == tflite.Padding.SAME
        fill = 0.0 if name == "AVERAGE_POOL_2D" else -np.inf
        win, mask = _windows(ins[0], opts.FilterHeight(), opts.FilterWidth(), opts.StrideH(),
                             opts.StrideW(), 1, 1, same, fill)
        if name == "AVERAGE_POOL_2D":  # padding does not count in the average
            y = win.sum(axis=(3, 4)) / mask.sum(axis=(2, 3))[None, :, :, None]
        else:
            y = win.max(axis=(3, 4))
        lo, hi = _ACT[opts.FusedActivationFunction()]
        return np.clip(y, lo, hi)
    if name in ("ADD", "MUL"):
        y = ins[0] + ins[1] if name == "ADD" else ins[0] * ins[1]
        lo, hi = _ACT[opts.FusedActivationFunction()]
        return np.clip(y, lo, hi)
    if name == "SOFTMAX":
        z = opts.Beta() * (ins[0] - ins[0].max(axis=-1, keepdims=True))
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)
    if name in MATH_NUMPY:
        return MATH_NUMPY[name](opts, *ins)
    if name in ("RESHAPE", "QUANTIZE", "DEQUANTIZE", "SQUEEZE", "EXPAND_DIMS"):
        return ins[0]
    return numpy_mover(name, opts, ins, consts)


def _ints(t: ReadTensor | None) -> list[int]:
    assert t is not None and t.data is not None
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def numpy_mover(name: str, opts: Any, ins: list[Any], consts: list[ReadTensor | None]
                ) -> np.ndarray:
    """The shape and data movement operators in numpy (the first output of SPLIT, SPLIT_V and
    UNPACK), from the serialized attributes; ``consts[i]`` is input i's tensor."""
    x = ins[0]
    if name in ("PAD", "PADV2", "MIRROR_PAD"):
        pads = np.asarray(_ints(consts[1])).reshape(-1, 2)
        if name == "MIRROR_PAD":
            mode = "reflect" if opts.Mode() == 0 else "symmetric"
            return np.pad(x, pads, mode=mode)
        value = float(np.asarray(ins[2]).reshape(-1)[0]) if len(ins) > 2 else 0.0
        return np.pad(x, pads, constant_values=value)
    if name == "CONCATENATION":
        return np.concatenate(ins, axis=opts.Axis())
    if name == "SPLIT":
        return np.split(ins[1], opts.NumSplits(), axis=_ints(consts[0])[0])[0]
    if name == "SPLIT_V":
        sizes = _ints(consts[1])
        return np.take(x, range(sizes[0]), axis=_ints(consts[2])[0])
    if name == "SLICE":
        begin, size = _ints(consts[1]), _ints(consts[2])
        return x[tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size,
                                                                             strict=True))]
    if name == "STRIDED_SLICE":
        begin, end, step = _ints(consts[1]), _ints(consts[2]), _ints(consts[3])
        index: list[Any] = []
        for d in range(x.ndim):
            if opts.ShrinkAxisMask() >> d & 1:
                index.append(begin[d])
            else:
                index.append(slice(None if opts.BeginMask() >> d & 1 else begin[d],
                                   None if opts.EndMask() >> d & 1 else end[d], step[d]))
        return x[tuple(index)]
    if name == "TRANSPOSE":
        return np.transpose(x, _ints(consts[1]))
    if name == "PACK":
        return np.stack(ins, axis=opts.Axis())
    if name == "UNPACK":
        return np.take(x, 0, axis=opts.Axis())
    if name == "GATHER":
        assert opts.BatchDims() == 0
        return np.take(x, np.asarray(consts[1].data), axis=opts.Axis())
    if name == "GATHER_ND":
        idx = np.asarray(consts[1].data)
        return np.stack([x[tuple(t)] for t in idx.reshape(-1, idx.shape[-1])]).reshape(
            *idx.shape[:-1], *x.shape[idx.shape[-1]:])
    if name == "SHAPE":
        return np.asarray(x.shape)
    if name == "BROADCAST_TO":
        return np.broadcast_to(x, _ints(consts[1]))
    if name in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH"):
        bs = opts.BlockSize()
        n, h, w, c = x.shape
        if name == "DEPTH_TO_SPACE":
            y = x.reshape(n, h, w, bs, bs, c // (bs * bs)).transpose(0, 1, 3, 2, 4, 5)
            return y.reshape(n, h * bs, w * bs, c // (bs * bs))
        y = x.reshape(n, h // bs, bs, w // bs, bs, c).transpose(0, 1, 3, 2, 4, 5)
        return y.reshape(n, h // bs, w // bs, bs * bs * c)
    if name == "SPACE_TO_BATCH_ND":
        (bh, bw), p = _ints(consts[1]), np.asarray(_ints(consts[2])).reshape(2, 2)
        xp = np.pad(x, ((0, 0), tuple(p[0]), tuple(p[1]), (0, 0)))
        n, h, w, c = xp.shape
        y = xp.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
        return y.reshape(bh * bw * n, h // bh, w // bw, c)
    if name == "BATCH_TO_SPACE_ND":
        (bh, bw), cr = _ints(consts[1]), np.asarray(_ints(consts[2])).reshape(2, 2)
        b, h, w, c = x.shape
        y = x.reshape(bh, bw, b // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5)
        y = y.reshape(b // (bh * bw), h * bh, w * bw, c)
        return y[:, cr[0, 0]:h * bh - cr[0, 1], cr[1, 0]:w * bw - cr[1, 1]]
    if name in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        return _resize(name, opts, x, _ints(consts[1]))
    if name == "ZEROS_LIKE":
        return np.zeros_like(x)
    if name == "FILL":
        return np.full(_ints(consts[0]), np.asarray(ins[1]).reshape(-1)[0])
    raise AssertionError(name)


def _resize(name: str, opts: Any, x: np.ndarray, size: list[int]) -> np.ndarray:
    """TensorFlow's resize in float64: source position ``(i + 0.5) * scale - 0.5`` with half
    pixel centers (nearest: ``(i + 0.5) * scale``), ``i * scale`` otherwise; the scale
    ``in / out``, or ``(in - 1) / (out - 1)`` aligning corners."""
    ac, hpc = opts.AlignCorners(), opts.HalfPixelCenters()

    def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        scale = (n_in - 1) / (n_out - 1) if ac and n_out > 1 else n_in / n_out
        i = np.arange(n_out, dtype=np.float64)
        if name == "RESIZE_NEAREST_NEIGHBOR":
            v = (i + 0.5 * hpc) * scale
            k = np.floor(v + 0.5) if ac else np.floor(v)
            k = np.clip(k, 0, n_in - 1).astype(int)
            return k, k, np.zeros(n_out)
        v = (i + 0.5) * scale - 0.5 if hpc else i * scale
        lo = np.floor(v)
        return (np.clip(lo, 0, n_in - 1).astype(int), np.clip(np.ceil(v), 0, n_in - 1).astype(int),
                v - np.maximum(lo, 0))

    y0, y1, dy = axis(x.shape[1], size[0])
    x0, x1, dx = axis(x.shape[2], size[1])
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    top = x[:, y0][:, :, x0] * (1 - dx) + x[:, y0][:, :, x1] * dx
    bottom = x[:, y1][:, :, x0] * (1 - dx) + x[:, y1][:, :, x1] * dx
    return top * (1 - dy) + bottom * dy


def numpy_reference(model: bytes, inputs: list[np.ndarray]) -> tuple[np.ndarray, ReadTensor]:
    """Float64 result of a one-operator model, and its output tensor (for requantizing)."""
    tensors, ops, sg_in, sg_out = read_model(model)
    name, op_in, op_out, opts = ops[-1]
    feed = dict(zip(sg_in, inputs, strict=True))
    if len(ops) == 2:  # FILL's value, made a scalar by a RESHAPE of the model's input
        assert ops[0][0] == "RESHAPE" and name == "FILL"
        feed[ops[0][2][0]] = np.asarray(inputs[0]).reshape(())
    else:
        assert len(ops) == 1
    real: list[Any] = []
    for i in op_in:
        if i < 0:
            real.append(None)
        elif i in feed:
            real.append(tensors[i].real(feed[i]))
        else:
            real.append(tensors[i].real())
    if name in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS"):
        real[0] = real[0].reshape(tensors[op_out[0]].shape)
    y = numpy_op(name, opts, real, [tensors[i] if i >= 0 else None for i in op_in])
    out = tensors[sg_out[0]]
    assert y.shape == out.shape, f"numpy result {y.shape} vs declared output {out.shape}"
    return y, out


def random_inputs(model: bytes, seed: int) -> list[np.ndarray]:
    """Random inputs over each input's full range (int8: every code; float: its range)."""
    rng = np.random.default_rng(1000 + seed)
    result = []
    tensors, _, sg_in, _ = read_model(model)  # types and shapes as written, whatever runs it
    for det in ({"dtype": np.dtype(_NP[tensors[i].type]), "shape": tensors[i].shape}
                for i in sg_in):
        if det["dtype"] in (np.int8, np.int16):
            info = np.iinfo(det["dtype"])
            result.append(rng.integers(info.min, info.max + 1, size=det["shape"],
                                       dtype=det["dtype"]))
        elif det["dtype"] in (np.int32, np.int64):  # a quantized int32 input spans +-2^20
            result.append(rng.integers(-(1 << 20), 1 << 20, size=det["shape"],
                                       dtype=det["dtype"]))
        elif det["dtype"] == np.bool_:
            result.append(rng.integers(0, 2, size=det["shape"]).astype(bool))
        else:
            result.append(rng.uniform(-3.0, 3.0, size=det["shape"]).astype(np.float32))
    return result


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op,opts,mode", case_params())
def test_model_loads_runs_and_reads_back(op: str, opts: dict[str, Any], mode: str) -> None:
    model = make(op, opts, mode)
    tensors, ops, sg_in, sg_out = read_model(model)
    assert [o[0] for o in ops] == (["RESHAPE", op] if op == "FILL" else [op])
    name, op_in, op_out, o = ops[-1]
    act = B.ACTIVATIONS[opts.get("activation", "NONE")]
    if op == "CONV_2D":
        sh, sw = B._pair(opts.get("stride", 1))
        dh, dw = B._pair(opts.get("dilation", 1))
        assert (o.StrideH(), o.StrideW(), o.DilationHFactor(), o.DilationWFactor()) == (sh, sw, dh, dw)
        assert o.Padding() == B.PADDINGS[opts.get("padding", "SAME")]
        assert o.FusedActivationFunction() == act
    elif op == "DEPTHWISE_CONV_2D":
        assert o.DepthMultiplier() == opts.get("depth_multiplier", 1)
        assert o.StrideH() == o.StrideW() == opts.get("stride", 1)
        assert o.DilationHFactor() == o.DilationWFactor() == opts.get("dilation", 1)
        assert o.FusedActivationFunction() == act
    elif op == "FULLY_CONNECTED":
        assert o.KeepNumDims() == opts.get("keep_num_dims", False)
        assert o.FusedActivationFunction() == act
        assert (op_in[2] == -1) == (opts.get("bias", True) is False)
    elif op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        fh, fw = B._pair(opts.get("filter_size", 2))
        sh, sw = B._pair(opts.get("stride", opts.get("filter_size", 2)))
        assert (o.FilterHeight(), o.FilterWidth(), o.StrideH(), o.StrideW()) == (fh, fw, sh, sw)
        assert o.Padding() == B.PADDINGS[opts.get("padding", "VALID")]
        assert o.FusedActivationFunction() == act
    elif op in ("ADD", "MUL"):
        assert o.FusedActivationFunction() == act
        assert len(sg_in) == (2 if opts.get("b_input", True) else 1)
    elif op == "RESHAPE":
        assert len(op_in) == (2 if opts.get("shape_input", True) else 1)
        assert tuple(o.NewShapeAsNumpy()) == tuple(opts.get("shape", (1, -1)))
    elif op == "SOFTMAX":
        assert o.Beta() == pytest.approx(opts.get("beta", 1.0))
    elif op == "SQUEEZE":
        dims = opts.get("dims")
        assert (o.SqueezeDimsAsNumpy().tolist() if o.SqueezeDimsLength() else None) == (
            list(dims) if dims else None)
    elif op == "EXPAND_DIMS":
        assert tensors[op_in[1]].data.tolist() == [opts["axis"]]
    elif op in B._MOVERS:
        _check_mover(op, {**B._MOVERS[op], **opts}, o, [tensors[i] for i in op_in],
                     [tensors[i] for i in op_out])
    elif op in ("SUB", "DIV", "L2_NORMALIZATION"):
        assert o.FusedActivationFunction() == act
    elif op == "LEAKY_RELU":
        assert o.Alpha() == pytest.approx(opts.get("alpha", 0.2))
    if op in B._MATH_BINARY:
        assert len(sg_in) == (2 if opts.get("b_input", True) else 1)
    if op == "SUB" and mode == "int16x8":
        assert o.PotScaleInt16() is False

    # types and quantization as documented
    x, y = tensors[sg_in[0]], tensors[sg_out[0]]
    int16 = mode.startswith("int16")
    if int16 and op not in ("DEQUANTIZE", "SHAPE"):
        assert x.type == y.type == 7 and x.zero_point[0] == y.zero_point[0] == 0  # symmetric
    if op in WEIGHTED:
        w = tensors[op_in[1]]
        if mode == "float32":
            assert w.type == 0 and w.scale is None
        else:
            assert w.type == 9 and np.all(w.zero_point == 0)
            n_scales = (w.shape[3 if op == "DEPTHWISE_CONV_2D" else 0]
                        if mode.endswith("_per_channel") else 1)
            assert len(w.scale) == n_scales
            assert w.axis == (3 if op == "DEPTHWISE_CONV_2D" and n_scales > 1 else 0)
            assert np.abs(w.data).max() == 127  # symmetric: the largest weight maps to 127
            if op_in[2] >= 0:
                b = tensors[op_in[2]]
                assert b.type == (4 if int16 else 2) and np.all(b.zero_point == 0)
                np.testing.assert_allclose(b.scale, x.scale[0] * w.scale, rtol=1e-6)
    if op == "SOFTMAX" and mode != "float32":
        assert (y.scale[0], y.zero_point[0]) == ((1 / 32768, 0) if int16 else (1 / 256, -128))
    keeps = ("AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS",
             *(m for m in B._MOVERS if m not in ("SHAPE", "ZEROS_LIKE")))
    if op in keeps and mode in ("int8", "int16x8"):
        assert (y.scale[0], y.zero_point[0]) == (x.scale[0], x.zero_point[0])
    if op == "ADD" and int16:
        assert o.PotScaleInt16() is False  # general scales, as TFLite's converter writes them
    if op in ("MAXIMUM", "MINIMUM", "RELU6") and mode not in ("float32", "int32"):
        assert (y.scale[0], y.zero_point[0]) == (x.scale[0], x.zero_point[0])  # no requantizing
    if op == "LOG_SOFTMAX" and mode != "float32":
        assert (y.scale[0], y.zero_point[0]) == (16 / 256, 127)
    if op == "L2_NORMALIZATION" and mode != "float32":
        assert (y.scale[0], y.zero_point[0]) == (1 / 128, 0)
    if op == "PRELU" and mode != "float32":
        alpha = tensors[op_in[1]]
        assert alpha.type == 9 and len(alpha.scale) == 1  # int8 per tensor, as TFLM takes it
    if mode == "int32" and op in MATH_MODES:
        assert x.type == y.type == 2 and x.scale is None and y.scale is None  # plain int32

    inputs = random_inputs(model, 0)
    if op in TFLM_LACKS:
        with pytest.raises(RuntimeError):
            R.run_tflm(model, inputs)
        got = R.run_litert(model, inputs)[0]
        assert got.shape == y.shape
        return
    out_tflm = R.run_tflm(model, inputs)
    out_lite = R.run_litert(model, inputs)
    assert len(out_tflm) == len(out_lite) == len(sg_out)
    assert out_tflm[0].shape == out_lite[0].shape == y.shape
    for t, lite in zip(out_tflm, out_lite, strict=True):
        if t.dtype in (np.int8, np.int16):
            diff = np.abs(t.astype(int) - lite.astype(int))
            assert diff.max() <= 1, f"TFLM and LiteRT differ by {diff.max()} LSB"
        else:
            np.testing.assert_allclose(t, lite, rtol=1e-5, atol=1e-6)


def _check_mover(op: str, opts: dict[str, Any], o: Any, ins: list[ReadTensor],
                 outs: list[ReadTensor]) -> None:
    """The attributes of a shape and data movement operator, read back from the model."""
    if op in ("PAD", "PADV2", "MIRROR_PAD"):
        assert ins[1].data.tolist() == [list(p) for p in opts["paddings"]]
        if op == "MIRROR_PAD":
            assert o.Mode() == (1 if opts.get("padding_mode") == "SYMMETRIC" else 0)
        if op == "PADV2":
            assert len(ins) == 3 and ins[2].real().reshape(-1)[0] == pytest.approx(
                opts["value"], abs=float(ins[2].scale[0]) if ins[2].scale is not None else 1e-6)
    elif op == "CONCATENATION":
        assert o.Axis() == opts["axis"] and len(ins) == 2
    elif op == "SPLIT":
        assert o.NumSplits() == opts["num_splits"] == len(outs)
        assert ins[0].data.tolist() == [opts["axis"]]
    elif op == "SPLIT_V":
        assert ins[1].data.tolist() == list(opts["sizes"]) and len(outs) == len(opts["sizes"])
    elif op == "SLICE":
        assert (ins[1].data.tolist(), ins[2].data.tolist()) == (list(opts["begin"]),
                                                                list(opts["size"]))
        assert ins[1].type == (4 if opts.get("index_dtype") == "int64" else 2)
    elif op == "STRIDED_SLICE":
        assert [t.data.tolist() for t in ins[1:]] == [list(opts[k]) for k in
                                                      ("begin", "end", "strides")]
        assert (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) == tuple(
            opts.get(k, 0) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    elif op == "TRANSPOSE":
        assert ins[1].data.tolist() == list(opts["perm"])
    elif op == "PACK":
        assert (o.ValuesCount(), o.Axis()) == (2, opts["axis"])
    elif op == "UNPACK":
        assert (o.Num(), o.Axis()) == (len(outs), opts["axis"])
    elif op == "GATHER":
        assert o.Axis() == opts.get("axis", 0)
        assert ins[1].data.tolist() == np.asarray(opts["indices"]).tolist()
    elif op == "SHAPE":
        assert o.OutType() == 2 and outs[0].type == 2
    elif op in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH"):
        assert o.BlockSize() == opts["block_size"]
    elif op in ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR"):
        assert ins[1].data.tolist() == list(opts["size"])
        assert (o.AlignCorners(), o.HalfPixelCenters()) == (
            opts.get("align_corners", False), opts.get("half_pixel_centers", False))
    elif op == "FILL":
        assert ins[0].data.tolist() == list(opts["dims"]) and ins[1].shape == ()


@pytest.mark.parametrize("op,opts,mode", [p for p in case_params() if p.values[2] == "float32"
                                          and p.values[0] != "QUANTIZE"])
def test_float32_matches_numpy(op: str, opts: dict[str, Any], mode: str) -> None:
    model = make(op, opts, mode, seed=3)
    inputs = random_inputs(model, 3)
    expected, _ = numpy_reference(model, inputs)
    runs = [R.run_litert] if op in TFLM_LACKS else [R.run_tflm, R.run_litert]
    for got in (run(model, inputs)[0] for run in runs):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,opts,mode", [p for p in case_params() if p.values[2] != "float32"
                                          or p.values[0] == "QUANTIZE"])
def test_int8_close_to_numpy(op: str, opts: dict[str, Any], mode: str) -> None:
    """Quantized results within one output step of the float result on the same real values.

    This pins the quantization parameters (bias scale, per-channel axis, zero points): a wrong
    one moves outputs by many steps.
    """
    model = make(op, opts, mode, seed=5)
    inputs = random_inputs(model, 5)
    expected, out = numpy_reference(model, inputs)
    got = (R.run_litert if op in TFLM_LACKS else R.run_tflm)(model, inputs)[0]
    if mode == "int32" and op in MATH_MODES:  # plain integers: exact, wrapping as TFLM
        tensors, ops, sg_in, _ = read_model(model)
        a, b = (inputs[sg_in.index(i)] if i in sg_in else tensors[i].data for i in ops[0][1])
        np.testing.assert_array_equal(got, int32_reference(op, ops[0][3], a, b))
        return
    if out.scale is None:  # DEQUANTIZE: a float output
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
        return
    want = B.quantize_array(expected, out.scale, out.zero_point,
                            dtype="int16" if out.type == 7 else "int8")
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max() <= 1, f"{diff.max()} LSB from the float result (mean {diff.mean():.3f})"


def test_weights_are_deterministic_per_seed() -> None:
    assert B.demo_model(0) == B.demo_model(0)
    assert B.demo_model(0) != B.demo_model(1)
    assert make("CONV_2D", {}, "int8", seed=2) == make("CONV_2D", {}, "int8", seed=2)


def test_demo_model_structure_and_parity() -> None:
    model = B.demo_model()
    tensors, ops, sg_in, sg_out = read_model(model)
    assert [o[0] for o in ops] == ["CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D",
                                   "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    assert tensors[sg_in[0]].shape == (1, 16, 16, 1) and tensors[sg_in[0]].type == 9
    assert tensors[sg_out[0]].shape == (1, 10)
    rng = np.random.default_rng(7)
    for _ in range(3):
        x = rng.integers(-128, 128, size=(1, 16, 16, 1), dtype=np.int8)
        a, b = R.run_tflm(model, [x])[0], R.run_litert(model, [x])[0]
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1
        probs = B.dequantize_array(a, 1 / 256, -128)
        assert abs(probs.sum() - 1.0) < 0.05
    arena = R.tflm_arena(model)
    assert arena["total"] == arena["head"] + arena["tail"]
    # the head holds at least the two largest simultaneously live activations (1x16x16x8 int8)
    assert arena["head"] >= 2 * 16 * 16 * 8


def test_quantize_params_holds_zero_exactly() -> None:
    for lo, hi in [(-1.0, 1.0), (-0.3, 2.7), (0.5, 4.0), (-6.0, -1.0)]:
        scale, zp = B.quantize_params(lo, hi)
        assert -128 <= zp <= 127
        assert B.dequantize_array(np.int8(zp), scale, zp) == 0.0
        q = B.quantize_array(np.array([min(lo, 0.0), max(hi, 0.0)]), scale, zp)
        assert q[0] <= -127 and q[1] >= 126


def test_bad_arguments_are_rejected() -> None:
    mb = B.ModelBuilder()
    x = mb.input((1, 4, 4, 2), "float32")
    with pytest.raises(ValueError, match="padding"):
        mb.conv2d(x, 2, padding="FULL")
    with pytest.raises(ValueError, match="reshape"):
        mb.reshape(x, (3, 3))
    with pytest.raises(ValueError, match="output"):
        B.ModelBuilder().build()


def test_reference_rejects_wrong_inputs() -> None:
    model = make("ADD", {}, "int8")
    x = np.zeros((1, 4, 4, 3), np.int8)
    with pytest.raises(ValueError, match="2 inputs"):
        R.run_tflm(model, [x])
    with pytest.raises(ValueError, match="dtype"):
        R.run_litert(model, [x, x.astype(np.float32)])


# --- reductions, comparisons, types and compute (the ops-reduce family) ----------------------

#: (op, input type, single_op options).
FAMILY_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("MEAN", "float32", {"axes": (1, 2), "keep_dims": True}),
    ("MEAN", "int8", {"axes": (-1, 1)}),
    ("SUM", "float32", {"axes": (0, 2)}),
    ("SUM", "int16", {"axes": (3,), "keep_dims": True}),
    ("REDUCE_MAX", "int8", {"axes": (1,), "keep_dims": True}),
    ("REDUCE_MIN", "float32", {}),
    ("ARG_MAX", "float32", {"axis": 0}),
    ("ARG_MIN", "int8", {"axis": -1}),
    ("LESS", "float32", {"b_shape": (3, 1)}),
    ("EQUAL", "int32", {"b_input": False}),
    ("GREATER_EQUAL", "int8", {}),
    ("NOT_EQUAL", "bool", {"b_shape": (4,)}),
    ("LOGICAL_AND", "bool", {"b_shape": (4,)}),
    ("LOGICAL_NOT", "bool", {}),
    ("SELECT_V2", "float32", {"cond_shape": (3, 1)}),
    ("SELECT_V2", "int8", {"y_shape": (4,), "y_input": False}),
    ("CAST", "float32", {"to": "int32"}),
    ("CAST", "int16", {"to": "bool"}),
    ("TRANSPOSE_CONV", "float32", {"stride": 2, "padding": "VALID", "activation": "RELU"}),
    ("TRANSPOSE_CONV", "int8", {"stride": (2, 1), "kernel_size": (3, 2)}),
    ("BATCH_MATMUL", "float32", {"adj_y": True, "b_shape": (5, 4)}),
    ("BATCH_MATMUL", "int8", {"b_input": True, "b_shape": (2, 4, 6)}),
]
_FAMILY_OPTIONS = {
    "MEAN": tflite.ReducerOptions, "SUM": tflite.ReducerOptions,
    "REDUCE_MAX": tflite.ReducerOptions, "REDUCE_MIN": tflite.ReducerOptions,
    "ARG_MAX": tflite.ArgMaxOptions, "ARG_MIN": tflite.ArgMinOptions,
    "CAST": tflite.CastOptions, "TRANSPOSE_CONV": tflite.TransposeConvOptions,
    "BATCH_MATMUL": tflite.BatchMatMulOptions,
}
_FAMILY_NP = {0: np.float32, 2: np.int32, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}


def _family_model(op: str, dtype: str, opts: dict[str, Any]) -> bytes:
    mb = B.ModelBuilder(seed=6, per_channel=True)
    mb.output(mb.single_op(op, dtype, **opts))
    return mb.build()


def _read_family(model: bytes) -> tuple[str, Any, list[Any], list[int], list[int], Any]:
    """(op name, options table, tensors, op inputs, op outputs, model) of a one-op model."""
    m = tflite.Model.GetRootAsModel(model, 0)
    sg = m.Subgraphs(0)
    op = sg.Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex())
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    name = names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
    opts = None
    if name in _FAMILY_OPTIONS and op.BuiltinOptions() is not None:
        opts = _FAMILY_OPTIONS[name]()
        opts.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    tensors = [sg.Tensors(i) for i in range(sg.TensorsLength())]
    return (name, opts, tensors, [int(v) for v in op.InputsAsNumpy()],
            [int(v) for v in op.OutputsAsNumpy()], m)


def _const(m: Any, t: Any) -> np.ndarray | None:
    buf = m.Buffers(t.Buffer())
    if buf is None or not buf.DataLength():
        return None
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    return np.frombuffer(buf.DataAsNumpy().tobytes(), _FAMILY_NP[t.Type()]).reshape(shape)


def _family_inputs(model: bytes) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    out = []
    for det in R.input_details(model):
        dt = np.dtype(det["dtype"])
        if dt == np.bool_:
            out.append(rng.integers(0, 2, size=det["shape"]).astype(bool))
        elif dt.kind == "i":
            info = np.iinfo(dt)
            lo, hi = (max(info.min, -(1 << 20)), min(info.max, 1 << 20))
            out.append(rng.integers(lo, hi + 1, size=det["shape"], dtype=dt))
        else:
            out.append(rng.uniform(-3.0, 3.0, size=det["shape"]).astype(np.float32))
    return out


def _numpy_family(name: str, opts: Any, ins: list[np.ndarray], consts: list[Any],
                  out_shape: tuple[int, ...]) -> np.ndarray:
    """The float64 (or exact) result of one family operator from read-back data."""
    if name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        axes = tuple(sorted({int(a) % ins[0].ndim for a in consts[1].reshape(-1)}))
        f = {"MEAN": np.mean, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}[name]
        return f(ins[0].astype(np.float64), axis=axes, keepdims=opts.KeepDims())
    if name in ("ARG_MAX", "ARG_MIN"):
        f = np.argmax if name == "ARG_MAX" else np.argmin
        return f(ins[0], axis=int(consts[1].reshape(-1)[0]))
    if name in B.COMPARISONS:
        f = {"EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "LESS": np.less,
             "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
             "GREATER_EQUAL": np.greater_equal}[name]
        return f(ins[0], ins[1])
    if name == "LOGICAL_AND":
        return np.logical_and(ins[0], ins[1])
    if name == "LOGICAL_NOT":
        return np.logical_not(ins[0])
    if name == "SELECT_V2":
        return np.where(ins[0], ins[1], ins[2])
    if name == "CAST":
        return ins[0]
    if name == "TRANSPOSE_CONV":
        w, x = ins[1], ins[2]
        n, oh, ow, o = out_shape
        _, kh, kw, _ = w.shape
        sh, sw = opts.StrideH(), opts.StrideW()
        same = opts.Padding() == tflite.Padding.SAME
        pads = []
        for size, k, s in ((oh, kh, sh), (ow, kw, sw)):
            conv_out = -(-size // s) if same else (size - k + s) // s
            pads.append(max(0, ((conv_out - 1) * s + k - size) // 2))
        y = np.zeros(out_shape)
        for iy in range(x.shape[1]):
            for ix in range(x.shape[2]):
                for fy in range(kh):
                    for fx in range(kw):
                        oy, ox = iy * sh - pads[0] + fy, ix * sw - pads[1] + fx
                        if 0 <= oy < oh and 0 <= ox < ow:
                            y[:, oy, ox, :] += x[:, iy, ix, :] @ w[:, fy, fx, :].T
        if len(ins) > 3 and ins[3] is not None:
            y = y + ins[3]
        lo, hi = _ACT[opts.FusedActivationFunction()]
        return np.clip(y, lo, hi)
    a, b = ins
    if opts.AdjX():
        a = np.swapaxes(a, -1, -2)
    if opts.AdjY():
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


FAMILY_PARAMS = [pytest.param(op, dtype, opts, id=f"{op}-{dtype}-{i}")
                 for i, (op, dtype, opts) in enumerate(FAMILY_CASES)]


@pytest.mark.parametrize("op,dtype,opts", FAMILY_PARAMS)
def test_family_model_loads_runs_and_reads_back(op: str, dtype: str, opts: dict[str, Any]) -> None:
    model = _family_model(op, dtype, dict(opts))
    name, o, tensors, op_in, op_out, m = _read_family(model)
    assert name == op
    if op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        assert o.KeepDims() == opts.get("keep_dims", False)
        assert _const(m, tensors[op_in[1]]).tolist() == list(opts.get("axes", (1, 2)))
    elif op in ("ARG_MAX", "ARG_MIN"):
        assert o.OutputType() == tflite.TensorType.INT32
        assert _const(m, tensors[op_in[1]]).tolist() == [opts["axis"]]
        assert tensors[op_out[0]].Type() == tflite.TensorType.INT32
    elif op in B.COMPARISONS or op.startswith("LOGICAL"):
        assert tensors[op_out[0]].Type() == tflite.TensorType.BOOL
    elif op == "CAST":
        assert (o.InDataType(), o.OutDataType()) == (
            tensors[op_in[0]].Type(), tensors[op_out[0]].Type())
        assert tensors[op_out[0]].Quantization() is None or \
            not tensors[op_out[0]].Quantization().ScaleLength()
    elif op == "TRANSPOSE_CONV":
        sh, sw = B._pair(opts.get("stride", 2))
        assert (o.StrideH(), o.StrideW()) == (sh, sw)
        assert o.Padding() == B.PADDINGS[opts.get("padding", "SAME")]
        assert o.FusedActivationFunction() == B.ACTIVATIONS[opts.get("activation", "NONE")]
        assert _const(m, tensors[op_in[0]]).tolist() == list(tensors[op_out[0]].ShapeAsNumpy())
        w = tensors[op_in[1]]
        if dtype == "int8":  # per-channel symmetric weights on axis 0, int32 bias
            q = w.Quantization()
            assert q.ScaleLength() == w.ShapeAsNumpy()[0] and q.QuantizedDimension() == 0
            assert tensors[op_in[3]].Type() == tflite.TensorType.INT32
    elif op == "BATCH_MATMUL":
        assert (o.AdjX(), o.AdjY()) == (opts.get("adj_x", False), opts.get("adj_y", False))
    inputs = _family_inputs(model)
    a, b = R.run_tflm(model, inputs)[0], R.run_litert(model, inputs)[0]
    assert a.shape == b.shape == tuple(tensors[op_out[0]].ShapeAsNumpy())
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    else:
        assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("op,dtype,opts", [p for p in FAMILY_PARAMS
                                           if p.values[1] in ("float32", "bool", "int32")])
def test_family_matches_numpy(op: str, dtype: str, opts: dict[str, Any]) -> None:
    """float32, bool and int32 results equal numpy's on the read-back model."""
    model = _family_model(op, dtype, dict(opts))
    name, o, tensors, op_in, op_out, m = _read_family(model)
    inputs = _family_inputs(model)
    sg = m.Subgraphs(0)
    feed = dict(zip([int(v) for v in sg.InputsAsNumpy()], inputs, strict=True))
    consts = [None if i < 0 else _const(m, tensors[i]) for i in op_in]
    ins = [feed.get(i, c) for i, c in zip(op_in, consts, strict=True)]
    out_shape = tuple(int(d) for d in tensors[op_out[0]].ShapeAsNumpy())
    want = _numpy_family(name, o, ins, consts, out_shape)
    got = R.run_tflm(model, inputs)[0]
    if op == "CAST":
        want = np.trunc(want).astype(got.dtype) if got.dtype != np.bool_ else want != 0
    assert got.shape == np.shape(want)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


# -- state and control flow (issue 20, state family) -------------------------------------------


def _opname(model: Any, op: Any) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    value = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    return next(k for k, v in vars(tflite.BuiltinOperator).items() if v == value)


def _options(op: Any, cls: Any) -> Any:
    table = op.BuiltinOptions()
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    return opts


def test_state_and_control_flow_read_back_and_run() -> None:
    """VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE / CALL_ONCE, IF and WHILE: the ``tflite``
    reader sees the subgraphs, options, resource and bool tensors; TFLM and LiteRT run the
    model; over several invocations its outputs follow numpy's sums (state carried)."""
    mb = B.ModelBuilder(seed=5)
    init = mb.subgraph("init")
    start = np.array([[1.0, -2.0, 0.5]], np.float32)
    init.assign_variable(init.var_handle("acc", container="box"), init.constant(start, "float32"))
    x = mb.input((1, 3), "float32", name="x")
    c = mb.input((1,), "bool", name="c")
    mb.call_once(init)
    h = mb.var_handle("acc", container="box")
    s = mb.add(x, mb.read_variable(h, (1, 3)))
    mb.assign_variable(h, s)
    then, other = mb.subgraph("then"), mb.subgraph("else")
    then.output(then.add(then.input((1, 3)), np.full(3, 10.0, np.float32)))
    other.output(other.mul(other.input((1, 3)), np.full(3, 2.0, np.float32)))
    (y,) = mb.if_(c, then, other, [s])
    cond, body = mb.subgraph("cond"), mb.subgraph("body")
    cond.input((1, 3))
    cond.output(cond.input((1,), "bool"))
    bx = body.input((1, 3))
    body.input((1,), "bool")
    body.output(body.add(bx, bx))
    body.output(body.constant(np.array([False]), "bool"))
    z, _ = mb.while_(cond, body, [y, c])
    mb.output(z)
    model = mb.build()

    m = tflite.Model.GetRootAsModel(model, 0)
    assert m.SubgraphsLength() == 6
    main = m.Subgraphs(0)
    ops = [main.Operators(i) for i in range(main.OperatorsLength())]
    assert [_opname(m, o) for o in ops] == ["CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ADD",
                                            "ASSIGN_VARIABLE", "IF", "WHILE"]
    assert _options(ops[0], tflite.CallOnceOptions).InitSubgraphIndex() == 1
    var = _options(ops[1], tflite.VarHandleOptions)
    assert (var.Container(), var.SharedName()) == (b"box", b"acc")
    assert main.Tensors(ops[1].Outputs(0)).Type() == tflite.TensorType.RESOURCE
    assert main.Tensors(main.Inputs(1)).Type() == tflite.TensorType.BOOL
    cases = _options(ops[5], tflite.IfOptions)
    assert (cases.ThenSubgraphIndex(), cases.ElseSubgraphIndex()) == (2, 3)
    loop = _options(ops[6], tflite.WhileOptions)
    assert (loop.CondSubgraphIndex(), loop.BodySubgraphIndex()) == (4, 5)
    assert m.Subgraphs(1).Name() == b"init"

    rng = np.random.default_rng(0)
    runs = [[rng.uniform(-1, 1, (1, 3)).astype(np.float32), np.array([bool(k % 2)])]
            for k in range(4)]
    state = start.astype(np.float64)
    want = []
    for xv, cv in runs:
        state = state + xv
        v = state + 10.0 if cv[0] else state * 2.0
        want.append(v * 2.0 if cv[0] else v)  # the loop body runs once when c is true
    for got in (R.run_tflm_sequence(model, runs), R.run_litert_sequence(model, runs)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g[0], w, rtol=1e-5, atol=1e-5)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def _const_of(model: Any, sg: Any, i: int) -> np.ndarray:
    return ReadTensor(model, sg.Tensors(i)).data.astype(np.float64)


def test_sequence_ops_read_back_and_match_numpy() -> None:
    """LOGISTIC, TANH, SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM as the builder writes them: the
    ``tflite`` reader sees their options and the variable state tensors; over several
    invocations (state carried) TFLM and LiteRT agree with numpy's recurrences computed from
    the weights read back."""
    mb = B.ModelBuilder(seed=8)
    x = mb.input((2, 5), "float32", name="x")
    s = mb.svdf(x, 3, rank=2, memory=4, activation="RELU")
    seq = mb.input((1, 3, 4), "float32", name="seq")
    h = mb.lstm(seq, 5, cell_clip=0.7)
    mb.output(mb.logistic(s))
    mb.output(mb.tanh(h))
    model = mb.build()

    m = tflite.Model.GetRootAsModel(model, 0)
    sg = m.Subgraphs(0)
    ops = [sg.Operators(i) for i in range(sg.OperatorsLength())]
    assert [_opname(m, o) for o in ops] == ["SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM", "LOGISTIC",
                                            "TANH"]
    svdf, lstm = _options(ops[0], tflite.SVDFOptions), _options(
        ops[1], tflite.UnidirectionalSequenceLSTMOptions)
    assert (svdf.Rank(), svdf.FusedActivationFunction()) == (2, tflite.ActivationFunctionType.RELU)
    assert lstm.FusedActivationFunction() == tflite.ActivationFunctionType.TANH
    assert (lstm.TimeMajor(), np.float32(lstm.CellClip())) == (False, np.float32(0.7))
    assert sg.Tensors(ops[0].Inputs(4)).IsVariable()
    assert sg.Tensors(ops[1].Inputs(18)).IsVariable() and sg.Tensors(ops[1].Inputs(19)).IsVariable()
    assert [ops[1].Inputs(i) for i in (9, 10, 11, 16, 17, 20, 21, 22, 23)] == [-1] * 9

    wf, wt, bias = (_const_of(m, sg, ops[0].Inputs(i)) for i in (1, 2, 3))
    w = {i: _const_of(m, sg, ops[1].Inputs(i)) for i in (*range(1, 9), *range(12, 16))}
    rng = np.random.default_rng(2)
    runs = [[rng.uniform(-1, 1, (2, 5)).astype(np.float32),
             rng.uniform(-1, 1, (1, 3, 4)).astype(np.float32)] for _ in range(4)]
    state = np.zeros((2, 6, 4))
    hs, cs = np.zeros((1, 5)), np.zeros((1, 5))
    want = []
    for xv, sv in runs:
        state = np.concatenate([state[:, :, 1:], (xv @ wf.T)[:, :, None]], axis=2)
        svdf_out = np.maximum((state * wt).sum(-1).reshape(2, 3, 2).sum(-1) + bias, 0.0)
        outs = []
        for t in range(3):
            xt = sv[:, t]
            i = _sigmoid(xt @ w[1].T + hs @ w[5].T + w[12])
            f = _sigmoid(xt @ w[2].T + hs @ w[6].T + w[13])
            g = np.tanh(xt @ w[3].T + hs @ w[7].T + w[14])
            o = _sigmoid(xt @ w[4].T + hs @ w[8].T + w[15])
            cs = np.clip(f * cs + i * g, -0.7, 0.7)
            hs = o * np.tanh(cs)
            outs.append(hs)
        want.append([_sigmoid(svdf_out), np.tanh(np.stack(outs, axis=1))])
    for got in (R.run_tflm_sequence(model, runs), R.run_litert_sequence(model, runs)):
        for g, wv in zip(got, want, strict=True):
            np.testing.assert_allclose(g[0], wv[0], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(g[1], wv[1], rtol=1e-5, atol=1e-5)


# --- TFLM's signal library (the ops-signal family's builder methods) --------------------------


def _signal_model(kind: str) -> tuple[bytes, dict[str, Any]]:
    """A one-op model of each signal builder method, and the options it should carry."""
    mb = B.ModelBuilder(seed=4)

    def x(shape, dtype="int16"):
        return mb.input(shape, dtype, name="x", plain=True)

    if kind == "window":
        y, want = mb.signal_window(x((2, 16)), shift=5), {"shift": 5}
    elif kind == "auto_scale":
        y, want = mb.signal_fft_auto_scale(x((16,)))[0], {}
    elif kind == "rfft":
        y, want = mb.signal_rfft(x((1, 60), "float32"), 64), {"T": 0, "fft_length": 64}
    elif kind == "irfft":
        y, want = mb.signal_irfft(x((1, 66), "float32"), 64), {"T": 0, "fft_length": 64}
    elif kind == "energy":
        y, want = mb.signal_energy(x((20,)), 2, 7), {"end_index": 7, "start_index": 2}
    elif kind == "filter_bank":
        y, want = mb.signal_filter_bank(x((129,), "uint32"), 16, 8000, 100, 3800), \
            {"num_channels": 16}
    elif kind == "square_root":
        y, want = mb.signal_filter_bank_square_root(x((5,), "uint64"), 2), {}
    elif kind == "log":
        y, want = mb.signal_filter_bank_log(x((5,), "uint32"), 64, 3), \
            {"input_correction_bits": 3, "output_scale": 64}
    elif kind == "spectral_subtraction":
        y = mb.signal_filter_bank_spectral_subtraction(x((6,), "uint32"))[0]
        want = {"alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983,
                "clamping": False, "min_signal_remaining": 819, "num_channels": 6,
                "one_minus_smoothing": 15975, "smoothing": 409, "smoothing_bits": 10,
                "spectral_subtraction_bits": 14}
    elif kind == "pcan":
        y = mb.signal_pcan(x((6,), "uint32"), mb.input((6,), "uint32", name="n", plain=True))
        want = {"snr_shift": 6}
    elif kind == "framer":
        y, want = mb.signal_framer(x((1, 8)), 6, 4, True)[0], \
            {"frame_size": 6, "frame_step": 4, "prefill": True}
    elif kind == "stacker":
        y, want = mb.signal_stacker(x((3,)), 1, 1, 1)[0], \
            {"num_channels": 3, "stacker_left_context": 1, "stacker_right_context": 1,
             "stacker_step": 1}
    elif kind == "delay":
        y, want = mb.signal_delay(x((2, 5)), 3), {"delay_length": 3}
    else:
        y, want = mb.signal_overlap_add(x((2, 3, 5)), 2), {"T": 7, "frame_step": 2}
    mb.output(y)
    return mb.build(), want


SIGNAL_KINDS = ("window", "auto_scale", "rfft", "irfft", "energy", "filter_bank", "square_root",
                "log", "spectral_subtraction", "pcan", "framer", "stacker", "delay",
                "overlap_add")
_SIGNAL_NAMES = {"window": "SignalWindow", "auto_scale": "SignalFftAutoScale",
                 "rfft": "SignalRfft", "irfft": "SignalIrfft", "energy": "SignalEnergy",
                 "filter_bank": "SignalFilterBank", "square_root": "SignalFilterBankSquareRoot",
                 "log": "SignalFilterBankLog",
                 "spectral_subtraction": "SignalFilterBankSpectralSubtraction",
                 "pcan": "SignalPCAN", "framer": "SignalFramer", "stacker": "SignalStacker",
                 "delay": "SignalDelay", "overlap_add": "SignalOverlapAdd"}


def _signal_const(m: Any, t: Any) -> np.ndarray | None:
    buf = m.Buffers(t.Buffer())
    if buf is None or not buf.DataLength():
        return None
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    np_type = {12: np.uint64, 15: np.uint32}.get(t.Type()) or _FAMILY_NP[t.Type()]
    return np.frombuffer(buf.DataAsNumpy().tobytes(), np_type).reshape(shape)


def _signal_inputs(model: bytes, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for det in R.input_details(model):
        dt = np.dtype(det["dtype"])
        if dt.kind == "f":
            out.append(rng.uniform(-100, 100, det["shape"]).astype(dt))
        else:
            hi = 3000 if dt.kind == "i" else 1 << 24
            out.append(rng.integers(-hi if dt.kind == "i" else 0, hi, det["shape"]).astype(dt))
    return out


def _numpy_signal(kind: str, ins: list[np.ndarray], consts: dict[int, np.ndarray],
                  opts: dict[str, Any]) -> np.ndarray | None:
    """numpy's result of one signal op from read-back constants and options (None: shape and
    type only)."""
    x = ins[0].astype(np.int64)
    if kind == "window":
        return np.clip((x * consts[1].astype(np.int64)) >> opts["shift"], -32768, 32767)
    if kind == "energy":
        e = np.zeros(x.size // 2, np.int64)
        s, t = opts["start_index"], opts["end_index"]
        e[s:t] = x[2 * s:2 * t:2] ** 2 + x[2 * s + 1:2 * t:2] ** 2
        return e
    if kind == "filter_bank":
        w, u, fs, ws, wd = (consts[i].astype(np.int64) for i in range(1, 6))
        acc = np.zeros(opts["num_channels"] + 2, np.int64)
        for c in range(opts["num_channels"] + 1):
            band = x[fs[c]:fs[c] + wd[c]]
            acc[c] += int((band * w[ws[c]:ws[c] + wd[c]]).sum())
            acc[c + 1] += int((band * u[ws[c]:ws[c] + wd[c]]).sum())
        return acc[1:-1]
    if kind == "square_root":
        r = np.array([math.isqrt(int(v)) for v in ins[0]], np.int64)
        r = r + ((ins[0].astype(np.int64) - r * r) > r)
        return r >> 2
    if kind == "delay":
        d = opts["delay_length"]
        return np.concatenate([np.zeros((x.shape[0], d), np.int64), x], axis=1)[:, :x.shape[1]]
    if kind == "overlap_add":
        frames, size = x.shape[-2:]
        step = opts["frame_step"]
        acc = np.zeros((x.shape[0], frames * step + size), np.int64)
        for f in range(frames):
            acc[:, f * step:f * step + size] += x[:, f]
        return np.clip(acc[:, :frames * step], -32768, 32767)
    if kind == "rfft":
        return None
    return None


@pytest.mark.parametrize("kind", SIGNAL_KINDS)
def test_signal_model_loads_runs_and_reads_back(kind: str) -> None:
    """TFLM loads and runs each signal method's model; the tflite package reads back the custom
    operator and its FlexBuffers options (LiteRT has no kernels for them); where numpy says
    what the op computes, TFLM agrees on the read-back model."""
    from flatbuffers import flexbuffers

    model, want = _signal_model(kind)
    m = tflite.Model.GetRootAsModel(model, 0)
    sg = m.Subgraphs(0)
    op = sg.Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex())
    assert code.BuiltinCode() == tflite.BuiltinOperator.CUSTOM
    assert code.CustomCode().decode() == _SIGNAL_NAMES[kind]
    opts = flexbuffers.Loads(op.CustomOptionsAsNumpy().tobytes())
    assert opts == want
    tensors = [sg.Tensors(i) for i in range(sg.TensorsLength())]
    op_in = [int(v) for v in op.InputsAsNumpy()]
    assert all(tensors[i].Quantization() is None or not tensors[i].Quantization().ScaleLength()
               for i in op_in)  # signal tensors are plain values
    consts = {j: c for j, i in enumerate(op_in) if (c := _signal_const(m, tensors[i])) is not None}
    rng = np.random.default_rng(9)
    inputs = _signal_inputs(model, rng)
    got = R.run_tflm(model, inputs)[0]
    assert got.shape == tuple(int(d) for d in tensors[int(op.OutputsAsNumpy()[0])].ShapeAsNumpy())
    ref = _numpy_signal(kind, inputs, consts, opts)
    if kind == "energy":  # TFLM leaves the bins outside [start, end) undefined
        s, e = opts["start_index"], opts["end_index"]
        got, ref = got[s:e], ref[s:e]
    if ref is not None:
        np.testing.assert_array_equal(got.astype(np.int64), ref)
    if kind == "rfft":  # the float FFT is numpy's within float32 rounding
        want_fft = np.fft.rfft(inputs[0].astype(np.float64), 64)
        pairs = np.stack([want_fft.real, want_fft.imag], -1).reshape(got.shape)
        np.testing.assert_allclose(got, pairs, rtol=1e-4, atol=1e-2)

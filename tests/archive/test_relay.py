"""The Relay reader and its type inference, op by op, on text as TVM's printer writes it.

Each case is one operator call as a TVM frontend emits it and the printer prints it at a
release: the call syntax and the attributes that are printed are those of
``src/printer/relay_text_printer.cc`` (0.8-0.11) / ``src/relay/printer/relay_text_printer.cc``
(0.12-0.15): only attributes that differ from their default (``VisitNonDefaultAttrs``), double
attributes with an ``f`` (``1e-05f``), scalars as ``-128`` / ``0.5f`` (``support/scalars.cc``
from 0.9; ``ScalarLiteral`` in 0.8), and, from 0.12, ``/* span=NAME:0:0 */`` after each
frontend-made expression (``relay/frontend/common.py`` ``set_span``). The frontend that emits
each form is named in the case (``python/tvm/relay/frontend/<name>.py``, ``convert_*`` /
``_convert_*``). The expected type of every case is computed by numpy doing the same operation
on arrays of the argument shapes, never by the code under test.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from project_api.archive import relay
from project_api.archive.relay import parser
from project_api.archive.relay.types import TensorType, TupleType

# --- building printed text -------------------------------------------------------------------


def _ty(shape: tuple[int, ...], dtype: str, int64: bool = False) -> str:
    if not shape:
        return dtype
    dims = ", ".join(f"{d}i64" if int64 else str(d) for d in shape)
    return f"Tensor[({dims}), {dtype}]"


def _main(params: dict[str, tuple[tuple[int, ...], str]], lines: list[str], release: str,
          ret: str | None = None) -> str:
    """``str(mod)`` of a frontend's module: ``#[version]``, ``def @main(...)`` with the
    parameters (spans after them from 0.12), the statements, the result."""
    spans = release >= "0.12"
    decl = []
    for name, (shape, dtype) in params.items():
        decl.append(f"%{name}: {_ty(shape, dtype)}" + (f" /* span={name}:0:0 */" if spans else ""))
    head = f"def @main({', '.join(decl)})" + (f" -> {ret}" if ret else "")
    body = "\n".join(f"  {line}" for line in lines)
    return f'#[version = "0.0.5"]\n{head} {{\n{body}\n}}\n'


def _span(release: str, name: str = "op") -> str:
    return f" /* span={name}:0:0 */" if release >= "0.12" else ""


def _infer(params: dict[str, tuple[tuple[int, ...], str]], call: str, release: str) -> relay.Type:
    """The type inferred for ``call`` (the body's result) with ``params`` declared."""
    return relay.read_main(_main(params, [call + _span(release)], release)).result


def _np(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return np.ones(shape, dtype=dtype)


def _as_type(arr: np.ndarray, dtype: str | None = None) -> TensorType:
    return TensorType(tuple(arr.shape), dtype or str(arr.dtype))


RELEASES = ["0.8", "0.13"]


# --- one case per operator and printed form ----------------------------------------------------


def _conv_nchw(x: np.ndarray, kh: int, kw: int, oc: int, strides=(1, 1), pads=(0, 0, 0, 0),
               dilation=(1, 1)) -> np.ndarray:
    """A direct convolution's output (zeros) in NCHW, from numpy's sliding windows."""
    top, left, bottom, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    eh, ew = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))
    win = win[:, :, :: strides[0], :: strides[1]]
    return np.zeros((x.shape[0], oc, win.shape[2], win.shape[3]), x.dtype)


def _pool_nchw(x: np.ndarray, ph: int, pw: int, strides=(1, 1), pads=(0, 0, 0, 0),
               ceil: bool = False) -> np.ndarray:
    top, left, bottom, right = pads
    if ceil:  # ceil mode: a last, partial window where one fits
        bottom += strides[0] - 1
        right += strides[1] - 1
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (ph, pw), axis=(2, 3))
    return win[:, :, :: strides[0], :: strides[1]].max(axis=(-1, -2))


NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)

CASES = [
    # reshape (tflite.py convert_reshape / convert_fully_connected; keras.py _convert_flatten;
    # onnx.py Reshape with allowzero from 0.9). newshape codes: transform.cc InferNewShape.
    ("reshape -1", {"x": ((1, 4, 2), "float32")}, "reshape(%x, newshape=[-1, 8])",
     lambda: _as_type(_np((1, 4, 2)).reshape(-1, 8))),
    ("reshape 0 copies", {"x": ((2, 3, 4), "int8")}, "reshape(%x, newshape=[0, -1])",
     lambda: _as_type(_np((2, 3, 4), "int8").reshape(2, -1))),
    ("reshape -2 copies the rest", {"x": ((2, 3, 4), "int8")}, "reshape(%x, newshape=[2, -2])",
     lambda: _as_type(_np((2, 3, 4), "int8").reshape(2, 3, 4))),
    ("reshape -4 then -2", {"x": ((2, 3, 4), "int8")}, "reshape(%x, newshape=[-4, 1, 2, -2])",
     lambda: _as_type(_np((2, 3, 4), "int8").reshape(1, 2, 3, 4))),
    ("reshape -3 merges", {"x": ((2, 3, 4), "float32")}, "reshape(%x, newshape=[-3, 4])",
     lambda: _as_type(_np((2, 3, 4)).reshape(2 * 3, 4))),
    ("reshape -4 splits", {"x": ((12, 5), "float32")}, "reshape(%x, newshape=[-4, 3, -1, 5])",
     lambda: _as_type(_np((12, 5)).reshape(3, 12 // 3, 5))),
    ("reshape -4 left -1", {"x": ((12, 5), "float32")}, "reshape(%x, newshape=[-4, -1, 2, 0])",
     lambda: _as_type(_np((12, 5)).reshape(12 // 2, 2, 5))),
    ("reshape allowzero", {"x": ((0, 3), "float32")}, "reshape(%x, newshape=[3, 0], allowzero=1)",
     lambda: _as_type(_np((0, 3)).reshape(3, 0))),
    # dense: tflite.py convert_fully_connected (units=N; qnn.dense with four scalars and
    # out_dtype="int32"), keras.py _convert_dense, onnx.py Gemm / MatMul (units unset: the
    # default, not printed). MatmulRel, src/relay/op/nn/nn.h.
    ("nn.dense units", {"x": ((1, 16), "float32"), "w": ((10, 16), "float32")},
     "nn.dense(%x, %w, units=10)", lambda: _as_type(_np((1, 16)) @ _np((10, 16)).T)),
    ("nn.dense no units", {"x": ((3, 16), "float32"), "w": ((10, 16), "float32")},
     "nn.dense(%x, %w)", lambda: _as_type(_np((3, 16)) @ _np((10, 16)).T)),
    ("nn.dense out_dtype", {"x": ((1, 8), "int8"), "w": ((4, 8), "int8")},
     'nn.dense(%x, %w, units=4, out_dtype="int32")',
     lambda: _as_type(_np((1, 8), "int8").astype("int32") @ _np((4, 8), "int8").T.astype("int32"))),
    ("qnn.dense", {"x": ((1, 6), "int8"), "w": ((4, 6), "int8")},
     'qnn.dense(%x, %w, -128, 0, 0.0235294f, meta[relay.Constant][0], units=4, out_dtype="int32")',
     lambda: _as_type(np.zeros((1, 6), np.int32) @ np.zeros((4, 6), np.int32).T)),
    ("qnn.dense uint8", {"x": ((1, 6), "uint8"), "w": ((2, 6), "uint8")},
     'qnn.dense(%x, %w, 128, 127, 0.5f, 0.25f, units=2, out_dtype="int32")',
     lambda: _as_type(np.zeros((1, 6), np.int32) @ np.zeros((2, 6), np.int32).T)),
    # nn.batch_matmul: tflite.py convert_batch_matmul (transpose_b=False), onnx.py MatMul
    # (3-d, transpose_b=False after a transpose), pytorch.py matmul / bmm. Defaults:
    # transpose_a=False, transpose_b=True (BatchMatmulAttrs).
    ("nn.batch_matmul default", {"a": ((2, 3, 5), "float32"), "b": ((2, 4, 5), "float32")},
     "nn.batch_matmul(%a, %b)",
     lambda: _as_type(np.matmul(_np((2, 3, 5)), _np((2, 4, 5)).transpose(0, 2, 1)))),
    ("nn.batch_matmul transpose_b=False", {"a": ((1, 3, 5), "float32"),
                                           "b": ((2, 5, 4), "float32")},
     "nn.batch_matmul(%a, %b, transpose_b=False)",
     lambda: _as_type(np.matmul(_np((1, 3, 5)), _np((2, 5, 4))))),
    ("nn.batch_matmul transpose_a", {"a": ((2, 5, 3), "float32"), "b": ((2, 4, 5), "float32")},
     'nn.batch_matmul(%a, %b, out_dtype="float32", transpose_a=True)',
     lambda: _as_type(np.matmul(_np((2, 5, 3)).transpose(0, 2, 1),
                                _np((2, 4, 5)).transpose(0, 2, 1)))),
    # bias_add (tflite.py, keras.py after dense/conv; axis=3 for NHWC convs)
    ("nn.bias_add", {"x": ((1, 16), "float32"), "b": ((16,), "float32")},
     "nn.bias_add(%x, %b)", lambda: _as_type(_np((1, 16)) + _np((16,)))),
    ("nn.bias_add axis", {"x": ((1, 5, 5, 8), "int32"), "b": ((8,), "int32")},
     "nn.bias_add(%x, %b, axis=3)",
     lambda: _as_type(_np((1, 5, 5, 8), "int32") + _np((8,), "int32"))),
    # broadcasting binary ops (tflite.py _convert_elemwise, keras.py _convert_merge,
    # onnx.py Add/Sub/Mul/Div, pytorch.py add/sub/mul/div): BroadcastRel.
    ("add", {"a": ((1, 4, 1), "float32"), "b": ((3, 1, 5), "float32")}, "add(%a, %b)",
     lambda: _as_type(_np((1, 4, 1)) + _np((3, 1, 5)))),
    ("subtract scalar", {"a": ((2, 3), "float32")}, "subtract(%a, 1f)",
     lambda: _as_type(_np((2, 3)) - np.float32(1))),
    ("multiply", {"a": ((1, 8), "float32"), "b": ((8,), "float32")}, "multiply(%a, %b)",
     lambda: _as_type(_np((1, 8)) * _np((8,)))),
    ("divide", {"a": ((4, 1), "float32"), "b": ((1, 6), "float32")}, "divide(%a, %b)",
     lambda: _as_type(_np((4, 1)) / _np((1, 6)))),
    ("qnn.add", {"a": ((1, 4, 4, 8), "int8"), "b": ((1, 4, 4, 8), "int8")},
     'qnn.add(%a, %b, 0.5f, -3, 0.25f, 2, 0.75f, 1)',
     lambda: _as_type(_np((1, 4, 4, 8), "int8") + _np((1, 4, 4, 8), "int8"))),
    # element-wise unary ops keep the type (tflite.py convert_relu/convert_logistic/...,
    # keras.py _convert_activation)
    ("nn.relu", {"x": ((1, 7), "float32")}, "nn.relu(%x)", lambda: _as_type(np.maximum(_np((1, 7)), 0))),
    ("clip", {"x": ((1, 7), "int8")}, "clip(%x, a_min=-128f, a_max=127f)",
     lambda: _as_type(np.clip(_np((1, 7), "int8"), -128, 127))),
    ("sigmoid", {"x": ((2, 2), "float32")}, "sigmoid(%x)",
     lambda: _as_type(1 / (1 + np.exp(-_np((2, 2)))))),
    ("tanh", {"x": ((2, 2), "float32")}, "tanh(%x)", lambda: _as_type(np.tanh(_np((2, 2))))),
    ("nn.softmax", {"x": ((1, 10), "float32")}, "nn.softmax(%x)",
     lambda: _as_type(np.exp(_np((1, 10))) / np.exp(_np((1, 10))).sum(-1, keepdims=True))),
    ("nn.softmax axis", {"x": ((1, 10, 3), "float32")}, "nn.softmax(%x, axis=1)",
     lambda: _as_type(_np((1, 10, 3)))),
    ("cast", {"x": ((1, 3), "int8")}, 'cast(%x, dtype="float32")',
     lambda: _as_type(_np((1, 3), "int8").astype("float32"))),
    # quantization (tflite.py quantize/dequantize/requantize helpers): QuantizeRel,
    # DequantizeRel, RequantizeRel in src/relay/qnn/op/.
    ("qnn.quantize", {"x": ((1, 1), "float32")}, 'qnn.quantize(%x, 0.00390625f, -128, out_dtype="int8")',
     lambda: _as_type(_np((1, 1)).astype("int8"))),
    ("qnn.quantize per-axis", {"x": ((2, 3), "float32")},
     'qnn.quantize(%x, meta[relay.Constant][0], meta[relay.Constant][1], out_dtype="uint8", axis=0)',
     lambda: _as_type(_np((2, 3)).astype("uint8"))),
    ("qnn.dequantize", {"x": ((1, 4), "int8")}, "qnn.dequantize(%x, 0.0235294f, -128)",
     lambda: _as_type(_np((1, 4), "int8").astype("float32"))),
    ("qnn.requantize", {"x": ((1, 4), "int32")},
     'qnn.requantize(%x, 0.000108f, 0, 0.0235294f, -128, axis=1, out_dtype="int8")',
     lambda: _as_type(_np((1, 4), "int32").astype("int8"))),
    # conv2d: tflite.py convert_conv (NHWC/HWIO, padding [t, l, b, r] from get_pad_value,
    # depthwise HWOI with groups), keras.py _convert_convolution (NCHW default), onnx.py Conv
    # (padding 4-form, dilations, group), pytorch.py _convolution. Conv2DRel.
    ("nn.conv2d NCHW defaults", {"x": ((1, 3, 10, 12), "float32"), "w": ((8, 3, 3, 3), "float32")},
     "nn.conv2d(%x, %w, padding=[0, 0, 0, 0], channels=8, kernel_size=[3, 3])",
     lambda: _as_type(_conv_nchw(_np((1, 3, 10, 12)), 3, 3, 8))),
    ("nn.conv2d NHWC padding 4", {"x": ((1, 9, 9, 2), "float32"), "w": ((3, 3, 2, 4), "float32")},
     'nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3], '
     'data_layout="NHWC", kernel_layout="HWIO")',
     lambda: _as_type(_conv_nchw(_np((1, 2, 9, 9)), 3, 3, 4, (2, 2), (1, 1, 1, 1)).transpose(
         NCHW_TO_NHWC))),
    ("nn.conv2d padding 2 (h, w)", {"x": ((1, 1, 7, 8), "float32"), "w": ((2, 1, 3, 5), "float32")},
     "nn.conv2d(%x, %w, padding=[1, 2])",
     lambda: _as_type(_conv_nchw(_np((1, 1, 7, 8)), 3, 5, 2, pads=(1, 2, 1, 2)))),
    ("nn.conv2d padding 1", {"x": ((1, 1, 7, 8), "float32"), "w": ((2, 1, 3, 3), "float32")},
     "nn.conv2d(%x, %w, padding=[2])",
     lambda: _as_type(_conv_nchw(_np((1, 1, 7, 8)), 3, 3, 2, pads=(2, 2, 2, 2)))),
    ("nn.conv2d asymmetric padding", {"x": ((1, 6, 6, 1), "float32"),
                                      "w": ((3, 3, 1, 2), "float32")},
     'nn.conv2d(%x, %w, strides=[2, 2], padding=[0, 0, 1, 1], channels=2, kernel_size=[3, 3], '
     'data_layout="NHWC", kernel_layout="HWIO")',
     lambda: _as_type(_conv_nchw(_np((1, 1, 6, 6)), 3, 3, 2, (2, 2), (0, 0, 1, 1)).transpose(
         NCHW_TO_NHWC))),
    ("nn.conv2d dilation", {"x": ((1, 2, 11, 11), "float32"), "w": ((4, 2, 3, 3), "float32")},
     "nn.conv2d(%x, %w, padding=[0, 0, 0, 0], dilation=[2, 3])",
     lambda: _as_type(_conv_nchw(_np((1, 2, 11, 11)), 3, 3, 4, dilation=(2, 3)))),
    ("nn.conv2d depthwise HWOI", {"x": ((1, 8, 8, 4), "float32"), "w": ((3, 3, 4, 1), "float32")},
     'nn.conv2d(%x, %w, padding=[1, 1, 1, 1], groups=4, channels=4, kernel_size=[3, 3], '
     'data_layout="NHWC", kernel_layout="HWOI")',
     lambda: _as_type(_conv_nchw(_np((1, 4, 8, 8)), 3, 3, 4, pads=(1, 1, 1, 1)).transpose(
         NCHW_TO_NHWC))),
    ("nn.conv2d groups from weight", {"x": ((1, 4, 5, 5), "float32"), "w": ((6, 2, 1, 1), "float32")},
     "nn.conv2d(%x, %w, padding=[0, 0, 0, 0], groups=2)",
     lambda: _as_type(_conv_nchw(_np((1, 4, 5, 5)), 1, 1, 6))),
    ("nn.conv2d out_layout", {"x": ((1, 3, 6, 6), "float32"), "w": ((5, 3, 1, 1), "float32")},
     'nn.conv2d(%x, %w, padding=[0, 0, 0, 0], channels=5, kernel_size=[1, 1], out_layout="NHWC")',
     lambda: _as_type(_conv_nchw(_np((1, 3, 6, 6)), 1, 1, 5).transpose(NCHW_TO_NHWC))),
    ("qnn.conv2d", {"x": ((1, 10, 10, 3), "int8"), "w": ((3, 3, 3, 8), "int8")},
     'qnn.conv2d(%x, %w, -128, 0, 0.0039f, meta[relay.Constant][0], strides=[2, 2], '
     'padding=[0, 0, 1, 1], channels=8, kernel_size=[3, 3], data_layout="NHWC", '
     'kernel_layout="HWIO", out_dtype="int32")',
     lambda: _as_type(_conv_nchw(np.zeros((1, 3, 10, 10), np.int32), 3, 3, 8, (2, 2),
                                 (0, 0, 1, 1)).transpose(NCHW_TO_NHWC))),
    # pooling: tflite.py convert_pool2d (layout="NHWC", padding 4-form), keras.py
    # _convert_pooling, onnx.py MaxPool/AveragePool (ceil_mode), pytorch.py max_pool2d.
    ("nn.max_pool2d NHWC", {"x": ((1, 8, 8, 4), "int8")},
     'nn.max_pool2d(%x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], layout="NHWC")',
     lambda: _as_type(_pool_nchw(_np((1, 4, 8, 8), "int8"), 2, 2, (2, 2)).transpose(NCHW_TO_NHWC))),
    ("nn.max_pool2d ceil_mode", {"x": ((1, 2, 7, 7), "float32")},
     "nn.max_pool2d(%x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], ceil_mode=True)",
     lambda: _as_type(_pool_nchw(_np((1, 2, 7, 7)), 2, 2, (2, 2), ceil=True))),
    ("nn.avg_pool2d padding", {"x": ((1, 3, 9, 9), "float32")},
     "nn.avg_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], "
     "count_include_pad=True)",
     lambda: _as_type(_pool_nchw(_np((1, 3, 9, 9)), 3, 3, (2, 2), (1, 1, 1, 1)))),
    ("nn.global_avg_pool2d NHWC", {"x": ((1, 5, 5, 16), "float32")},
     'nn.global_avg_pool2d(%x, layout="NHWC")',
     lambda: _as_type(_np((1, 5, 5, 16)).mean(axis=(1, 2), keepdims=True))),
    ("nn.global_avg_pool2d", {"x": ((2, 16, 5, 4), "float32")}, "nn.global_avg_pool2d(%x)",
     lambda: _as_type(_np((2, 16, 5, 4)).mean(axis=(2, 3), keepdims=True))),
    # nn.pad: tflite.py convert_pad (pad_value a scalar argument since 0.8), onnx.py Pad.
    ("nn.pad", {"x": ((1, 4, 4, 3), "float32")},
     "nn.pad(%x, 0f, pad_width=[[0, 0], [1, 2], [0, 1], [0, 0]])",
     lambda: _as_type(np.pad(_np((1, 4, 4, 3)), [[0, 0], [1, 2], [0, 1], [0, 0]]))),
    ("nn.pad quantized", {"x": ((1, 4, 4, 3), "int8")},
     "nn.pad(%x, -128f, pad_width=[[0, 0], [1, 1], [1, 1], [0, 0]])",
     lambda: _as_type(np.pad(_np((1, 4, 4, 3), "int8"), [[0, 0], [1, 1], [1, 1], [0, 0]]))),
    # mean: tflite.py _convert_reduce (axis=[1, 2], keepdims=True), onnx.py ReduceMean.
    ("mean keepdims", {"x": ((1, 5, 5, 8), "float32")}, "mean(%x, axis=[1, 2], keepdims=True)",
     lambda: _as_type(_np((1, 5, 5, 8)).mean(axis=(1, 2), keepdims=True))),
    ("mean", {"x": ((2, 3, 4), "float32")}, "mean(%x, axis=[-1])",
     lambda: _as_type(_np((2, 3, 4)).mean(axis=-1))),
    ("mean all", {"x": ((2, 3, 4), "float32")}, "mean(%x)",
     lambda: _as_type(np.asarray(_np((2, 3, 4)).mean()).astype("float32"))),
    ("mean exclude", {"x": ((2, 3, 4), "float32")}, "mean(%x, axis=[1], exclude=True)",
     lambda: _as_type(_np((2, 3, 4)).mean(axis=(0, 2)))),
    # squeeze / expand_dims / transpose (tflite.py convert_squeeze, keras.py _convert_dense for
    # RNN inputs, onnx.py Squeeze/Unsqueeze/Transpose, pytorch.py permute)
    ("squeeze axis", {"x": ((1, 1, 1, 10), "float32")}, "squeeze(%x, axis=[1, 2])",
     lambda: _as_type(np.squeeze(_np((1, 1, 1, 10)), axis=(1, 2)))),
    ("squeeze all", {"x": ((1, 3, 1, 10), "float32")}, "squeeze(%x)",
     lambda: _as_type(np.squeeze(_np((1, 3, 1, 10))))),
    ("expand_dims", {"x": ((3, 4), "float32")}, "expand_dims(%x, axis=0)",
     lambda: _as_type(np.expand_dims(_np((3, 4)), 0))),
    ("expand_dims negative, two", {"x": ((3, 4), "float32")},
     "expand_dims(%x, axis=-1, num_newaxis=2)",
     lambda: _as_type(np.expand_dims(np.expand_dims(_np((3, 4)), -1), -1))),
    ("transpose", {"x": ((1, 2, 3, 4), "float32")}, "transpose(%x, axes=[0, 3, 1, 2])",
     lambda: _as_type(_np((1, 2, 3, 4)).transpose(0, 3, 1, 2))),
    ("transpose reversed", {"x": ((1, 2, 3), "float32")}, "transpose(%x)",
     lambda: _as_type(_np((1, 2, 3)).T)),
    # strided_slice: tflite.py convert_strided_slice, onnx.py Slice (axes), pytorch.py slice.
    # Printed with axes=None since begin/end/strides/axes have no default (StridedSliceAttrs).
    ("strided_slice", {"x": ((1, 10, 4), "float32")},
     "strided_slice(%x, begin=[0, 2, 0], end=[1, 9, 4], strides=[1, 3, 1], axes=None)",
     lambda: _as_type(_np((1, 10, 4))[0:1, 2:9:3, 0:4])),
    ("strided_slice short, negative", {"x": ((4, 6), "float32")},
     "strided_slice(%x, begin=[-3], end=[4], strides=[1], axes=None)",
     lambda: _as_type(_np((4, 6))[-3:4])),
    ("strided_slice negative stride", {"x": ((8,), "float32")},
     "strided_slice(%x, begin=[6], end=[1], strides=[-2], axes=None)",
     lambda: _as_type(_np((8,))[6:1:-2])),
    ("strided_slice axes", {"x": ((2, 7, 5), "float32")},
     "strided_slice(%x, begin=[1], end=[100], strides=[2], axes=[1])",
     lambda: _as_type(_np((2, 7, 5))[:, 1:100:2])),
    ("strided_slice size mode", {"x": ((2, 7, 5), "float32")},
     'strided_slice(%x, begin=[0, 2], end=[2, 3], strides=[1], axes=None, slice_mode="size")',
     lambda: _as_type(_np((2, 7, 5))[0:2, 2:5])),
    # frontends' other shape operators: keras.py _convert_flatten / onnx.py Flatten
    # (nn.batch_flatten), pytorch.py adaptive_avg_pool2d, keras.py _convert_convolution1d and
    # _convert_pooling for 1-D (NWC), onnx.py ArgMax, comparisons (bool results).
    ("nn.batch_flatten", {"x": ((2, 3, 4, 5), "float32")}, "nn.batch_flatten(%x)",
     lambda: _as_type(_np((2, 3, 4, 5)).reshape(2, -1))),
    ("nn.adaptive_avg_pool2d", {"x": ((1, 8, 7, 7), "float32")},
     "nn.adaptive_avg_pool2d(%x, output_size=[1, 1])",
     lambda: _as_type(_np((1, 8, 7, 7)).mean(axis=(2, 3), keepdims=True))),
    ("nn.conv1d NWC", {"x": ((1, 20, 3), "float32"), "w": ((5, 3, 8), "float32")},
     'nn.conv1d(%x, %w, strides=[2], padding=[1, 1], channels=8, kernel_size=[5], '
     'data_layout="NWC", kernel_layout="WIO")',
     lambda: _as_type(np.zeros((1, np.lib.stride_tricks.sliding_window_view(
         np.pad(_np((20,)), 1), 5)[::2].shape[0], 8), np.float32))),
    ("nn.max_pool1d", {"x": ((1, 4, 9), "float32")}, "nn.max_pool1d(%x, pool_size=[3], strides=[2])",
     lambda: _as_type(np.lib.stride_tricks.sliding_window_view(_np((1, 4, 9)), 3, axis=2)
                      [:, :, ::2].max(-1))),
    ("argmax", {"x": ((1, 10), "float32")}, "argmax(%x, axis=[1])",
     lambda: _as_type(np.argmax(_np((1, 10)), axis=1).astype("int32"))),
    ("greater", {"a": ((2, 1), "float32"), "b": ((1, 3), "float32")}, "greater(%a, %b)",
     lambda: _as_type(_np((2, 1)) > _np((1, 3)))),
    # layout_transform (relay ConvertLayout; in frontends' text via tvmc --desired-layout)
    ("layout_transform", {"x": ((1, 49, 10, 8), "int8")},
     'layout_transform(%x, src_layout="NHWC", dst_layout="NCHW")',
     lambda: _as_type(np.einsum("NHWC->NCHW", _np((1, 49, 10, 8), "int8")))),
    ("layout_transform kernel", {"w": ((3, 3, 1, 8), "int8")},
     'layout_transform(%w, src_layout="HWIO", dst_layout="OIHW")',
     lambda: _as_type(np.einsum("HWIO->OIHW", _np((3, 3, 1, 8), "int8")))),
]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_operator_types_match_numpy(case, release: str) -> None:
    _name, params, call, want = case
    assert _infer(params, call, release) == want()


def _stmts(release: str, *lines: str) -> list[str]:
    return [line.replace(";", _span(release) + ";", 1) if line.endswith(";") else line
            for line in lines]


@pytest.mark.parametrize("release", RELEASES)
def test_concatenate_of_a_tuple_statement(release: str) -> None:
    """The printer gives a tuple its own temporary (it is not always inlined): tflite.py
    convert_concatenation, keras.py _convert_merge (concat)."""
    text = _main({"a": ((1, 2, 2, 3), "float32"), "b": ((1, 2, 2, 5), "float32")}, _stmts(
        release, "%0 = (%a, %b);", "concatenate(%0, axis=3)"), release)
    want = np.concatenate([_np((1, 2, 2, 3)), _np((1, 2, 2, 5))], axis=3)
    assert relay.read_main(text).result == _as_type(want)
    inline = _main({"a": ((2, 3), "float32"), "b": ((4, 3), "float32")},
                   ["concatenate((%a, %b))"], release)
    assert relay.read_main(inline).result == _as_type(np.concatenate([_np((2, 3)), _np((4, 3))]))


def test_batch_norm_is_a_tuple() -> None:
    """onnx.py / keras.py BatchNormalization: ``%n = nn.batch_norm(...)`` then ``%n.0``."""
    text = _main({"x": ((1, 6, 4, 4), "float32"), "g": ((6,), "float32"),
                  "b": ((6,), "float32"), "m": ((6,), "float32"), "v": ((6,), "float32")},
                 ["%0 = nn.batch_norm(%x, %g, %b, %m, %v, epsilon=1e-05f);", "(%0.0, %0.1)"],
                 "0.8")
    assert relay.read_main(text).result == TupleType(
        (TensorType((1, 6, 4, 4), "float32"), TensorType((6,), "float32")))


@pytest.mark.parametrize("release", RELEASES)
def test_tuples_and_projections(release: str) -> None:
    """``split`` (tflite.py convert_split) and ``nn.dropout`` (keras/onnx) return tuples; the
    printer projects with ``%n.k`` (TupleGetItem)."""
    text = _main({"x": ((1, 12), "float32")}, _stmts(
        release,
        "%0 = split(%x, indices_or_sections=3, axis=1);",
        "%1 = %0.2;",
        "%2 = split(%x, indices_or_sections=[2, 7], axis=1);",
        "%3 = nn.dropout(%1, rate=0.5f);",
        "(%3.0, %2.1, %2.2)"), release)
    parts = np.split(_np((1, 12)), 3, axis=1)
    uneven = np.split(_np((1, 12)), [2, 7], axis=1)
    assert relay.read_main(text).result == TupleType(
        (_as_type(parts[2]), _as_type(uneven[1]), _as_type(uneven[2])))


def test_tuple_of_one_prints_a_trailing_comma() -> None:
    text = _main({"x": ((2,), "int8")}, ["(%x,)"], "0.13")
    assert relay.read_main(text).result == TupleType((TensorType((2,), "int8"),))


# --- the printer's syntax -----------------------------------------------------------------------


def test_printed_types_are_used_and_checked() -> None:
    """``/* ty=T */`` (PrintOptionalInfo) is TVM's own inference: an operator we do not know
    still has a type, and the printed type wins over ours."""
    text = ('def @main(%x: Tensor[(1, 4), float32] /* ty=Tensor[(1, 4), float32] */) -> '
            'Tensor[(1, 8), float32] {\n'
            '  %0 = image.resize2d(%x, size=[1, 8]) /* ty=Tensor[(1, 8), float32] span=r:0:0 */;\n'
            '  nn.relu(%0) /* ty=Tensor[(1, 8), float32] */\n}\n')
    main = relay.read_main(text)
    assert main.result == TensorType((1, 8), "float32")
    assert main.declared == TensorType((1, 8), "float32") and main.has_declared
    assert main.unknown_ops == ["image.resize2d"]


def test_int64_dimensions_and_scalars() -> None:
    """From 0.9, int64 dimensions and scalars print with ``i64`` (support/scalars.cc
    IntImmToString); 0.8 printed them plainly."""
    text = ("def @main(%x: Tensor[(1i64, 6i64), float32], %y: Tensor[(6), float32]) {\n"
            "  %0 = reshape(%x, newshape=[2i64, 3i64]);\n"
            "  %1 = add(%0, 1i64);\n"
            "  %1\n}\n")
    main = relay.read_main(text)
    assert main.params[0].annotation == TensorType((1, 6), "float32")
    assert main.result == TensorType((2, 3), "float32")


def test_tflite_names_spans_and_output_tensor_names() -> None:
    """TFLite names keep ``:`` and ``/`` (AllocVar prints the name hint raw, ``v`` before a
    non-letter); spans name the TFLite output tensors, ``;``-joined for fused ops."""
    text = ('#[version = "0.0.5"]\n'
            'def @main(%serving_default_input_1:0: Tensor[(1, 4), int8] /* span='
            'serving_default_input_1:0:0:0 */, %v_param_1: Tensor[(2, 4), int8] /* span='
            'sequential/dense/MatMul:0:0 */, %model/x.1: Tensor[(2), int32], output_tensor_names='
            '["StatefulPartitionedCall_0"]) {\n'
            '  %0 = reshape(%serving_default_input_1:0, newshape=[-1, 4]) /* span=sequential/dense/'
            'MatMul;sequential/dense/BiasAdd:0:0 */;\n'
            '  %1 = qnn.dense(%0, %v_param_1, -1 /* span=a:0:0 */, 0 /* span=a:0:0 */, 0.5f /* '
            'span=a:0:0 */, 0.25f /* span=a:0:0 */, units=2, out_dtype="int32") /* span=a:0:0 */;\n'
            '  %2 = nn.bias_add(%1, %model/x.1) /* span=a:0:0 */;\n'
            '  qnn.requantize(%2, 0.125f /* span=a:0:0 */, 0 /* span=a:0:0 */, 0.5f /* span=a:0:0'
            ' */, 3 /* span=a:0:0 */, out_dtype="int8") /* span=StatefulPartitionedCall:0:0:0 */\n'
            '}\n')
    main = relay.read_main(text)
    assert [p.name for p in main.params] == ["serving_default_input_1:0", "v_param_1", "model/x.1"]
    assert main.output_names == ["StatefulPartitionedCall_0"]
    assert main.result == TensorType((1, 2), "int8") and main.last_op == "qnn.requantize"
    assert not main.has_declared


def test_free_var_let_fn_and_global_calls() -> None:
    """``free_var`` (a variable the printer met unbound), ``let``, closures (``%0 = fn ...``,
    as after FuseOps) and calls of other global functions (BYOC partitions)."""
    text = ('def @sub(%a: Tensor[(3, 4), float32]) {\n  transpose(%a)\n}\n\n'
            'def @main(%x: Tensor[(3, 4), float32]) {\n'
            '  free_var %b: Tensor[(4), float32];\n'
            '  %0 = fn (%p0: Tensor[(3, 4), float32], %p1, Primitive=1) {\n'
            '    add(%p0, %p1)\n'
            '  };\n'
            '  let %y = %0(%x, %b);\n'
            '  %1 = @sub(%y);\n'
            '  %2 = if (True) { %1 } else { %1 };\n'
            '  (%2, %y)\n}\n'
            '#[metadata]\n{"root": 1}\n')
    main = relay.read_main(text)
    assert main.result == TupleType((TensorType((4, 3), "float32"), TensorType((3, 4), "float32")))


def test_an_unreadable_statement_leaves_only_its_dependents_unknown(caplog) -> None:
    text = ("def @main(%x: Tensor[(1, 4), float32], weird thing, %y: Tensor[(2), int8]) {\n"
            "  %0 = match (%x) { _ => %x };\n"
            "  %1 = nn.relu(%x);\n"
            "  (%0, %1, nn.relu(%0))\n}\n")
    with caplog.at_level(logging.DEBUG, logger="project_api.archive.relay"):
        main = relay.read_main(text)
    assert [p.name for p in main.params] == ["x", "y"]
    assert main.result == TupleType((None, TensorType((1, 4), "float32"), None))
    assert "weird thing" in caplog.text and "%0" in caplog.text


@pytest.mark.parametrize("text", [
    "", "not relay at all\n", "def @main(%x: Tensor[(1, 4), float32 /* unterminated\n",
    "fn (%x: Tensor[(1, 4), float32]) { nn.relu(%x) }\n",
    "def @other(%x: Tensor[(1, 4), float32]) { nn.relu(%x) }\n",
])
def test_text_without_a_readable_main_is_a_relay_error(text: str) -> None:
    with pytest.raises(relay.RelayError):
        relay.read_main(text)


def test_a_main_with_an_unreadable_body_keeps_its_parameters() -> None:
    main = relay.read_main("def @main(%x: Tensor[(1, 4), float32]) {\n  %0 = nn.relu(%x\n}\n")
    assert main.params[0].annotation == TensorType((1, 4), "float32")
    assert main.result is None


def test_unknown_dimensions() -> None:
    main = relay.read_main("def @main(%x: Tensor[(?, 4), float32], %n: Tensor[(n, 2), int8]) {\n"
                           "  %0 = nn.relu(%x);\n  reshape(%0, newshape=[-1])\n}\n")
    assert main.params[0].annotation == TensorType((None, 4), "float32")
    assert main.params[1].annotation == TensorType((None, 2), "int8")
    assert main.result == TensorType((None,), "float32")


def test_literals() -> None:
    consts = {"1": ("int32", 1), "-128": ("int32", -128), "0.5f": ("float32", 0.5),
              "1e-05f": ("float32", 1e-05), "2f64": ("float64", 2.0), "7i64": ("int64", 7),
              "3i16": ("int16", 3), "0.5f16": ("float16", 0.5)}
    for text, (dtype, value) in consts.items():
        c = parser._literal(text)
        assert (c.dtype, c.value) == (dtype, value)


def test_a_quantized_lenet_as_tvm_011_prints_it() -> None:
    """The body of a published TVM 0.11.dev archive (a TFLite LeNet for a Cortex-M7): input
    quantize, reshape to NHWC, qnn.conv2d / max_pool2d twice, transpose back, dense layers,
    dequantize. Spans and printed attributes as there (rounding/compute_dtype, axis=3)."""
    sp = " /* span=PartitionedCall:0:0:0 */"
    q = "-128" + sp + ", 0" + sp
    lines = [
        f'%0 = qnn.quantize(%x, 0.00392143f{sp}, -128{sp}, out_dtype="int8"){sp};',
        f"%1 = reshape(%0, newshape=[1, 28, 28, 1]){sp};",
        f"%2 = qnn.conv2d(%1, %w1, {q}, 0.00392143f{sp}, meta[relay.Constant][0]{sp}, "
        'padding=[0, 0, 0, 0], channels=6, kernel_size=[5, 5], data_layout="NHWC", '
        f'kernel_layout="HWIO", out_dtype="int32"){sp};',
        f"%3 = nn.bias_add(%2, %b1, axis=3){sp};",
        f"%4 = qnn.requantize(%3, meta[relay.Constant][1]{sp}, 0{sp}, 0.0196492f{sp}, -128{sp}, "
        f'axis=3, rounding="UPWARD", compute_dtype="int64", out_dtype="int8"){sp};',
        f"%5 = clip(%4, a_min=-128f, a_max=127f){sp};",
        f'%6 = nn.max_pool2d(%5, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], '
        f'layout="NHWC"){sp};',
        f"%7 = qnn.conv2d(%6, %w2, {q}, 0.0196492f{sp}, meta[relay.Constant][2]{sp}, "
        'padding=[0, 0, 0, 0], channels=16, kernel_size=[5, 5], data_layout="NHWC", '
        f'kernel_layout="HWIO", out_dtype="int32"){sp};',
        f'%8 = nn.max_pool2d(%7, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], '
        f'layout="NHWC"){sp};',
        f"%9 = transpose(%8, axes=[0, 3, 1, 2]){sp};",
        f"%10 = reshape(%9, newshape=[-1, 256]){sp};",
        f'%11 = qnn.dense(%10, %w3, {q}, 0.0133176f{sp}, 0.00173046f{sp}, units=10, '
        f'out_dtype="int32"){sp};',
        f'%12 = qnn.requantize(%11, 2.30457e-05f{sp}, 0{sp}, 0.0145833f{sp}, -128{sp}, '
        f'rounding="UPWARD", compute_dtype="int64", out_dtype="int8"){sp};',
        f"qnn.dequantize(%12, 0.0145833f{sp}, -128{sp}){sp}",
    ]
    text = _main({"x": ((1, 1, 28, 28), "float32"), "w1": ((5, 5, 1, 6), "int8"),
                  "b1": ((6,), "int32"), "w2": ((5, 5, 6, 16), "int8"),
                  "w3": ((10, 256), "int8")}, lines, "0.12")
    x = _np((1, 1, 28, 28)).reshape(1, 28, 28, 1)
    c1 = _conv_nchw(x.transpose(NHWC_TO_NCHW), 5, 5, 6)
    p1 = _pool_nchw(c1, 2, 2, (2, 2))
    c2 = _conv_nchw(p1, 5, 5, 16)
    p2 = _pool_nchw(c2, 2, 2, (2, 2))  # NCHW already: the transpose of the NHWC result
    flat = p2.reshape(-1, 256)
    want = _as_type(flat @ _np((10, 256)).T)
    assert relay.read_main(text).result == want


def test_mangled_text_is_read_or_refused_never_a_crash() -> None:
    """Seeded random damage to printed texts (cut, doubled, replaced characters, deep
    nesting): the reader returns what it can or raises RelayError, nothing else."""
    from tvm_corpus import _relay_text, _releases

    texts = [_relay_text(r) for r in _releases().values()]
    rng = np.random.default_rng(18)
    alphabet = list('()[]{},;%=:/*"? \n.-@0123456789abcdefxyz')
    read = refused = 0
    for k in range(600):
        text = texts[k % len(texts)]
        chars = list(text)
        for _ in range(int(rng.integers(1, 6))):
            i = int(rng.integers(0, len(chars)))
            what = int(rng.integers(0, 3))
            if what == 0:
                del chars[i : i + int(rng.integers(1, 40))]
            elif what == 1:
                chars.insert(i, str(rng.choice(alphabet)))
            else:
                chars[i] = str(rng.choice(alphabet))
        try:
            main = relay.read_main("".join(chars))
        except relay.RelayError:
            refused += 1
            continue
        read += 1
        assert isinstance(main.result, TensorType | TupleType) or main.result is None
    assert read > 100 and refused > 0

"""The model builder writes valid TFLite: both interpreters load its models, the ``tflite``
package reads back the operators and options asked for, and float32 results match numpy.

The numpy reference here reads weights, biases and options back from the serialized model
(with the ``tflite`` package's generated reader), not from the builder's own state, so a
builder bug in layout or quantization shows up as a mismatch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tflite

from project_api.emit import builder as B
from project_api.emit import reference as R

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
]

WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def modes_for(op: str) -> tuple[str, ...]:
    """Modes that make sense for ``op`` (per-channel only where there are weights)."""
    if op in WEIGHTED:
        return tuple(m for m in B.MODES if m != "int32")
    if op == "QUANTIZE":  # float32 -> int8, int8 -> int8, int16 -> int16, int32 -> int8
        return ("float32", "int8", "int16x8", "int32")
    if op == "DEQUANTIZE":
        return ("int8", "int16x8")
    return ("int8", "float32", "int16x8")


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

_NP = {0: np.float32, 2: np.int32, 4: np.int64, 7: np.int16, 9: np.int8}
_OPTION_CLASSES = {
    "CONV_2D": tflite.Conv2DOptions, "DEPTHWISE_CONV_2D": tflite.DepthwiseConv2DOptions,
    "FULLY_CONNECTED": tflite.FullyConnectedOptions, "AVERAGE_POOL_2D": tflite.Pool2DOptions,
    "MAX_POOL_2D": tflite.Pool2DOptions, "ADD": tflite.AddOptions, "MUL": tflite.MulOptions,
    "RESHAPE": tflite.ReshapeOptions, "SOFTMAX": tflite.SoftmaxOptions,
    "QUANTIZE": tflite.QuantizeOptions, "DEQUANTIZE": tflite.DequantizeOptions,
    "SQUEEZE": tflite.SqueezeOptions, "EXPAND_DIMS": tflite.ExpandDimsOptions,
}
_OP_NAMES = {getattr(tflite.BuiltinOperator, n): n for n in _OPTION_CLASSES}


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
    if name in ("RESHAPE", "QUANTIZE", "DEQUANTIZE", "SQUEEZE", "EXPAND_DIMS"):
        return ins[0]
    raise AssertionError(name)


def numpy_reference(model: bytes, inputs: list[np.ndarray]) -> tuple[np.ndarray, ReadTensor]:
    """Float64 result of a one-operator model, and its output tensor (for requantizing)."""
    tensors, ops, sg_in, sg_out = read_model(model)
    assert len(ops) == 1
    name, op_in, op_out, opts = ops[0]
    feed = dict(zip(sg_in, inputs, strict=True))
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
    y = numpy_op(name, opts, real, [])
    out = tensors[sg_out[0]]
    assert y.shape == out.shape, f"numpy result {y.shape} vs declared output {out.shape}"
    return y, out


def random_inputs(model: bytes, seed: int) -> list[np.ndarray]:
    """Random inputs over each input's full range (int8: every code; float: its range)."""
    rng = np.random.default_rng(1000 + seed)
    result = []
    for det in R.input_details(model):
        if det["dtype"] in (np.int8, np.int16):
            info = np.iinfo(det["dtype"])
            result.append(rng.integers(info.min, info.max + 1, size=det["shape"],
                                       dtype=det["dtype"]))
        elif det["dtype"] == np.int32:  # a quantized int32 input spans +-2^20
            result.append(rng.integers(-(1 << 20), 1 << 20, size=det["shape"], dtype=np.int32))
        else:
            result.append(rng.uniform(-3.0, 3.0, size=det["shape"]).astype(np.float32))
    return result


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op,opts,mode", case_params())
def test_model_loads_runs_and_reads_back(op: str, opts: dict[str, Any], mode: str) -> None:
    model = make(op, opts, mode)
    tensors, ops, sg_in, sg_out = read_model(model)
    assert [o[0] for o in ops] == [op]
    name, op_in, op_out, o = ops[0]
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

    # types and quantization as documented
    x, y = tensors[sg_in[0]], tensors[sg_out[0]]
    int16 = mode.startswith("int16")
    if int16 and op != "DEQUANTIZE":
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
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE", "SQUEEZE", "EXPAND_DIMS") and (
            mode != "float32"):
        assert (y.scale[0], y.zero_point[0]) == (x.scale[0], x.zero_point[0])
    if op == "ADD" and int16:
        assert o.PotScaleInt16() is False  # general scales, as TFLite's converter writes them

    inputs = random_inputs(model, 0)
    out_tflm = R.run_tflm(model, inputs)
    out_lite = R.run_litert(model, inputs)
    assert len(out_tflm) == len(out_lite) == 1
    assert out_tflm[0].shape == out_lite[0].shape == y.shape
    if out_tflm[0].dtype in (np.int8, np.int16):
        diff = np.abs(out_tflm[0].astype(int) - out_lite[0].astype(int))
        assert diff.max() <= 1, f"TFLM and LiteRT differ by {diff.max()} LSB"
    else:
        np.testing.assert_allclose(out_tflm[0], out_lite[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,opts,mode", [p for p in case_params() if p.values[2] == "float32"
                                          and p.values[0] != "QUANTIZE"])
def test_float32_matches_numpy(op: str, opts: dict[str, Any], mode: str) -> None:
    model = make(op, opts, mode, seed=3)
    inputs = random_inputs(model, 3)
    expected, _ = numpy_reference(model, inputs)
    for got in (R.run_tflm(model, inputs)[0], R.run_litert(model, inputs)[0]):
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
    got = R.run_tflm(model, inputs)[0]
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

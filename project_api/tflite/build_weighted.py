"""Building the weighted layers: convolutions (plain, depthwise, transposed), pooling, fully
connected, batch matmul, and the recurrent SVDF and LSTM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from project_api.tflite.tensors import (
    _NP_DTYPES,
    ACTIVATIONS,
    PADDINGS,
    TensorRef,
    _act_range,
    _check_choice,
    _out_size,
    _pair,
    quantize_array,
    quantize_params,
)


class WeightedLayers:
    """The weighted and windowed layers of :class:`~project_api.tflite.builder.ModelBuilder`."""

    def svdf(self, x: TensorRef, units: int, rank: int = 1, memory: int = 4,
             activation: str = "NONE", state_dtype: str | None = None,
             bias: bool = True, out_quant: tuple[float, int] | None = None,
             state_data: bool = False) -> TensorRef:
        """SVDF on ``x`` [batch, input]: ``units * rank`` filters over ``memory`` steps, its
        state a variable tensor [batch, memory * filters] (zero at start). int8 as the converter
        writes the keyword model: int8 weights_feature, ``state_dtype`` (default int16) time
        weights and state, symmetric, an int32 bias of scale state x time weights.
        ``state_data``: the state tensor also holds (random) data, which TFLM ignores."""
        _check_choice(activation, ACTIVATIONS, "activation")
        batch, n_in = x.shape
        filters = units * rank
        stem = self._name("svdf")
        wf = self._random_weights((filters, n_in), n_in)
        wt = self._random_weights((filters, memory), memory)
        b = self._random_bias(units) if bias else None
        lo, hi = self._linear_range(x, wf.astype(np.float64), None, 0)
        if x.dtype == "float32":
            wf_ref = self._add_tensor(f"{stem}/weights_feature", wf.shape, "float32", data=wf)
            wt_ref = self._add_tensor(f"{stem}/weights_time", wt.shape, "float32", data=wt)
            init = self.rng.uniform(-1, 1, (batch, memory * filters)) if state_data else None
            state = self.variable((batch, memory * filters), "float32", name=f"{stem}/state",
                                  initial=init)
            b_ref = (self._add_tensor(f"{stem}/bias", (units,), "float32", data=b)
                     if b is not None else None)
            y = self._activation(stem, (batch, units), "float32", None, None)
        else:
            sdt = state_dtype or "int16"
            wf_ref, _ = self._weights(f"{stem}/feature", wf, x, False, 0)
            wscale = float(np.float32(max(float(np.abs(wt).max()), 1e-8)
                                      / (32767.0 if sdt == "int16" else 127.0)))
            wt_ref = self._add_tensor(f"{stem}/weights_time", wt.shape, sdt,
                                      data=quantize_array(wt, wscale, 0, sdt),
                                      scale=[wscale], zero_point=[0])
            squant = quantize_params(lo, hi, sdt)
            init = (self.rng.integers(-100, 100, (batch, memory * filters)) if state_data
                    else None)
            state = self.variable((batch, memory * filters), sdt, quant=squant,
                                  name=f"{stem}/state", initial=init)
            bscale = float(np.float32(squant[0]) * np.float32(wscale))
            bvals = b if b is not None else np.zeros(units, np.float32)
            b_ref = self._add_tensor(f"{stem}/bias", (units,), "int32",
                                     data=np.round(bvals / bscale).astype(np.int32),
                                     scale=[bscale], zero_point=[0]) if bias else None
            reach = max(abs(lo), abs(hi)) * float(np.abs(wt).sum(axis=1).reshape(
                units, rank).sum(axis=1).max()) / 3.0 + float(np.abs(bvals).max(initial=0))
            q = out_quant or quantize_params(-reach, reach, x.dtype)
            y = self._activation(stem, (batch, units), x.dtype, q)
        inputs = [x.index, wf_ref.index, wt_ref.index, -1 if b_ref is None else b_ref.index,
                  state.index]
        self._op("SVDF", inputs, [y.index], {"rank": rank,
                                              "fused_activation_function": activation})
        return y

    def lstm(self, x: TensorRef, units: int, time_major: bool = False, cell_clip: float = 0.0,
             cell_scale: float = 2.0 ** -11, hidden_quant: tuple[float, int] | None = None
             ) -> TensorRef:
        """UNIDIRECTIONAL_SEQUENCE_LSTM on ``x`` ([batch, time, input], or [time, batch, input]
        when ``time_major``) with ``units`` cells: all four gates, TANH cell activation, hidden
        and cell state variable tensors (zero at start); the output is every step's hidden
        state. Quantized as TFLite's converter writes the integer LSTM: int8 (or int16)
        activations, symmetric int8 weights per tensor, int32 (int16: int64) biases of scale
        input x weights, an int16 cell state of the power-of-two ``cell_scale``, the hidden
        state and the output in ``hidden_quant`` (default: covering [-1, 1])."""
        b_dim, n_in = (x.shape[1], x.shape[2]) if time_major else (x.shape[0], x.shape[2])
        stem = self._name("lstm")
        dt = x.dtype
        refs: dict[int, int] = {}
        hq = None
        if dt != "float32":
            hq = hidden_quant or quantize_params(-1.0, 1.0, dt)
        hidden = self.variable((b_dim, units), dt, quant=hq, name=f"{stem}/hidden")
        cell = self.variable((b_dim, units), "float32" if dt == "float32" else "int16",
                             quant=None if dt == "float32" else (float(cell_scale), 0),
                             name=f"{stem}/cell")
        for gate, wx_i, wh_i, b_i in (("input", 1, 5, 12), ("forget", 2, 6, 13),
                                      ("cell", 3, 7, 14), ("output", 4, 8, 15)):
            wx = self._random_weights((units, n_in), n_in)
            wh = self._random_weights((units, units), units)
            bias = self._random_bias(units) + (1.0 if gate == "forget" else 0.0)
            wx_ref, _ = self._weights(f"{stem}/{gate}_x", wx, x, False, 0)
            wh_ref, _ = self._weights(f"{stem}/{gate}_h", wh, hidden, False, 0)
            refs[wx_i], refs[wh_i] = wx_ref.index, wh_ref.index
            if dt == "float32":
                b_ref = self._add_tensor(f"{stem}/{gate}_bias", (units,), "float32", data=bias)
            else:
                bdt = "int32" if dt == "int8" else "int64"
                bscale = float(np.float32(x.scale[0]) * np.float32(wx_ref.scale[0]))
                b_ref = self._add_tensor(f"{stem}/{gate}_bias", (units,), bdt,
                                         data=np.round(bias / bscale).astype(_NP_DTYPES[bdt]),
                                         scale=[bscale], zero_point=[0])
            refs[b_i] = b_ref.index
        refs[18], refs[19] = hidden.index, cell.index
        inputs = [x.index] + [refs.get(i, -1) for i in range(1, 24)]
        shape = (*x.shape[:2], units)
        y = self._activation(stem, shape, dt, hq, (-1.0, 1.0))
        self._op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y.index], {
            "fused_activation_function": "TANH", "cell_clip": float(cell_clip),
            "time_major": bool(time_major)})
        return y

    def conv2d(
        self,
        x: TensorRef,
        filters: int | np.ndarray,
        kernel_size: int | Sequence[int] = 3,
        bias: bool | np.ndarray = True,
        stride: int | Sequence[int] = 1,
        padding: str = "SAME",
        dilation: int | Sequence[int] = 1,
        activation: str = "NONE",
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
        bias_dtype: str | None = None,
    ) -> TensorRef:
        """CONV_2D over NHWC ``x``. ``filters``: output channels, or float weights [O, KH, KW, I].

        ``bias_dtype`` (int16 layers): ``int64`` (default) or ``int32``; without a bias, an
        ``int32`` one is recorded as the options' ``quantized_bias_type`` (TFLM then
        accumulates in int32)."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        c = x.shape[3]
        if isinstance(filters, np.ndarray):
            w = filters.astype(np.float32)
            if w.ndim != 4 or w.shape[3] != c:
                raise ValueError(f"conv2d weights must be [O, KH, KW, {c}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((int(filters), kh, kw, c), kh * kw * c)
        y, inputs = self._windowed("conv2d", x, w, 0, bias, stride, padding, dilation,
                                   activation, per_channel, out_quant, bias_dtype)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        options = {"padding": padding, "stride_w": sw, "stride_h": sh,
                   "fused_activation_function": activation, "dilation_w_factor": dw,
                   "dilation_h_factor": dh}
        options.update(self._bias_type_option(x, inputs, bias_dtype))
        self._op("CONV_2D", inputs, [y.index], options)
        return y

    def _bias_type_option(self, x: TensorRef, inputs: list[int],
                          bias_dtype: str | None) -> dict[str, str]:
        """``quantized_bias_type`` for an int16 layer without a bias asked to use int32."""
        has_bias = len(inputs) > 2 and inputs[2] >= 0
        if x.dtype == "int16" and not has_bias and bias_dtype == "int32":
            return {"quantized_bias_type": "int32"}
        return {}

    def _windowed(
        self,
        stem_prefix: str,
        x: TensorRef,
        w: np.ndarray,
        axis: int,
        bias: bool | np.ndarray,
        stride: int | Sequence[int],
        padding: str,
        dilation: int | Sequence[int],
        activation: str,
        per_channel: bool | None,
        out_quant: tuple[float, int] | None,
        bias_dtype: str | None = None,
    ) -> tuple[TensorRef, list[int]]:
        """Weights, bias and NHWC output of CONV_2D (``axis`` 0) or DEPTHWISE_CONV_2D (``axis``
        3: the output channel axis of ``w``, also its per-channel quantization axis); returns the
        output and the op's input indices."""
        n, h, wd, _ = x.shape
        _, kh, kw, _ = w.shape
        o = w.shape[axis]
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        stem = self._name(stem_prefix)
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, axis)
        b = self._bias_values(bias, o)
        oh = _out_size(h, kh, sh, dh, padding)
        ow = _out_size(wd, kw, sw, dw, padding)
        lo, hi = self._linear_range(x, w_eff, b, axis)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        inputs = [x.index, wref.index]
        if b is not None:
            inputs.append(self._bias(stem, b, x, wref, bias_dtype).index)
        y = self._activation(stem, (n, oh, ow, o), x.dtype, q, est)
        return y, inputs

    def _bias_values(self, bias: bool | np.ndarray, n: int) -> np.ndarray | None:
        if isinstance(bias, np.ndarray):
            if bias.shape != (n,):
                raise ValueError(f"bias must have shape ({n},), got {bias.shape}")
            return bias.astype(np.float32)
        return self._random_bias(n) if bias else None

    def depthwise_conv2d(
        self,
        x: TensorRef,
        kernel_size: int | Sequence[int] = 3,
        depth_multiplier: int = 1,
        weights: np.ndarray | None = None,
        bias: bool | np.ndarray = True,
        stride: int | Sequence[int] = 1,
        padding: str = "SAME",
        dilation: int | Sequence[int] = 1,
        activation: str = "NONE",
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
        bias_dtype: str | None = None,
    ) -> TensorRef:
        """DEPTHWISE_CONV_2D; ``weights`` (float, [1, KH, KW, C * depth_multiplier]) or generated."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        c = x.shape[3]
        oc = c * depth_multiplier
        if weights is not None:
            w = weights.astype(np.float32)
            if w.ndim != 4 or w.shape[0] != 1 or w.shape[3] != oc:
                raise ValueError(f"depthwise weights must be [1, KH, KW, {oc}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((1, kh, kw, oc), kh * kw)
        y, inputs = self._windowed("depthwise_conv2d", x, w, 3, bias, stride, padding, dilation,
                                   activation, per_channel, out_quant, bias_dtype)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        self._op("DEPTHWISE_CONV_2D", inputs, [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh,
            "depth_multiplier": depth_multiplier, "fused_activation_function": activation,
            "dilation_w_factor": dw, "dilation_h_factor": dh})
        return y

    def fully_connected(
        self,
        x: TensorRef,
        units: int | np.ndarray,
        bias: bool | np.ndarray = True,
        activation: str = "NONE",
        keep_num_dims: bool = False,
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
        bias_dtype: str | None = None,
    ) -> TensorRef:
        """FULLY_CONNECTED: ``units`` outputs, or float weights [units, last dim of x]."""
        _check_choice(activation, ACTIVATIONS, "activation")
        depth = x.shape[-1]
        if isinstance(units, np.ndarray):
            w = units.astype(np.float32)
            if w.ndim != 2 or w.shape[1] != depth:
                raise ValueError(f"fully_connected weights must be [units, {depth}], got {w.shape}")
        else:
            w = self._random_weights((int(units), depth), depth)
        nu = w.shape[0]
        stem = self._name("fully_connected")
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, 0)
        b = self._bias_values(bias, nu)
        lo, hi = self._linear_range(x, w_eff, b, 0)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        inputs = [x.index, wref.index, -1]
        if b is not None:
            inputs[2] = self._bias(stem, b, x, wref, bias_dtype).index
        batch = int(np.prod(x.shape)) // depth
        shape = (*x.shape[:-1], nu) if keep_num_dims else (batch, nu)
        y = self._activation(stem, shape, x.dtype, q, est)
        options = {"fused_activation_function": activation, "keep_num_dims": bool(keep_num_dims)}
        options.update(self._bias_type_option(x, inputs, bias_dtype))
        self._op("FULLY_CONNECTED", inputs, [y.index], options)
        return y

    def _pool(self, opcode: str, x: TensorRef, filter_size: int | Sequence[int],
              stride: int | Sequence[int] | None, padding: str, activation: str) -> TensorRef:
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        n, h, wd, c = x.shape
        fh, fw = _pair(filter_size)
        sh, sw = _pair(filter_size if stride is None else stride)
        oh = _out_size(h, fh, sh, 1, padding)
        ow = _out_size(wd, fw, sw, 1, padding)
        est = _act_range(*self.range_of(x), activation)
        y = self._activation(opcode.lower(), (n, oh, ow, c), x.dtype, x.quant, est)
        self._op(opcode, [x.index], [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh, "filter_width": fw,
            "filter_height": fh, "fused_activation_function": activation})
        return y

    def average_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                       stride: int | Sequence[int] | None = None, padding: str = "VALID",
                       activation: str = "NONE") -> TensorRef:
        """AVERAGE_POOL_2D (a quantized output keeps the input's quantization, as TFLite
        requires)."""
        return self._pool("AVERAGE_POOL_2D", x, filter_size, stride, padding, activation)

    def max_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                   stride: int | Sequence[int] | None = None, padding: str = "VALID",
                   activation: str = "NONE") -> TensorRef:
        """MAX_POOL_2D (a quantized output keeps the input's quantization)."""
        return self._pool("MAX_POOL_2D", x, filter_size, stride, padding, activation)

    def transpose_conv(
        self,
        x: TensorRef,
        filters: int | np.ndarray,
        kernel_size: int | Sequence[int] = 3,
        stride: int | Sequence[int] = 2,
        padding: str = "SAME",
        bias: bool | np.ndarray = True,
        activation: str = "NONE",
        output_shape: Sequence[int] | None = None,
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
        bias_dtype: str | None = None,
        shape_input: bool = False,
    ) -> TensorRef:
        """TRANSPOSE_CONV over NHWC ``x``: inputs (output shape, weights [O, KH, KW, I], ``x``,
        optional bias) as the converter writes them. ``filters``: output channels, or float
        weights. The output is ``in * stride`` (SAME) or ``(in - 1) * stride + k`` (VALID) unless
        ``output_shape`` says. int16 layers: ``bias_dtype`` int64 (default), int32 or int16.
        ``shape_input``: the output shape is a model input (as when the graph computes it; TFLM
        never reads its values), not a constant."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        n, h, wd, c = x.shape
        sh, sw = _pair(stride)
        if isinstance(filters, np.ndarray):
            w = filters.astype(np.float32)
            if w.ndim != 4 or w.shape[3] != c:
                raise ValueError(f"transpose_conv weights must be [O, KH, KW, {c}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((int(filters), kh, kw, c),
                                     max(1, kh * kw * c // (sh * sw)))
        o, kh, kw = w.shape[0], w.shape[1], w.shape[2]
        if output_shape is None:
            oh = h * sh if padding == "SAME" else (h - 1) * sh + kh
            ow = wd * sw if padding == "SAME" else (wd - 1) * sw + kw
            output_shape = (n, oh, ow, o)
        output_shape = tuple(int(d) for d in output_shape)
        stem = self._name("transpose_conv")
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, 0)
        b = self._bias_values(bias, o)
        lo, hi = self._linear_range(x, w_eff, b, 0)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        if shape_input:
            shape_t = self.input((4,), "int32", name=f"{stem}/output_shape")
        else:
            shape_t = self._add_tensor(self._name("transpose_conv/output_shape"), (4,), "int32",
                                       data=np.asarray(output_shape, dtype=np.int32))
        inputs = [shape_t.index, wref.index, x.index]
        if b is not None:
            if x.dtype == "int16" and bias_dtype == "int16":
                assert x.scale is not None and wref.scale is not None
                scales = (np.float64(x.scale[0]) * np.asarray(wref.scale)).astype(np.float32)
                qb = np.clip(np.round(b / scales.astype(np.float64)), -32767, 32767)
                bref = self._add_tensor(f"{stem}/bias", b.shape, "int16", data=qb,
                                        scale=scales.tolist(), zero_point=[0] * scales.size)
                self.float_values[bref.index] = b.astype(np.float64)
            else:
                bref = self._bias(stem, b, x, wref, bias_dtype)
            inputs.append(bref.index)
        y = self._activation(stem, output_shape, x.dtype, q, est)
        self._op("TRANSPOSE_CONV", inputs, [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh,
            "fused_activation_function": activation})
        return y

    def batch_matmul(self, a: TensorRef, b: TensorRef | np.ndarray, adj_x: bool = False,
                     adj_y: bool = False, out_quant: tuple[float, int] | None = None
                     ) -> TensorRef:
        """BATCH_MATMUL ``a @ b`` (``adj_x``/``adj_y``: the last two dimensions of ``a``/``b``
        transposed first), batch dimensions broadcast. ``b`` may be float values, made a
        constant of ``a``'s type (quantized per tensor as an activation; int16 symmetric)."""
        if not isinstance(b, TensorRef):
            values = np.asarray(b, dtype=np.float32)
            b = self.constant(values, a.dtype) if a.dtype != "float32" else self.constant(
                values, "float32")
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise ValueError("batch_matmul: both operands need at least two dimensions")
        rows, depth = (a.shape[-1], a.shape[-2]) if adj_x else (a.shape[-2], a.shape[-1])
        depth_b, cols = (b.shape[-1], b.shape[-2]) if adj_y else (b.shape[-2], b.shape[-1])
        if depth != depth_b:
            raise ValueError(f"batch_matmul: {a.shape} and {b.shape} do not multiply "
                             f"(adj_x={adj_x}, adj_y={adj_y})")
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        shape = (*batch, rows, cols)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        ma, mb_ = (alo + ahi) / 2, (blo + bhi) / 2
        va, vb = (ahi - alo) ** 2 / 12, (bhi - blo) ** 2 / 12
        std = math.sqrt(depth * (va * vb + va * mb_ ** 2 + vb * ma ** 2))
        lo, hi = depth * ma * mb_ - 3 * std, depth * ma * mb_ + 3 * std
        q, est = self._out_quant(a, out_quant, lo, hi, "NONE")
        y = self._activation("batch_matmul", shape, a.dtype, q, est)
        self._op("BATCH_MATMUL", [a.index, b.index], [y.index],
                 {"adj_x": bool(adj_x), "adj_y": bool(adj_y)})
        return y

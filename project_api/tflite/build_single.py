"""Building models of one operator, in every mode the parity tests and the demo need: the operator
tables, the default shapes, and the builder's one-operator methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from project_api.tflite.tensors import _QUANTIZED, COMPARISONS, TensorRef, quantize_params

#: Weight/activation types of :func:`single_op_model`: int8 (weights per tensor or per channel),
#: float32, int16x8 (int16 activations, int8 weights per tensor or per channel), int32 (plain
#: int32 inputs; for QUANTIZE a quantized int32 input), and for the operators that only move
#: data int64 and bool inputs.
MODES = ("int8", "int8_per_channel", "float32", "int16x8", "int16x8_per_channel", "int32",
         "int64", "bool")

_DEFAULT_SHAPES: dict[str, tuple[int, ...]] = {
    "CONV_2D": (1, 9, 9, 3), "DEPTHWISE_CONV_2D": (1, 9, 9, 3), "FULLY_CONNECTED": (1, 12),
    "AVERAGE_POOL_2D": (1, 8, 8, 3), "MAX_POOL_2D": (1, 8, 8, 3), "ADD": (1, 4, 4, 3),
    "MUL": (1, 4, 4, 3), "RESHAPE": (1, 4, 4, 3), "SOFTMAX": (1, 10), "QUANTIZE": (1, 4, 4, 3),
    "DEQUANTIZE": (1, 4, 4, 3), "SQUEEZE": (1, 4, 1, 3), "EXPAND_DIMS": (1, 4, 3),
    # shape and data movement (issue 20)
    "PAD": (1, 4, 4, 3), "PADV2": (1, 4, 4, 3), "MIRROR_PAD": (1, 4, 4, 3),
    "CONCATENATION": (1, 4, 4, 3), "SPLIT": (1, 4, 4, 6), "SPLIT_V": (1, 4, 4, 6),
    "SLICE": (1, 4, 4, 3), "STRIDED_SLICE": (1, 4, 4, 3), "TRANSPOSE": (1, 4, 4, 3),
    "PACK": (2, 3), "UNPACK": (3, 2, 4), "GATHER": (5, 3), "GATHER_ND": (4, 3, 2),
    "SHAPE": (1, 4, 4, 3), "BROADCAST_TO": (1, 1, 3), "DEPTH_TO_SPACE": (1, 2, 3, 8),
    "SPACE_TO_DEPTH": (1, 4, 6, 2), "BATCH_TO_SPACE_ND": (4, 2, 3, 2),
    "SPACE_TO_BATCH_ND": (1, 4, 6, 2), "RESIZE_NEAREST_NEIGHBOR": (1, 3, 4, 2),
    "RESIZE_BILINEAR": (1, 3, 4, 2), "ZEROS_LIKE": (1, 4, 4, 3), "FILL": (1,),
    # reductions, comparisons, types and compute (the ops-reduce family)
    "MEAN": (1, 4, 4, 3), "SUM": (1, 4, 4, 3), "REDUCE_MAX": (1, 4, 4, 3),
    "REDUCE_MIN": (1, 4, 4, 3), "ARG_MAX": (2, 5), "ARG_MIN": (2, 5), "EQUAL": (2, 3, 4),
    "NOT_EQUAL": (2, 3, 4), "LESS": (2, 3, 4), "LESS_EQUAL": (2, 3, 4), "GREATER": (2, 3, 4),
    "GREATER_EQUAL": (2, 3, 4), "LOGICAL_AND": (2, 3, 4), "LOGICAL_OR": (2, 3, 4),
    "LOGICAL_NOT": (2, 3, 4), "SELECT_V2": (2, 3, 4), "CAST": (2, 3, 4),
    "TRANSPOSE_CONV": (1, 4, 4, 3), "BATCH_MATMUL": (1, 3, 4),
    # the ops-math family (issue 20)
    "SUB": (1, 4, 4, 3), "DIV": (1, 4, 4, 3), "SQUARED_DIFFERENCE": (1, 4, 4, 3),
    "MAXIMUM": (1, 4, 4, 3), "MINIMUM": (1, 4, 4, 3), "PRELU": (1, 4, 4, 3), "ABS": (1, 4, 4, 3),
    "NEG": (1, 4, 4, 3), "SQRT": (1, 4, 4, 3), "RSQRT": (1, 4, 4, 3), "EXP": (1, 4, 4, 3),
    "LOG": (1, 4, 4, 3), "FLOOR": (1, 4, 4, 3), "CEIL": (1, 4, 4, 3), "ROUND": (1, 4, 4, 3),
    "RELU": (1, 4, 4, 3), "RELU6": (1, 4, 4, 3), "RELU_N1_TO_1": (1, 4, 4, 3),
    "LEAKY_RELU": (1, 4, 4, 3), "HARD_SWISH": (1, 4, 4, 3), "LOG_SOFTMAX": (1, 10),
    "ELU": (1, 4, 4, 3), "L2_NORMALIZATION": (1, 10),
    # sequence models (issue 20, state family)
    "LOGISTIC": (1, 4, 4, 3), "TANH": (1, 4, 4, 3),
}

#: Default options of the shape and data movement operators in :meth:`ModelBuilder.single_op`.
_MOVERS: dict[str, dict[str, Any]] = {
    "PAD": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1))},
    "PADV2": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1)), "value": 0.5},
    "MIRROR_PAD": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1))},
    "CONCATENATION": {"axis": -1}, "SPLIT": {"num_splits": 2, "axis": -1},
    "SPLIT_V": {"sizes": (1, -1, 2), "axis": -1},
    "SLICE": {"begin": (0, 1, 0, 1), "size": (1, 2, -1, 2)},
    "STRIDED_SLICE": {"begin": (0, 1, 3, 0), "end": (1, 4, 0, 3), "strides": (1, 2, -1, 1)},
    "TRANSPOSE": {"perm": (0, 3, 1, 2)}, "PACK": {"axis": 0}, "UNPACK": {"axis": 1},
    "GATHER": {"indices": (4, 0, 2, 2)}, "GATHER_ND": {"indices": ((0, 1), (3, 2), (1, 0))},
    "SHAPE": {}, "BROADCAST_TO": {"shape": (2, 4, 3)}, "DEPTH_TO_SPACE": {"block_size": 2},
    "SPACE_TO_DEPTH": {"block_size": 2},
    "BATCH_TO_SPACE_ND": {"block": (2, 2), "crops": ((0, 1), (1, 0))},
    "SPACE_TO_BATCH_ND": {"block": (2, 2), "paddings": ((1, 1), (0, 2))},
    "RESIZE_NEAREST_NEIGHBOR": {"size": (5, 7)}, "RESIZE_BILINEAR": {"size": (5, 7)},
    "ZEROS_LIKE": {}, "FILL": {"dims": (2, 3)},
}

#: The single_op operators of the reductions, comparisons, types and compute family.
REDUCE_FAMILY_OPS = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN",
                     *COMPARISONS, "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT_V2",
                     "CAST", "TRANSPOSE_CONV", "BATCH_MATMUL")

#: The ops-math family's binary operators and unary ones, by their builder method.
_MATH_BINARY = {"SUB": "sub", "DIV": "div", "SQUARED_DIFFERENCE": "squared_difference",
                "MAXIMUM": "maximum", "MINIMUM": "minimum"}

_MATH_UNARY = {"ABS": "abs", "NEG": "neg", "SQRT": "sqrt", "RSQRT": "rsqrt", "EXP": "exp",
               "LOG": "log", "FLOOR": "floor", "CEIL": "ceil", "ROUND": "round", "RELU": "relu",
               "RELU6": "relu6", "RELU_N1_TO_1": "relu_n1_to_1", "LEAKY_RELU": "leaky_relu",
               "HARD_SWISH": "hard_swish", "LOG_SOFTMAX": "log_softmax", "ELU": "elu",
               "L2_NORMALIZATION": "l2_normalization"}

#: The operators :meth:`ModelBuilder.single_op` builds.
SINGLE_OPS = tuple(_DEFAULT_SHAPES)


def mode_dtype(mode: str) -> str:
    """The activation type of a :data:`MODES` entry (``int16x8_per_channel`` -> ``int16``)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    return {"float32": "float32", "int8": "int8", "int8_per_channel": "int8",
            "int32": "int32", "int64": "int64", "bool": "bool"}.get(mode, "int16")


class SingleOpModels:
    """The one-operator models of :class:`~project_api.tflite.builder.ModelBuilder`."""

    def _single_op_reduce_family(self, op: str, dtype: str, shape: tuple[int, ...], name: str,
                                 value_range: tuple[float, float], options: dict[str, Any]
                                 ) -> TensorRef:
        """:meth:`single_op` for the reductions, comparisons, types and compute ops."""
        if op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"):
            x = self.input(shape, "bool", name=name)
            if op == "LOGICAL_NOT":
                return self.logical(op, x)
            b_shape = tuple(options.pop("b_shape", shape))
            b = self.input(b_shape, "bool", name=f"{name}_b")
            return self.logical(op, x, b)
        if op == "SELECT_V2":
            cond = self.input(tuple(options.pop("cond_shape", shape)), "bool", name=f"{name}_c")
            x = self.input(shape, dtype, value_range=value_range, name=name)
            y_shape = tuple(options.pop("y_shape", shape))
            if options.pop("y_input", True):
                y = self.input(y_shape, dtype, quant=x.quant, value_range=value_range,
                               name=f"{name}_y")
            else:
                y = self._operand_like(self.rng.uniform(*value_range, size=y_shape), x)
            return self.select_v2(cond, x, y)
        x = self.input(shape, dtype, value_range=value_range, name=name)
        if op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
            axes = options.pop("axes", (1, 2))
            keep = options.pop("keep_dims", False)
            if op in ("MEAN", "SUM"):
                return self._reduce(op, x, axes, keep, options.pop("out_quant", None))
            return self._reduce(op, x, axes, keep, None)
        if op in ("ARG_MAX", "ARG_MIN"):
            return self._arg(op, x, options.pop("axis", -1), options.pop("output_type", "int32"))
        if op in COMPARISONS:
            b_shape = tuple(options.pop("b_shape", shape))
            b_drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
            if options.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(
                    b_shape, dtype, value_range=options.pop("b_range", None) or b_drawn,
                    name=f"{name}_b")
            else:
                b = self.rng.uniform(*value_range, size=b_shape)
            return self.comparison(op, x, b)
        if op == "CAST":
            return self.cast(x, options.pop("to"))
        if op == "TRANSPOSE_CONV":
            return self.transpose_conv(x, options.pop("filters", 4), **options)
        b_shape = tuple(options.pop("b_shape", (shape[-1], 5)))
        if options.pop("b_input", False):
            rhs: TensorRef | np.ndarray = self.input(b_shape, dtype, value_range=value_range,
                                                     name=f"{name}_b")
        else:
            rhs = self.rng.uniform(-1.0, 1.0, size=b_shape).astype(np.float32)
        return self.batch_matmul(x, rhs, **options)

    def single_op(
        self,
        op: str,
        dtype: str = "int8",
        input_shape: Sequence[int] | None = None,
        name: str = "input",
        value_range: tuple[float, float] | None = None,
        **options: Any,
    ) -> TensorRef | list[TensorRef]:
        """A new model input named ``name`` feeding one operator ``op``; returns its output
        (SPLIT, SPLIT_V, UNPACK: the list of outputs).

        The input's float range (hence a quantized input's scale and zero point) is
        ``value_range`` or drawn from the builder's generator. ``options`` go to the operator's
        method, plus: ADD/MUL ``b_shape`` (shape of the second operand, default the input's),
        ``b_input`` (True: the second operand is another model input, ``name + "_b"``; False:
        a constant) and ``b_range`` (the second input's float range, default drawn). QUANTIZE
        with a float32 ``dtype`` quantizes (to ``to``, default int8), with a quantized one it
        requantizes (``to`` defaults to the input's type; ``quant`` to a range different from
        the input's). DEQUANTIZE needs a quantized ``dtype``. The shape and data movement
        operators take their method's options over the defaults of :data:`_MOVERS` (see
        :meth:`_single_mover`). MEAN, SUM, REDUCE_MAX,
        REDUCE_MIN: ``axes`` (default (1, 2)), ``keep_dims``, MEAN/SUM ``out_quant``; ARG_MAX,
        ARG_MIN: ``axis``, ``output_type``; the comparisons as ADD (``b_shape``, ``b_input``,
        ``b_range``); LOGICAL_AND/OR/NOT take bool inputs (``b_shape``); SELECT_V2: a bool
        condition input (``cond_shape``), ``y_shape``, ``y_input``; CAST: ``to``;
        TRANSPOSE_CONV: as :meth:`transpose_conv`; BATCH_MATMUL: ``b_shape`` (default
        ``(last dim, 5)``), ``b_input`` (default False: a constant right-hand side), ``adj_x``,
        ``adj_y``.
        SUB, DIV, SQUARED_DIFFERENCE, MAXIMUM and MINIMUM take ``b_shape``, ``b_input`` and
        ``b_range`` as ADD; PRELU ``alpha_shape`` (default: the last dimension), alphas drawn
        in [-0.5, 0.5].
        """
        if op not in SINGLE_OPS:
            raise ValueError(f"unknown operator {op!r}; choose one of {sorted(SINGLE_OPS)}")
        if op == "DEQUANTIZE" and dtype not in _QUANTIZED:
            raise ValueError("DEQUANTIZE takes a quantized input: use dtype 'int8' or 'int16'")
        shape = tuple(input_shape or _DEFAULT_SHAPES[op])
        drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
        value_range = drawn if value_range is None else value_range
        in_quant = None
        if op == "QUANTIZE" and dtype == "int32":  # a quantized int32 input (+-2^20 spans it)
            in_quant = (float(np.float32(max(map(abs, value_range)) / (1 << 20))), 0)
        if op in REDUCE_FAMILY_OPS:
            return self._single_op_reduce_family(op, dtype, shape, name, value_range, options)
        x = self.input(shape, dtype, quant=in_quant, value_range=value_range, name=name)
        if op == "CONV_2D":
            return self.conv2d(x, options.pop("filters", 4), **options)
        if op == "DEPTHWISE_CONV_2D":
            return self.depthwise_conv2d(x, **options)
        if op == "FULLY_CONNECTED":
            return self.fully_connected(x, options.pop("units", 5), **options)
        if op == "AVERAGE_POOL_2D":
            return self.average_pool2d(x, **options)
        if op == "MAX_POOL_2D":
            return self.max_pool2d(x, **options)
        if op in ("ADD", "MUL"):
            b_shape = tuple(options.pop("b_shape", shape))
            b_drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
            b_range = options.pop("b_range", None) or b_drawn
            if options.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(b_shape, dtype, value_range=b_range,
                                                       name=f"{name}_b")
            else:
                b = self.rng.uniform(-2.0, 2.0, size=b_shape).astype(np.float32)
            return self.add(x, b, **options) if op == "ADD" else self.mul(x, b, **options)
        if op in _MOVERS:  # shape and data movement (issue 20)
            return self._single_mover(op, x, name, dtype, options)
        if op == "RESHAPE":
            return self.reshape(x, options.pop("shape", (1, -1)), **options)
        if op == "SQUEEZE":
            return self.squeeze(x, **options)
        if op == "EXPAND_DIMS":
            return self.expand_dims(x, options.pop("axis", 0), **options)
        if op == "SOFTMAX":
            return self.softmax(x, **options)
        if op == "LOGISTIC":
            return self.logistic(x, **options)
        if op == "TANH":
            return self.tanh(x, **options)
        if op == "QUANTIZE":
            to = options.pop("to", "int8" if dtype in ("float32", "int32") else dtype)
            if "quant" not in options:
                lo, hi = value_range
                options["quant"] = quantize_params(lo * float(self.rng.uniform(0.5, 1.5)),
                                                   hi * float(self.rng.uniform(0.5, 1.5)),
                                                   dtype=to if to in _QUANTIZED else "int16")
                if to not in _QUANTIZED:  # int32: a finer scale than int16's
                    options["quant"] = (options["quant"][0] / 64, 0)
            return self.quantize(x, dtype=to, **options)
        if op in _MATH_BINARY:
            return self._single_math_binary(op, x, name, **options)
        if op == "PRELU":
            alpha_shape = tuple(options.pop("alpha_shape", shape[-1:]))
            alpha = self.rng.uniform(-0.5, 0.5, size=alpha_shape).astype(np.float32)
            return self.prelu(x, alpha, **options)
        if op in _MATH_UNARY:
            return getattr(self, _MATH_UNARY[op])(x, **options)
        return self.dequantize(x, **options)

    def _single_mover(self, op: str, x: TensorRef, name: str, dtype: str,
                      options: dict[str, Any]) -> TensorRef | list[TensorRef]:
        """The shape and data movement operators of :meth:`single_op`: ``options`` over the
        defaults of :data:`_MOVERS`; CONCATENATION and PACK take a second input
        ``name + "_b"`` (shape ``b_shape``, default the input's; ``b_input`` False: a
        constant), FILL fills ``dims`` with the one-element input made a scalar by a RESHAPE
        (TFLM's interpreter takes no scalar model input)."""
        opts = {**_MOVERS[op], **options}
        if op in ("CONCATENATION", "PACK"):
            b_shape = tuple(opts.pop("b_shape", x.shape))
            if opts.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(b_shape, dtype, quant=x.quant,
                                                       name=f"{name}_b")
            else:
                b = self.rng.uniform(-1.0, 1.0, size=b_shape)
            return getattr(self, op.lower())([x, b], **opts)
        if op == "FILL":  # the value: the one-element input as a scalar
            return self.fill(opts.pop("dims"), self.reshape(x, ()), **opts)
        return getattr(self, "pad" if op == "PADV2" else op.lower())(x, **opts)

    def _single_math_binary(self, op: str, x: TensorRef, name: str, b_shape: Sequence[int] |
                            None = None, b_input: bool = True,
                            b_range: tuple[float, float] | None = None,
                            **options: Any) -> TensorRef:
        """The second operand of a binary op of the ops-math family (see :meth:`single_op`):
        another input (for MAXIMUM/MINIMUM with ``x``'s quantization) or a constant (a DIV
        divisor never zero)."""
        shape = tuple(x.shape if b_shape is None else b_shape)
        drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
        b_range = b_range or drawn
        if b_input:
            same = op in ("MAXIMUM", "MINIMUM") and x.quant is not None
            b: TensorRef | np.ndarray = self.input(shape, x.dtype, quant=x.quant if same else None,
                                                   value_range=b_range, name=f"{name}_b")
        elif op == "DIV":
            sign = self.rng.choice(np.array([-1.0, 1.0]), size=shape)
            if x.dtype == "int32":
                b = (sign * self.rng.integers(1, 100, size=shape)).astype(np.float32)
            else:
                b = (sign * self.rng.uniform(0.25, 2.0, size=shape)).astype(np.float32)
        elif x.dtype == "int32":
            b = self.rng.integers(-(1 << 20), 1 << 20, size=shape).astype(np.float32)
        else:
            b = self.rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
        return getattr(self, _MATH_BINARY[op])(x, b, **options)

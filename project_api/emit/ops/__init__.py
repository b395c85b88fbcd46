"""The operators the emitter implements: one module per operator (or family), each declaring
what it handles as data (``SPEC = OpSpec(...)``, see :class:`.common.OpSpec`), collected here
into :data:`REGISTRY`.

Adding an operator is adding its module (and its kernel template) and one line to
:data:`MODULES`; see "Adding an operator" in ``project_api/emit/README.md``.
"""

from __future__ import annotations

from .registry import Entry, Registry

#: The op modules, one line each.
MODULES = (
    "add",
    "conv2d",
    "depthwise_conv2d",
    "dequantize",
    "expand_dims",
    "fully_connected",
    "mul",
    "pool2d",
    "quantize",
    "reshape",
    "softmax",
    "squeeze",
    # shape and data movement (issue 20)
    "batch_to_space_nd",
    "broadcast_to",
    "concatenation",
    "depth_to_space",
    "fill",
    "gather",
    "gather_nd",
    "mirror_pad",
    "pack",
    "pad",
    "resize_bilinear",
    "resize_nearest_neighbor",
    "shape",
    "slice",
    "space_to_batch_nd",
    "space_to_depth",
    "split",
    "strided_slice",
    "tile",
    "transpose",
    "unpack",
    "zeros_like",
    # reductions, comparisons, types (the ops-reduce family)
    "arg_min_max",
    "cast",
    "compare",
    "equal",
    "logical",
    "mean",
    "reduce_min_max",
    "select_v2",
    # compute (the ops-reduce family)
    "batch_matmul",
    "transpose_conv",
    # the arithmetic and activation operators (issue 20, ops-math family)
    "sub",
    "div",
    "squared_difference",
    "maximum_minimum",
    "prelu",
    "float_math",
    "abs",
    "rsqrt",
    "relu",
    "relu_n1_to_1",
    "leaky_relu",
    "hard_swish",
    "elu",
    "log_softmax",
    "l2_normalization",
    # state, control flow and sequence models (the ops-state family)
    "assign_variable",
    "call_once",
    "if_op",
    "logistic",
    "read_variable",
    "svdf",
    "tanh",
    "unidirectional_sequence_lstm",
    "var_handle",
    "while_op",
    # TFLM's signal library, custom operators (the ops-signal family)
    "signal_delay",
    "signal_energy",
    "signal_fft_auto_scale",
    "signal_filter_bank",
    "signal_filter_bank_log",
    "signal_filter_bank_spectral_subtraction",
    "signal_filter_bank_square_root",
    "signal_framer",
    "signal_irfft",
    "signal_overlap_add",
    "signal_pcan",
    "signal_rfft",
    "signal_stacker",
    "signal_window",
)

#: Every operator the emitter implements.
REGISTRY: Registry = Registry.from_modules(__name__, MODULES)

__all__ = ["MODULES", "REGISTRY", "Entry", "Registry"]

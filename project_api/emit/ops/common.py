"""What every op module shares: its declaration (:class:`OpSpec`), the :class:`Kernel` its
``prepare`` returns, and the checking helpers.

An op module declares, as data, what it handles: ``SPEC = OpSpec(opcodes=..., schemes=...,
prepare=prepare, dsp=...)`` (see :mod:`project_api.emit.ops` for the registry that collects
them). Its ``prepare(op, graph, target) -> Kernel`` does all the checks (TFLM's Prepare),
computes every integer parameter the C needs, lays out the constants, and names the Jinja2
template in ``kernels/`` that renders the body of the op's C function. The generated C then
only computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from ...errors import UnsupportedOperatorError
from .. import quantize as q

#: Per-pixel accumulators up to this size live on the C stack; larger ones are planned in the
#: activation pool (as scratch live during that op only), so deep layers cannot overflow a
#: small microcontroller stack.
STACK_ACC_LIMIT_BYTES = 512

#: Integer range of each quantized activation type.
QUANTIZED_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-(1 << 31), (1 << 31) - 1),
    "uint8": (0, 255)}


@dataclass
class ConstArray:
    """A ``static const`` array the kernel reads: ``<function>_<suffix>``."""

    suffix: str
    ctype: str
    values: np.ndarray


@dataclass
class Kernel:
    """A prepared operator, ready to render."""

    op: Operator
    template: str
    params: dict[str, Any]
    inputs: list[int]
    outputs: list[int]
    constants: list[ConstArray] = field(default_factory=list)
    alias: bool = False  # the output shares the first input's storage (a view op, OpSpec.view)
    #: With ``alias``, for an op whose outputs are contiguous runs of input 0 (OpSpec.offset_view):
    #: the byte offset of each output in input 0. The code generator aliases them all or none
    #: (then clears ``alias`` and the kernel copies); empty: one output, the whole input.
    alias_offsets: tuple[int, ...] = ()
    #: The kernel returns ``int32_t``: 0, or nonzero for an input TFLM's Eval rejects at run time
    #: (an index out of range); ``tvmgen_<name>_run`` then returns -1.
    status: bool = False
    scratch_bytes: int = 0  # pool bytes the op needs while it runs (passed as ``scratch``)
    scheme: str = ""  # the dtype scheme the registry classified the node as
    #: Helper headers (templates in ``kernels/``) the kernel's C calls, emitted once per
    #: module after ``common.h.j2`` (e.g. ``int16.h.j2``).
    headers: tuple[str, ...] = ()
    #: Positions in ``inputs`` the kernel updates in place (variable tensors: the state of an
    #: LSTM or SVDF, a resource variable ASSIGN_VARIABLE writes): passed as ``T* restrict inJ``.
    mutable_inputs: tuple[int, ...] = ()
    #: Slots of the state region (:mod:`..state` keys) the kernel reads and writes besides its
    #: tensors (a CALL_ONCE flag): passed as ``uint8_t* restrict stJ``.
    state: tuple[tuple, ...] = ()
    #: Subgraphs the kernel calls (IF, WHILE, CALL_ONCE). The code generator lowers them first,
    #: adds the largest one's pool to ``scratch_bytes`` (after the kernel's own scratch) and
    #: gives the template ``p.sg`` (subgraph index -> its C function) and ``p.child_pool``
    #: (the C expression of the pool handed to them).
    subgraphs: tuple[int, ...] = ()
    #: The node computes nothing at run time (VAR_HANDLE: its output names a state slot).
    no_code: bool = False
    #: Bytes of state the op keeps for itself from one run to the next (TFLM's persistent
    #: buffers: a signal op's noise estimate, framer queue, delay line), zero at boot and at
    #: reset: a slot of the state region the code generator adds, passed as the last
    #: ``uint8_t* restrict stJ``.
    persistent_bytes: int = 0

    @property
    def dsp(self) -> bool:
        """Whether this is a DSP-extension kernel (its template is ``*.dsp.c.j2``)."""
        return self.template.endswith(".dsp.c.j2")


# --- the declaration of an op module ----------------------------------------------------------

#: ``classify(op, graph) -> (scheme, what)``: the node's dtype scheme, and the words naming the
#: tensor(s) that decide it (for the one-line refusal of an unsupported scheme).
Classifier = Callable[[Operator, Graph], tuple[str, str]]


def _first_activation(op: Operator, graph: Graph) -> tuple[str, Tensor | None]:
    """("input i" or "output", tensor) of the node's first non-constant input (else its first
    input, else its first output)."""
    present = [(i, t) for i, t in enumerate(op.inputs) if t >= 0]
    for i, t in present:
        if not graph.tensor(t).is_const:
            return f"input {i}", graph.tensor(t)
    if present:
        return f"input {present[0][0]}", graph.tensor(present[0][1])
    if op.outputs:
        return "output", graph.tensor(op.outputs[0])
    return "", None


def quantized_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The scheme of an op that computes: ``float32``, ``int8`` or ``int16x8`` (int16
    activations; weights, where the op has them, int8) from its first activation input."""
    where, x = _first_activation(op, graph)
    if x is None:
        return "none", "the node has no tensors"
    scheme = "int16x8" if x.dtype == "int16" else x.dtype
    return scheme, f"{where} '{x.name}' is {x.dtype}"


def dtype_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The scheme of an op that only moves data: the element type of its first activation
    input (``float32``, ``int8``, ``int16``, ``int32``, ``bool``, ...)."""
    where, x = _first_activation(op, graph)
    if x is None:
        return "none", "the node has no tensors"
    return x.dtype, f"{where} '{x.name}' is {x.dtype}"


def conversion_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The scheme of a type conversion: ``<input type>-><output type>`` (``float32->int8``)."""
    if not op.inputs or op.inputs[0] < 0 or not op.outputs:
        return "none", "the node lacks its input or output"
    x, y = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    return (f"{x.dtype}->{y.dtype}",
            f"input '{x.name}' is {x.dtype}, output '{y.name}' is {y.dtype}")


@dataclass(frozen=True)
class OpSpec:
    """What an op module handles, declared as data in its module-level ``SPEC`` (the module
    also defines ``prepare(op, graph, target) -> Kernel``).

    * ``opcodes``: the ``BuiltinOperator`` names it implements (:data:`.schema.BUILTIN_OPERATORS`);
      ``custom``: custom operators it implements, by their ``custom_code``.
    * ``schemes``: the dtype schemes it takes, as ``classify`` names a node (the default,
      :func:`quantized_scheme`: ``float32``, ``int8``, ``int16x8``; :func:`dtype_scheme` for ops
      that only move data: ``float32``, ``int8``, ``int16``, ...; :func:`conversion_scheme`:
      ``float32->int8``, ...). A node of any other scheme is refused before ``prepare`` runs.
    * ``dsp``: the schemes that get DSP-extension kernels (``*.dsp.c.j2``) on the targets with
      the DSP extension (cortex-m4, -m7, -m33), for the shapes the module says; the others
      take the generic kernel there too.
    * ``view``: the output is a byte-identical view of input 0 (RESHAPE, SQUEEZE, ...): no code,
      the output aliases the input's storage (``prepare`` returns ``alias=True``).
    * ``state``: the op reads or writes variable tensors (state kept across invocations);
      without it, a node with a variable input is refused.
    * ``offset_view``: where an output is provably one contiguous run of input 0 (a slice, a
      split along the outermost axis that is not 1), it is a view at that offset (``prepare``
      returns ``alias=True`` with ``alias_offsets``); the code generator still copies where
      aliasing is impossible (caller buffers) or would raise the pool's lower bound.
    """

    opcodes: tuple[str, ...]
    schemes: tuple[str, ...]
    dsp: tuple[str, ...] = ()
    custom: tuple[str, ...] = ()
    view: bool = False
    state: bool = False
    classify: Classifier = quantized_scheme
    offset_view: bool = False


def accumulator(params: dict, channels: int, elem_bytes: int = 4) -> int:
    """Decide where a per-pixel accumulator of ``channels`` values of ``elem_bytes`` lives;
    returns the scratch bytes to plan (0: on the stack). Sets ``params["scratch"]``."""
    size = elem_bytes * channels
    params["scratch"] = size > STACK_ACC_LIMIT_BYTES
    return size if params["scratch"] else 0


def unsupported(op: Operator, what: str) -> UnsupportedOperatorError:
    return UnsupportedOperatorError(f"{op.describe()}: {what}")


def tensor_in(graph: Graph, op: Operator, i: int, *, const: bool | None = None,
              optional: bool = False) -> Tensor | None:
    """Input ``i`` of ``op``; checks presence and const-ness."""
    if i >= len(op.inputs) or op.inputs[i] < 0:
        if optional:
            return None
        raise unsupported(op, f"input {i} is missing")
    t = graph.tensor(op.inputs[i])
    if const is True and not t.is_const:
        raise unsupported(op, f"input {i} '{t.name}' must be a constant")
    if const is False and t.is_const:
        raise unsupported(op, f"input {i} '{t.name}' is a constant; only activations are "
                              "supported here")
    return t


def tensor_out(graph: Graph, op: Operator, i: int = 0) -> Tensor:
    if i >= len(op.outputs):
        raise unsupported(op, f"output {i} is missing")
    return graph.tensor(op.outputs[i])


def check_counts(op: Operator, n_in: tuple[int, ...], n_out: int = 1) -> None:
    if len(op.inputs) not in n_in or len(op.outputs) != n_out:
        raise unsupported(op, f"expects {n_in} inputs and {n_out} output, has "
                              f"{len(op.inputs)} and {len(op.outputs)}")


def check_dtype(op: Operator, t: Tensor, allowed: tuple[str, ...]) -> None:
    if t.dtype not in allowed:
        raise unsupported(op, f"type {t.dtype} of '{t.name}' not supported (supported: "
                              f"{', '.join(allowed)})")


def check_same_type(op: Operator, x: Tensor, y: Tensor) -> None:
    """The output ``y`` has the input ``x``'s element type."""
    if y.dtype != x.dtype:
        raise unsupported(op, f"output type {y.dtype} differs from input type {x.dtype}")


def unary_operands(op: Operator, graph: Graph) -> tuple[Tensor, Tensor]:
    """(input, output) of an op with exactly one activation input and one output."""
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0, const=False)
    y = tensor_out(graph, op)
    return x, y


def check_activation(op: Operator) -> str:
    act = op.options.get("fused_activation_function", "NONE")
    if act not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        raise unsupported(op, f"fused activation {act} not supported")
    return act


def per_tensor(op: Operator, t: Tensor) -> tuple[float, int]:
    """(scale, zero_point) of a per-tensor quantized tensor."""
    if t.quant is None:
        raise unsupported(op, f"'{t.name}' ({t.dtype}) has no quantization parameters")
    if t.quant.per_channel:
        raise unsupported(op, f"'{t.name}' must be quantized per tensor")
    return t.quant.scale[0], t.quant.zero_point[0]


def quantized_range(t: Tensor) -> tuple[int, int]:
    """The integer range of a quantized tensor's type."""
    return QUANTIZED_RANGES[t.dtype]


def activation_range(op: Operator, act: str, y: Tensor) -> tuple[Any, Any]:
    """The clamp of fused activation ``act`` on output ``y``: float bounds (None: the float32
    limit) for float32, else TFLM's quantized range for ``y``'s scale, zero point and type."""
    if y.dtype == "float32":
        return q.activation_range_float(act)
    scale, zp = per_tensor(op, y)
    return q.activation_range_quantized(act, scale, zp, *quantized_range(y))


def check_symmetric(op: Operator, *tensors: Tensor) -> None:
    """int16 activations have zero point 0 (TFLite's 16x8 scheme; TFLM's int16 kernels ignore
    any other)."""
    for t in tensors:
        if t.dtype == "int16" and per_tensor(op, t)[1] != 0:
            raise unsupported(op, f"int16 tensor '{t.name}' has zero point "
                                  f"{per_tensor(op, t)[1]}; int16x8 takes symmetric int16 "
                                  "(zero point 0) as TFLite's converter writes it")


#: The C type of each element type the kernels use.
C_TYPES = {"float32": "float", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
           "int64": "int64_t", "uint8": "uint8_t", "bool": "uint8_t", "uint32": "uint32_t",
           "uint64": "uint64_t"}


def compute_padding(in_size: int, filter_size: int, stride: int, dilation: int,
                    padding: str) -> tuple[int, int]:
    """TFLite's output size and leading pad for one spatial dimension."""
    eff = (filter_size - 1) * dilation + 1
    if padding == "SAME":
        out = (in_size + stride - 1) // stride
    else:
        out = (in_size - eff + stride) // stride
    pad = max(0, ((out - 1) * stride + eff - in_size) // 2)
    return out, pad


def check_spatial(op: Operator) -> None:
    for k in ("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor", "filter_width",
              "filter_height"):
        if k in op.options and op.options[k] < 1:
            raise unsupported(op, f"{k} = {op.options[k]} must be >= 1")
    if op.options.get("padding") not in ("SAME", "VALID"):
        raise unsupported(op, f"padding {op.options.get('padding')} not supported")


def check_shape(op: Operator, t: Tensor, expected: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(expected):
        raise unsupported(op, f"'{t.name}' has shape {list(t.shape)}, expected {list(expected)}")


def float_literal(x: float) -> str:
    """An exact C float literal (hex float), or the limit macro for infinities."""
    x = float(np.float32(x))
    if x != x:
        return "NAN"
    if x in (float("inf"), float("-inf")):
        return "INFINITY" if x > 0 else "(-INFINITY)"
    return float.hex(x) + "f"

"""What LOGISTIC and TANH share (``logistic.py``, ``tanh.py``, TFLM's ``logistic.cc`` and
``tanh.cc`` with ``reference_integer_ops``): the checks of TFLM's Prepare and the parameters of
its fixed-point paths.

* float32: ``1 / (1 + expf(-x))`` with TFLM's cut-offs (above 16.619047 it is 1, below -9
  ``expf(x)``) and ``tanhf``.
* int8: the input rescaled to Q4.27 (a multiplier of ``scale * 2^27`` split by frexp, inputs
  beyond TFLM's radius saturated), gemmlowp's fixed-point logistic or tanh, the Q0.31 result
  rounded to the output: LOGISTIC's output zero point must be -128 (TFLM refuses any other; it
  assumes the scale 1/256 without checking it), TANH's output is taken as scale 1/128, zero point
  0 whatever the model says, as TFLM does.
* int16: symmetric tensors (TFLM refuses other zero points), the output scale 2^-15, the input
  rescaled to 1/(3*4096) per unit (exactly ``3 << shift`` for a power-of-two scale TFLM takes
  as such) and TFLM's sigmoid table interpolated (``kernels/sigmoid.h.j2``).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from .common import Kernel, check_dtype, check_same_type, per_tensor, unary_operands, unsupported


def prepare_activation(op: Operator, graph: Graph, template: str) -> Kernel:
    """The kernel of LOGISTIC or TANH (``op.opcode``) rendered by ``template``."""
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    if x.shape != y.shape:
        raise unsupported(op, f"output '{y.name}' {list(y.shape)} differs from input "
                              f"'{x.name}' {list(x.shape)}")
    params = {"size": x.num_elements, "dtype": x.dtype}
    logistic = op.opcode == "LOGISTIC"
    if x.dtype == "int8":
        scale, zp = per_tensor(op, x)
        _, yzp = per_tensor(op, y)
        if logistic and yzp != -128:
            raise unsupported(op, f"int8 output '{y.name}' has zero point {yzp}; TFLM's LOGISTIC "
                                  "takes -128 (scale 1/256)")
        try:
            mult, shift, radius = q.fixed_point_input(scale)
        except ValueError as err:
            raise unsupported(op, f"input '{x.name}': {err}") from None
        params.update(in_zp=zp, mult=mult, shift=shift, radius=radius)
    elif x.dtype == "int16":
        xs, xzp = per_tensor(op, x)
        ys, yzp = per_tensor(op, y)
        if xzp or yzp:
            raise unsupported(op, f"int16 input '{x.name}' and output '{y.name}' need zero point "
                                  f"0 (they have {xzp} and {yzp}), as TFLM")
        log2, exact = q.log2_rounded(ys)
        if not exact or log2 != -15:
            raise unsupported(op, f"int16 output '{y.name}' has scale {ys!r}; TFLM takes 2^-15")
        mult, shift = q.lut16_input(xs, (0,) if logistic else (0, 1))
        params.update(mult=mult, shift=shift)
    return Kernel(op, template, params, [x.index], [y.index],
                  headers=("sigmoid.h.j2",) if x.dtype != "float32" else ())

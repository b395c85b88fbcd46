"""What the resource-variable operators (``var_handle.py``, ``read_variable.py``,
``assign_variable.py``, as TFLM's kernels of those names) share.

A VAR_HANDLE names a variable by ``(container, shared_name)``; its output, a resource tensor,
stands for that variable's slot of the state region: :mod:`..state` lays the slots out, sizes
each from the first ASSIGN_VARIABLE TFLM prepares and checks every READ and ASSIGN against it,
and the code generator passes the slot wherever the resource tensor is an operand. READ and
ASSIGN copy bytes, as TFLM's ``memcpy``; their schemes are the value's element type.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .common import unsupported

#: The element types a resource variable holds here (those a model's values take).
VALUE_TYPES = ("float32", "int8", "int16", "int32")


def value_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The element type of the value read (READ_VARIABLE's output) or assigned
    (ASSIGN_VARIABLE's input 1)."""
    if op.opcode == "READ_VARIABLE":
        t = op.outputs[0] if op.outputs else -1
        where = "output"
    else:
        t = op.inputs[1] if len(op.inputs) > 1 else -1
        where = "input 1 (the value)"
    if t < 0:
        return "none", f"{where} is missing"
    x = graph.tensor(t)
    return x.dtype, f"{where} '{x.name}' is {x.dtype}"


def resource_input(op: Operator, graph: Graph) -> int:
    """Input 0, the resource tensor of a VAR_HANDLE."""
    t = op.inputs[0] if op.inputs else -1
    if t < 0 or graph.tensor(t).dtype != "resource":
        raise unsupported(op, "input 0 must be the resource tensor of a VAR_HANDLE")
    return t

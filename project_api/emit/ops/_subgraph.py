"""What the operators that run subgraphs (IF, WHILE, CALL_ONCE: ``if_op.py``, ``while_op.py``,
``call_once.py``) share: finding the callee, checking the tensors passed to it, and the node's
operands as the kernel takes them.

Each subgraph a model calls becomes a static C function of the module (its inputs, its outputs,
its own pool); the code generator lowers it before its caller, hands it the caller's scratch as
its pool, and gives the caller's template the function's name (``p.sg``) and the pool
(``p.child_pool``). The kernels copy where TFLM's copies are observable. A callee returns nonzero
when one of its nodes fails (an index out of range, as TFLM's Eval reports it); the calling
node's kernel (``status=True``) passes the failure on, and the entry point returns -1.
"""

from __future__ import annotations

import numpy as np

from project_api.archive import dtypes
from project_api.tflite.graph import Graph, Operator, Tensor

from .common import ConstArray, unsupported


def subgraph_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """WHILE and CALL_ONCE: ``subgraph`` (what they move is their callees' business)."""
    return "subgraph", "it runs subgraphs"


def ctype(t: Tensor) -> str:
    """The C element type of ``t`` (bool: ``uint8_t``)."""
    return dtypes.parse(t.dtype).c_type


def callee(op: Operator, graph: Graph, option: str) -> Graph:
    """The subgraph the node's option ``option`` names (never the main one)."""
    subgraphs = graph.subgraphs or [graph]
    k = int(op.options.get(option) or 0)
    if not 0 < k < len(subgraphs):
        raise unsupported(op, f"{option} {k} is not a subgraph the node can call (the model has "
                              f"subgraphs 1..{len(subgraphs) - 1} besides the main one)")
    return subgraphs[k]


def same(op: Operator, what: str, a: Tensor, b: Tensor, sg: Graph, where: str) -> None:
    """``b`` (a tensor of subgraph ``sg``) has ``a``'s type and size."""
    if a.dtype == "resource" or b.dtype == "resource":
        raise unsupported(op, f"{what} '{a.name}' is a resource; pass resource variables' values "
                              "(READ_VARIABLE them), not their handles, between subgraphs")
    if a.dtype != b.dtype or a.size_bytes != b.size_bytes:
        raise unsupported(op, f"{what} '{a.name}' is {a.dtype}{list(a.shape)}, {where} of "
                              f"subgraph {sg.index} '{b.name}' is {b.dtype}{list(b.shape)}; "
                              "they must match in type and size")


class Operands:
    """The node's inputs as the kernel takes them: activations as ``inJ``, constants as arrays
    of the kernel (``<fn>_cJ``); :meth:`ref` is how the template names input ``i``."""

    def __init__(self, op: Operator, graph: Graph):
        self.inputs: list[int] = []
        self.constants: list[ConstArray] = []
        self.refs: list[str] = []  # per node input: "inJ" or "@cJ" (a constant of the kernel)
        for j, t in enumerate(op.inputs):
            if t < 0:
                raise unsupported(op, f"input {j} is missing")
            x = graph.tensor(t)
            if x.is_const:
                values = np.asarray(x.data).reshape(-1)
                if values.dtype == np.bool_:
                    values = values.astype(np.uint8)
                self.constants.append(ConstArray(f"c{j}", ctype(x), values))
                self.refs.append(f"@c{j}")
            else:
                self.refs.append(f"in{len(self.inputs)}")
                self.inputs.append(t)



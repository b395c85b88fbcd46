"""WHILE, as TFLM's ``while.cc``: the inputs are copied to the outputs; then, while the cond
subgraph (run on the outputs) gives true, the body runs on a copy of the outputs (staged in the
node's scratch, as TFLM copies them into the body's own input tensors) and writes the outputs.
Every loop-carried tensor keeps its type and size through cond and body; cond's output 0 is a
bool of one element.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..planner import align
from ..target import GENERIC, Target
from ._subgraph import Operands, callee, ctype, same, subgraph_scheme
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=("WHILE",), schemes=("subgraph",), classify=subgraph_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    cond = callee(op, graph, "cond_subgraph_index")
    body = callee(op, graph, "body_subgraph_index")
    n = len(op.inputs)
    if len(op.outputs) != n or len(cond.inputs) != n or len(body.inputs) != n or \
            len(body.outputs) != n:
        raise unsupported(op, f"the node has {n} inputs and {len(op.outputs)} outputs, the cond "
                              f"subgraph {cond.index} {len(cond.inputs)} inputs, the body "
                              f"subgraph {body.index} {len(body.inputs)} inputs and "
                              f"{len(body.outputs)} outputs; WHILE carries the same tensors "
                              "through all of them")
    if not cond.outputs:
        raise unsupported(op, f"the cond subgraph {cond.index} gives no output")
    flag = cond.tensor(cond.outputs[0])
    if flag.dtype != "bool" or flag.num_elements != 1:
        raise unsupported(op, f"the cond subgraph {cond.index} gives '{flag.name}' "
                              f"{flag.dtype}{list(flag.shape)}; WHILE takes a bool of one element")
    ops = Operands(op, graph)
    loop = []
    stage = 0
    for j, t in enumerate(op.inputs):
        x, y = graph.tensor(t), graph.tensor(op.outputs[j])
        same(op, f"input {j}", x, y, graph, f"output {j}")
        same(op, f"input {j}", x, cond.tensor(cond.inputs[j]), cond, f"input {j}")
        same(op, f"input {j}", x, body.tensor(body.inputs[j]), body, f"input {j}")
        same(op, f"input {j}", x, body.tensor(body.outputs[j]), body, f"output {j}")
        loop.append({"src": ops.refs[j], "size": x.size_bytes, "ctype": ctype(x),
                     "stage": stage})
        stage += align(x.size_bytes)
    flags = []
    for t in cond.outputs:
        c = cond.tensor(t)
        flags.append({"ctype": ctype(c), "stage": stage})
        stage += align(c.size_bytes)
    params = {"loop": loop, "flags": flags, "cond": cond.index, "body": body.index}
    return Kernel(op, "while.c.j2", params, ops.inputs, list(op.outputs), ops.constants,
                  scratch_bytes=stage, subgraphs=tuple(dict.fromkeys((cond.index, body.index))),
                  status=True)



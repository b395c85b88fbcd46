"""IF, as TFLM's ``if.cc``: the condition (input 0) is a bool of one element (TFLM refuses any
other); the other inputs go to the branch it selects, whose outputs are the node's. Both branches
take the node's inputs and give its outputs, in type and size (TFLM checks the then branch only,
then copies byte counts it never compared for the else branch). No copies: the branch reads the
node's inputs and writes its outputs in place.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._subgraph import Operands, callee, same
from .common import Kernel, OpSpec, unsupported


def cond_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The condition's type."""
    if not op.inputs or op.inputs[0] < 0:
        return "none", "input 0 (the condition) is missing"
    c = graph.tensor(op.inputs[0])
    return c.dtype, f"input 0 (the condition) '{c.name}' is {c.dtype}"


SPEC = OpSpec(opcodes=("IF",), schemes=("bool",), classify=cond_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if not op.inputs:
        raise unsupported(op, "IF needs its condition as input 0")
    cond = graph.tensor(op.inputs[0])
    if cond.dtype != "bool" or cond.num_elements != 1:
        raise unsupported(op, f"condition '{cond.name}' is {cond.dtype}{list(cond.shape)}; IF "
                              "takes a bool of one element (as TFLM)")
    branches = [callee(op, graph, "then_subgraph_index"), callee(op, graph,
                                                                   "else_subgraph_index")]
    for sg in branches:
        if len(sg.inputs) != len(op.inputs) - 1 or len(sg.outputs) != len(op.outputs):
            raise unsupported(op, f"subgraph {sg.index} takes {len(sg.inputs)} inputs and gives "
                                  f"{len(sg.outputs)} outputs; the node passes "
                                  f"{len(op.inputs) - 1} and takes {len(op.outputs)}")
        for j, t in enumerate(op.inputs[1:]):
            same(op, f"input {j + 1}", graph.tensor(t), sg.tensor(sg.inputs[j]), sg,
                  f"input {j}")
        for j, t in enumerate(op.outputs):
            same(op, f"output {j}", graph.tensor(t), sg.tensor(sg.outputs[j]), sg,
                  f"output {j}")
    ops = Operands(op, graph)
    params = {"cond": ops.refs[0], "args": ops.refs[1:], "n_out": len(op.outputs),
              "then": branches[0].index, "else": branches[1].index}
    return Kernel(op, "if.c.j2", params, ops.inputs, list(op.outputs), ops.constants,
                  subgraphs=tuple(dict.fromkeys(sg.index for sg in branches)), status=True)



"""CALL_ONCE, as TFLM's ``call_once.cc``: runs its init subgraph (no inputs; its outputs are
computed and dropped) on the module's first run after boot or after ``tvmgen_<name>_reset()``.
Its flag is a byte of the state region, which the reset clears (TFLM's own
``MicroInterpreter::Reset`` leaves its flag set, so there a reset zeroes the resource variables
without running the init again; here a reset is a boot).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..planner import align
from ..target import GENERIC, Target
from ._subgraph import callee, ctype, subgraph_scheme
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=("CALL_ONCE",), schemes=("subgraph",), classify=subgraph_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if op.inputs or op.outputs:
        raise unsupported(op, f"CALL_ONCE takes no inputs and gives no outputs; it has "
                              f"{len(op.inputs)} and {len(op.outputs)}")
    init = callee(op, graph, "init_subgraph_index")
    if init.inputs:
        raise unsupported(op, f"its init subgraph {init.index} takes {len(init.inputs)} inputs, "
                              "which nothing would set; CALL_ONCE runs a subgraph without inputs")
    outs = []
    stage = 0
    for t in init.outputs:  # computed, then dropped, as TFLM does
        y = init.tensor(t)
        outs.append({"ctype": ctype(y), "stage": stage})
        stage += align(y.size_bytes)
    params = {"init": init.index, "outs": outs}
    return Kernel(op, "call_once.c.j2", params, [], [], scratch_bytes=stage,
                  state=(("once", graph.index, op.index),), subgraphs=(init.index,),
                  status=True)



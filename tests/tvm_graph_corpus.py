"""Graph-executor archives of every TVM release, built in code as each release wrote them.

The AOT half of the corpus is ``tests/tvm_corpus.py``; this is the graph executor's half (the
archives ``relay.build(..., executor=Executor("graph"))`` and ``tvmc compile --output-format
mlf`` wrote by default, microTVM's host-driven tutorials), built the same way: byte for byte
where the release's code decides the bytes, with a tiny real network whose C computes what
:attr:`GraphNet.reference` recomputes in numpy. Use::

    from tvm_graph_corpus import GRAPH_CORPUS, build_graph_archive
    entry = build_graph_archive("graph-0.8-float", tmp_path)  # -> GraphArchive

Facts and where they come from (TVM sources at the release tag; ``mlf.py`` is
``python/tvm/micro/model_library_format.py``, ``gec.cc`` is
``src/relay/backend/graph_executor_codegen.cc``):

* **members**: MLF 5 (0.8) writes ``executor-config/graph/graph.json``, ``src/relay.txt`` and
  ``model_name``/``target`` at the top of metadata.json; MLF 7 (0.9+) writes
  ``executor-config/graph/<mod>.graph``, ``src/<mod>.relay`` and a ``modules`` map (mlf.py
  ``_export_graph_model_library_format``). No interface header (it needs the AOT executor's
  ``interface-api=c``, ``_should_generate_interface_header``) and no ``./runtime`` (``_make_tar``
  adds the CRT for AOT modules only). Tar as in ``tests/tvm_corpus.py`` (``_make_tar``; GNU
  format under TVM 0.8's Python < 3.8).
* **metadata.json**: ``"executors": ["graph"]``; ``memory.sids`` from ``_build_sid_map``,
  whose loop numbers *entries* as node ids and reads each storage id's shape and dtype at the
  storage id's index (reproduced as written); main's ``workspace_size_bytes`` is the largest
  operator's (te_compiler.cc ``UpdateMainWorkspaceSize`` notes its storage branch never runs),
  constants the parameters' bytes, io the inputs' and outputs'; per-tensor ``inputs`` and
  ``outputs`` from 0.11 (outputs ``output`` in 0.11, ``output_tensor_names`` from 0.12;
  ``_build_function_memory_map``).
* **the graph JSON**: what dmlc's ``JSONWriter`` prints for ``GetJSON`` (gec.cc): objects and
  non-POD arrays one item per line, two spaces per level, ``", "`` before the line break;
  arrays of numbers on one line up to 10 items, then one per line (``ArrayHandler``:
  ``BeginArray(size > 10 || !is_pod)``); ``attrs`` of ``["list_shape", ...]``; null nodes
  ``{"op": "null", "name": ..., "inputs": []}``; ``tvm_op`` nodes with ``func_name``,
  ``flatten_data`` "0", ``num_inputs``, ``num_outputs`` and LabelOps' 16-hex-digit ``hash``
  (a stand-in value here: TVM's is a structural hash); a reshape that shares its input's
  storage is ``reshape_nop`` calling ``__nop``; constants are null nodes ``p0``, ``p1``... in
  visit order; ``device_index`` 1 (kDLCPU) for every entry (every expression has a virtual
  device once PlanDevices ran). The keys of ``attrs`` maps are in the order libstdc++'s
  ``unordered_map`` iterates them (g++ 12, checked against a published graph JSON:
  ``dltype, device_index, storage_id, shape`` and ``num_outputs, num_inputs, flatten_data,
  func_name``, then ``hash``). Op nodes are named by ``_GetUniqueName`` / ``NameSupply``.
* **params**: ``runtime::SaveParams`` (src/runtime/file_utils.cc, ``SaveDLTensor`` in
  ndarray.h), names ``p0``... With TVM 0.8's ``-link-params=1`` they are also
  ``static const`` arrays ``__tvm_param__p<i>`` beside the operators, returned by ``_lookup_linked_param``
  by storage id (codegen_c_host.cc ``DeclareParameters`` / ``LinkParameters``); from 0.9 the
  executor's ``link-params`` fuses the constants into the operators instead
  (fuse_ops.cc), so the graph has no parameter nodes and the params file no arrays.
* **lib0.c**: the CRT metadata module (src/target/source/source_module.cc
  ``CreateFuncRegistry``, ``GenerateCrtSystemLib``): one declaration per function (5
  parameters in 0.8, ``void* resource_handle`` added from 0.9), ``_tvm_func_array``, the
  names string of func_registry_generator.cc (a 1-byte count in 0.8, 2 little-endian bytes
  from 0.9, then NUL-terminated names) escaped by support/str_escape.h (octal), then
  ``TVMSystemLibEntryPoint`` and a lone ``;``.
* **lib1.c** (0.9-0.11): the metadata module the AOT executor's packed interface uses, which
  those releases give graph builds too (``tvmgen_<mod>_get_c_metadata``, empty tensor lists);
  byte for byte the published 0.11 archive's.
* **lib1.c** (lib2.c in 0.9-0.11): CodeGenCHost (codegen_c_host.cc ``Init``: ``// tvm target:``, the two runtime
  headers, ``<math.h>``, ``<stdbool.h>`` from 0.12) and MakePackedAPI's prologue
  (src/tir/transforms/make_packed_api.cc): 0.8 ``void* arg_type_ids``, ``arg0``/``arg0_code``
  and data ``placeholder``...; 0.9-0.12 ``int32_t* arg_type_ids``, ``arg_p0``/``arg_p0_code``;
  0.13+ the type codes first (``p0_code``), then the handles, data ``p0_1`` and
  ``<fn>_p0_shape``; 0.15 forward-declares every function first (codegen_c.cc
  ``DeclareFunction``). Functions in name order from 0.9 (``BuildCHost`` sorts them). Fused
  constants as codegen_c.cc's ``AllocateConst`` prints them (codegen_params.cc
  ``NDArrayDataToC``: hexadecimal, 9 wide, 8 per row), as in the published archive.
* **the published archive** these facts were checked against: PhilippvK/microtvm-gvsoc-template
  ``template_project/model`` (TVM 0.11.dev, 2023-01-18, graph, link-params, Target("c")); its
  node and graph attrs order, dmlc layout, sids quirk, registry, metadata module and constants
  are what this corpus writes.
  emit_asserts is false for the C host, so no type checks are printed.

The fused operators' loops are our own, in the style of that generated code; TVM's own loops
are not copied.
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tvm_corpus import Tensor, _c_float, _write_tar, save_param_dict

# --- the networks ------------------------------------------------------------------------------


@dataclass
class GOp:
    """One fused operator of a network: the values it reads and writes, its C body."""

    func: str  #: the function's name after ``tvmgen_<mod>_`` (``__nop`` for reshape_nop)
    inputs: list[str]
    outputs: list[str]
    #: C statements; ``@0``, ``@1``... are the data pointers of inputs then outputs
    body: str = ""
    workspace: int = 0  #: bytes it takes with TVMBackendAllocWorkspace


@dataclass
class GraphNet:
    kind: str
    inputs: list[Tensor]
    outputs: list[Tensor]  #: in head order
    values: dict[str, Tensor]  #: every value of the graph (inputs, params, op outputs)
    ops: list[GOp]
    heads: list[str]
    sids: dict[str, int]  #: storage id of every value
    params: dict[str, np.ndarray]  #: graph parameters p0, p1... (empty when fused into C)
    constants: dict[str, np.ndarray] = field(default_factory=dict)  #: fused_constant_<i>
    output_tensor_names: list[str] = field(default_factory=list)
    reference: Callable[[dict[str, np.ndarray]], list[np.ndarray]] = field(
        default=lambda feeds: [], repr=False)


def _t(name: str, dtype: str, *shape: int) -> Tensor:
    return Tensor(name, dtype, tuple(shape))


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def sine_net(seed: int = 21) -> GraphNet:
    """The microTVM tutorials' sine model (Keras dense 16 relu, 16 relu, 1) as a graph: a
    reshape that shares its input's storage (reshape_nop), three dense layers; the second packs
    its weights in a workspace; the output reuses the first hidden layer's storage."""
    r = _rng(seed)
    p = {"p0": r.uniform(-1, 1, (16, 1)), "p1": r.uniform(-0.5, 0.5, (16,)),
         "p2": r.uniform(-0.5, 0.5, (16, 16)), "p3": r.uniform(-0.5, 0.5, (16,)),
         "p4": r.uniform(-1, 1, (1, 16)), "p5": r.uniform(-0.5, 0.5, (1,))}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    x = _t("dense_4_input", "float32", 1, 1)
    values = {t.name: t for t in [x, _t("r0", "float32", 1, 1), _t("h1", "float32", 1, 16),
                                  _t("h2", "float32", 1, 16), _t("y", "float32", 1, 1)]}
    values.update({k: _t(k, "float32", *v.shape) for k, v in p.items()})
    ops = [
        GOp("__nop", ["dense_4_input"], ["r0"]),
        GOp("fused_nn_dense_add_nn_relu", ["r0", "p0", "p1"], ["h1"],
            "  for (int32_t ax1 = 0; ax1 < 16; ++ax1) {\n"
            "    float _1 = (((float*)@0)[0] * ((float*)@1)[ax1]) + ((float*)@2)[ax1];\n"
            "    ((float*)@3)[ax1] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
            "  }\n"),
        GOp("fused_nn_dense_add_nn_relu_1", ["h1", "p2", "p3"], ["h2"],
            "  void* packed_weight = TVMBackendAllocWorkspace(1, dev_id, (uint64_t)1024, 2, 32);\n"
            "  if (packed_weight == NULL) {\n    return -1;\n  }\n"
            "  for (int32_t k = 0; k < 16; ++k) {\n"
            "    for (int32_t j = 0; j < 16; ++j) {\n"
            "      ((float*)packed_weight)[((k * 16) + j)] = ((float*)@1)[((j * 16) + k)];\n"
            "    }\n  }\n"
            "  for (int32_t ax1 = 0; ax1 < 16; ++ax1) {\n"
            "    float compute_global = 0.000000e+00f;\n"
            "    for (int32_t k_outer = 0; k_outer < 16; ++k_outer) {\n"
            "      compute_global = (compute_global + (((float*)@0)[k_outer] * "
            "((float*)packed_weight)[((k_outer * 16) + ax1)]));\n"
            "    }\n"
            "    float _1 = compute_global + ((float*)@2)[ax1];\n"
            "    ((float*)@3)[ax1] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
            "  }\n"
            "  if (TVMBackendFreeWorkspace(1, dev_id, packed_weight) != 0) {\n    return -1;\n  }\n",
            workspace=1024),
        GOp("fused_nn_dense_add", ["h2", "p4", "p5"], ["y"],
            "  float compute_global = 0.000000e+00f;\n"
            "  for (int32_t k_outer = 0; k_outer < 16; ++k_outer) {\n"
            "    compute_global = (compute_global + (((float*)@0)[k_outer] * "
            "((float*)@1)[k_outer]));\n"
            "  }\n"
            "  ((float*)@3)[0] = (compute_global + ((float*)@2)[0]);\n"),
    ]
    sids = {"dense_4_input": 0, "r0": 0, "p0": 1, "p1": 2, "h1": 3, "p2": 4, "p3": 5,
            "h2": 6, "p4": 7, "p5": 8, "y": 3}

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        v = feeds["dense_4_input"].astype(np.float32).reshape(1, 1)
        h = np.maximum(v @ p["p0"].T + p["p1"], np.float32(0))
        h = np.maximum(h @ p["p2"].T + p["p3"], np.float32(0))
        return [(h @ p["p4"].T + p["p5"]).astype(np.float32)]

    return GraphNet("sine", [x], [_t("Identity", "float32", 1, 1)], values, ops, ["y"], sids,
                    p, output_tensor_names=["Identity"], reference=reference)


def multi_output_net(seed: int = 22) -> GraphNet:
    """Three outputs: a split's first half through relu, its second half straight out (a
    multi-output node's output that is a graph output), and the split's input (an
    intermediate that is also an output)."""
    r = _rng(seed)
    p = {"p0": r.uniform(-2, 2, (8,)).astype(np.float32),
         "p1": r.uniform(-1, 1, (8,)).astype(np.float32)}
    x = _t("serving_default_x:0", "float32", 1, 8)
    values = {t.name: t for t in [x, _t("y1", "float32", 1, 8), _t("s0", "float32", 1, 4),
                                  _t("s1", "float32", 1, 4), _t("r", "float32", 1, 4)]}
    values.update({k: _t(k, "float32", *v.shape) for k, v in p.items()})
    ops = [
        GOp("fused_multiply_add", ["serving_default_x:0", "p0", "p1"], ["y1"],
            "  for (int32_t ax1 = 0; ax1 < 8; ++ax1) {\n"
            "    ((float*)@3)[ax1] = ((((float*)@0)[ax1] * ((float*)@1)[ax1]) + "
            "((float*)@2)[ax1]);\n"
            "  }\n"),
        GOp("fused_split", ["y1"], ["s0", "s1"],
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            "    ((float*)@1)[ax1] = ((float*)@0)[ax1];\n"
            "  }\n"
            "  for (int32_t ax1_1 = 0; ax1_1 < 4; ++ax1_1) {\n"
            "    ((float*)@2)[ax1_1] = ((float*)@0)[(ax1_1 + 4)];\n"
            "  }\n"),
        GOp("fused_nn_relu", ["s0"], ["r"],
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            "    float _1 = ((float*)@0)[ax1];\n"
            "    ((float*)@1)[ax1] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
            "  }\n"),
    ]
    sids = {"serving_default_x:0": 0, "p0": 1, "p1": 2, "y1": 3, "s0": 4, "s1": 5, "r": 6}

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        v = feeds["serving_default_x:0"].astype(np.float32).reshape(1, 8)
        y1 = (v * p["p0"] + p["p1"]).astype(np.float32)
        return [np.maximum(y1[:, :4], np.float32(0)), y1[:, 4:].copy(), y1]

    outs = [_t("Identity", "float32", 1, 4), _t("Identity_1", "float32", 1, 4),
            _t("Identity_2", "float32", 1, 8)]
    return GraphNet("multi", [x], outs, values, ops, ["r", "s1", "y1"], sids, p,
                    output_tensor_names=["Identity", "Identity_1", "Identity_2"],
                    reference=reference)


def int8_net(seed: int = 23, k: int = 6) -> GraphNet:
    """TFLite FULLY_CONNECTED int8 as the graph executor runs it: dense with the input zero
    point and bias into an int32 entry, then requantize to int8."""
    r = _rng(seed)
    p = {"p0": r.integers(-20, 21, (4, k)).astype(np.int8),
         "p1": r.integers(-300, 301, (4,)).astype(np.int32)}
    q = {"in_zp": -3, "out_zp": 5, "mult": 1832519379, "shift": 38}
    x = _t("serving_default_input_1:0", "int8", 1, k)
    values = {t.name: t for t in [x, _t("acc", "int32", 1, 4), _t("y", "int8", 1, 4)]}
    values.update({n: _t(n, str(v.dtype), *v.shape) for n, v in p.items()})
    ops = [
        GOp("fused_nn_contrib_dense_pack_add", ["serving_default_input_1:0", "p0", "p1"], ["acc"],
            "  for (int32_t j = 0; j < 4; ++j) {\n"
            "    int32_t compute_global = 0;\n"
            f"    for (int32_t k = 0; k < {k}; ++k) {{\n"
            f"      compute_global = (compute_global + ((((int32_t)((int8_t*)@0)[k]) - ({q['in_zp']})) * "
            f"((int32_t)((int8_t*)@1)[((j * {k}) + k)])));\n"
            "    }\n"
            "    ((int32_t*)@3)[j] = (compute_global + ((int32_t*)@2)[j]);\n"
            "  }\n"),
        GOp("fused_qnn_requantize", ["acc"], ["y"],
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            f"    int32_t _1 = ((int32_t)(((((int64_t)((int32_t*)@0)[ax1]) * (int64_t){q['mult']}) + "
            f"((int64_t)1 << ((int64_t){q['shift'] - 1}))) >> ((int64_t){q['shift']}))) + {q['out_zp']};\n"
            "    int32_t _2 = (_1) > (-128) ? (_1) : (-128);\n"
            "    ((int8_t*)@1)[ax1] = ((int8_t)((_2) < (127) ? (_2) : (127)));\n"
            "  }\n"),
    ]
    sids = {"serving_default_input_1:0": 0, "p0": 1, "p1": 2, "acc": 3, "y": 4}

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        v = feeds["serving_default_input_1:0"].astype(np.int64).reshape(1, -1)
        acc = (v - q["in_zp"]) @ p["p0"].astype(np.int64).T + p["p1"]
        scaled = (acc * q["mult"] + (1 << (q["shift"] - 1))) >> q["shift"]
        return [np.clip(scaled + q["out_zp"], -128, 127).astype(np.int8)]

    return GraphNet("int8", [x], [_t("StatefulPartitionedCall_0", "int8", 1, 4)], values, ops,
                    ["y"], sids, p, output_tensor_names=["StatefulPartitionedCall_0"],
                    reference=reference)


def two_in_two_out_net(seed: int = 24) -> GraphNet:
    """Two inputs, two outputs: relu(x * w + y) and x - y (w a parameter)."""
    r = _rng(seed)
    p = {"p0": r.uniform(-2, 2, (4,)).astype(np.float32)}
    y, x = _t("serving_default_y:0", "float32", 1, 4), _t("serving_default_x:0", "float32", 1, 4)
    values = {t.name: t for t in [y, x, _t("o0", "float32", 1, 4), _t("o1", "float32", 1, 4)]}
    values["p0"] = _t("p0", "float32", 4)
    ops = [
        GOp("fused_multiply_add_nn_relu", [x.name, "p0", y.name], ["o0"],
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            "    float _1 = ((((float*)@0)[ax1] * ((float*)@1)[ax1]) + ((float*)@2)[ax1]);\n"
            "    ((float*)@3)[ax1] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
            "  }\n"),
        GOp("fused_subtract", [x.name, y.name], ["o1"],
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            "    ((float*)@2)[ax1] = (((float*)@0)[ax1] - ((float*)@1)[ax1]);\n"
            "  }\n"),
    ]
    sids = {y.name: 0, x.name: 1, "p0": 2, "o0": 3, "o1": 4}

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        a, b = (feeds[n].astype(np.float32) for n in (x.name, y.name))
        return [np.maximum(a * p["p0"] + b, np.float32(0)), (a - b).astype(np.float32)]

    outs = [_t("Identity", "float32", 1, 4), _t("Identity_1", "float32", 1, 4)]
    return GraphNet("two", [y, x], outs, values, ops, ["o0", "o1"], sids, p,
                    output_tensor_names=["Identity", "Identity_1"], reference=reference)


def fused_constants_net(seed: int = 25) -> GraphNet:
    """A float MLP built with the executor's ``link-params`` (0.9+): the weights are fused
    into the operators as ``fused_constant_<i>`` arrays; the graph has only the input."""
    r = _rng(seed)
    c = {"fused_constant_0": r.uniform(-1, 1, (4, 8)).astype(np.float32),
         "fused_constant_1": r.uniform(-0.5, 0.5, (4,)).astype(np.float32),
         "fused_constant_2": r.uniform(-1, 1, (3, 4)).astype(np.float32),
         "fused_constant_3": r.uniform(-0.5, 0.5, (3,)).astype(np.float32)}
    x = _t("serving_default_input_1:0", "float32", 1, 8)
    values = {t.name: t for t in [x, _t("h", "float32", 1, 4), _t("y", "float32", 1, 3)]}
    ops = [
        GOp("fused_nn_dense_add_nn_relu", [x.name], ["h"],
            "  for (int32_t j = 0; j < 4; ++j) {\n"
            "    float compute_global = 0.000000e+00f;\n"
            "    for (int32_t k = 0; k < 8; ++k) {\n"
            "      compute_global = (compute_global + (((float*)@0)[k] * "
            "fused_constant_0[((j * 8) + k)]));\n"
            "    }\n"
            "    float _1 = compute_global + fused_constant_1[j];\n"
            "    ((float*)@1)[j] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
            "  }\n"),
        GOp("fused_nn_dense_add", ["h"], ["y"],
            "  for (int32_t j = 0; j < 3; ++j) {\n"
            "    float compute_global = 0.000000e+00f;\n"
            "    for (int32_t k = 0; k < 4; ++k) {\n"
            "      compute_global = (compute_global + (((float*)@0)[k] * "
            "fused_constant_2[((j * 4) + k)]));\n"
            "    }\n"
            "    ((float*)@1)[j] = (compute_global + fused_constant_3[j]);\n"
            "  }\n"),
    ]

    def reference(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        v = feeds[x.name].astype(np.float32).reshape(1, 8)
        h = np.maximum(v @ c["fused_constant_0"].T + c["fused_constant_1"], np.float32(0))
        return [(h @ c["fused_constant_2"].T + c["fused_constant_3"]).astype(np.float32)]

    return GraphNet("fused", [x], [_t("StatefulPartitionedCall_0", "float32", 1, 3)], values,
                    ops, ["y"], {x.name: 0, "h": 1, "y": 2}, {}, constants=c,
                    output_tensor_names=["StatefulPartitionedCall_0"], reference=reference)


# --- release profiles --------------------------------------------------------------------------


@dataclass
class GraphRelease:
    key: str
    tvm: str
    mlf_version: int
    net: GraphNet
    #: the prologue MakePackedAPI gives a function: "0.8", "0.9" (to 0.12), "0.13" (0.13,
    #: 0.14), "0.15" (0.13's plus forward declarations)
    style: str
    mod: str = "default"
    target: str = "c -keys=cpu -model=host"
    export_datetime: str = "2022-03-01 10:00:00Z"
    mtime: float = 1646128800
    tar_format: int = tarfile.PAX_FORMAT
    meta_tensors: str | None = None  # None, "output-names" (0.11), "named" (0.12+)
    output_tensor_names_attr: bool = True  # frontend/tflite.py from 0.9
    spans: bool = False
    #: "file" (params file only), "lookup" (0.8 -link-params=1), "fused" (0.9+ link-params)
    params: str = "file"
    quirks: list[str] = field(default_factory=list)
    # what tvm_corpus._write_tar reads
    modes: tuple[int, int, int] = (0o755, 0o755, 0o644)
    runtime_dir: bool = False
    templates_dir: bool = False
    samples: bool = False


_T08 = "c -keys=cpu -link-params=0 -model=host -runtime=c -system-lib=1"


def _graph_releases() -> dict[str, GraphRelease]:
    rel = [
        GraphRelease("graph-0.8-float", "0.8", 5, sine_net(), "0.8", target=_T08,
                     export_datetime="2021-11-24 10:00:00Z", mtime=1637748000,
                     tar_format=tarfile.GNU_FORMAT, output_tensor_names_attr=False,
                     quirks=["MLF 5", "executor-config/graph/graph.json", "reshape_nop",
                             "output storage shared with an intermediate",
                             "operator workspace", "1-byte registry count", "GNU tar"]),
        GraphRelease("graph-0.8-link-params", "0.8", 5, two_in_two_out_net(), "0.8",
                     target=_T08.replace("-link-params=0", "-link-params=1"),
                     export_datetime="2021-11-24 11:00:00Z", mtime=1637751600,
                     tar_format=tarfile.GNU_FORMAT, output_tensor_names_attr=False,
                     params="lookup",
                     quirks=["-link-params=1: __tvm_param__p0 and _lookup_linked_param",
                             "two inputs, two outputs"]),
        GraphRelease("graph-0.9-multi-output", "0.9", 7, multi_output_net(), "0.9",
                     target="c -keys=cpu -link-params=0 -model=host",
                     export_datetime="2022-08-22 10:00:00Z", mtime=1661162400,
                     quirks=["executor-config/graph/default.graph", "multi-output node",
                             "a split output is a graph output", "an intermediate is an output",
                             "2-byte registry count"]),
        GraphRelease("graph-0.10-int8", "0.10", 7, int8_net(seed=26), "0.9",
                     export_datetime="2022-10-17 10:00:00Z", mtime=1666000800,
                     quirks=["int8 with an int32 intermediate", "no per-tensor metadata"]),
        GraphRelease("graph-0.11-int8", "0.11", 7, int8_net(seed=27, k=8), "0.9",
                     target="c -keys=cpu ", export_datetime="2023-02-20 10:00:00Z",
                     mtime=1676887200,
                     meta_tensors="output-names",
                     quirks=["per-tensor metadata, outputs named 'output'"]),
        GraphRelease("graph-0.12-multi-output", "0.12", 7, multi_output_net(seed=28), "0.9",
                     export_datetime="2023-05-12 10:00:00Z", mtime=1683885600,
                     meta_tensors="named", spans=True,
                     quirks=["metadata outputs from output_tensor_names", "<stdbool.h>"]),
        GraphRelease("graph-0.13-link-params", "0.13", 7, fused_constants_net(), "0.13",
                     export_datetime="2023-07-28 10:00:00Z", mtime=1690538400,
                     meta_tensors="named", spans=True, params="fused",
                     quirks=["executor link-params: constants fused into the C",
                             "empty params file", "0.13 prologue"]),
        GraphRelease("graph-0.14-float", "0.14", 7, sine_net(seed=29), "0.13",
                     export_datetime="2023-10-02 10:00:00Z", mtime=1696240800,
                     meta_tensors="named", spans=True,
                     quirks=["reshape_nop", "output storage shared"]),
        GraphRelease("graph-0.15-int8", "0.15", 7, int8_net(seed=30, k=8), "0.15", mod="kws",
                     export_datetime="2024-01-25 10:00:00Z", mtime=1706176800,
                     meta_tensors="named", spans=True,
                     quirks=["module kws: kws.graph, kws_lib0.c", "forward declarations"]),
    ]
    return {r.key: r for r in rel}


#: Every graph archive key, oldest release first.
GRAPH_CORPUS: list[str] = list(_graph_releases())


@dataclass
class GraphArchive:
    key: str
    release: GraphRelease
    path: Path
    files: dict[str, bytes]

    @property
    def net(self) -> GraphNet:
        return self.release.net

    @property
    def ops_member(self) -> str:
        """The C file holding the fused operators (lib2.c when lib1.c is the metadata)."""
        return f"codegen/host/src/{self.release.mod}_lib{2 if _has_c_metadata(self.release) else 1}.c"

    @property
    def graph_member(self) -> str:
        r = self.release
        return ("executor-config/graph/graph.json" if r.mlf_version == 5
                else f"executor-config/graph/{r.mod}.graph")


def build_graph_archive(key: str, dest_dir: Path) -> GraphArchive:
    """Write the graph archive ``key`` as ``dest_dir/<key>.tar``."""
    release = _graph_releases()[key]
    files = graph_archive_files(release)
    path = Path(dest_dir) / f"{key}.tar"
    _write_tar(path, files, release)  # type: ignore[arg-type]
    return GraphArchive(key, release, path, files)


def graph_archive_files(r: GraphRelease) -> dict[str, bytes]:
    mod = r.mod
    graph = graph_json(r)
    files: dict[str, bytes] = {
        "metadata.json": json.dumps(_metadata(r, graph), indent=2, sort_keys=True).encode(),
        f"codegen/host/src/{mod}_lib0.c": _lib0(r).encode(),
    }
    if _has_c_metadata(r):
        files[f"codegen/host/src/{mod}_lib1.c"] = _c_metadata(r).encode()
        files[f"codegen/host/src/{mod}_lib2.c"] = _lib1(r).encode()
    else:
        files[f"codegen/host/src/{mod}_lib1.c"] = _lib1(r).encode()
    member = ("executor-config/graph/graph.json" if r.mlf_version == 5
              else f"executor-config/graph/{mod}.graph")
    files[member] = graph.encode()
    params = r.net.params if r.params != "fused" else {}
    files[f"parameters/{mod}.params"] = save_param_dict(params)
    files["src/relay.txt" if r.mlf_version == 5 else f"src/{mod}.relay"] = _relay(r).encode()
    return files


# --- the graph JSON (graph_executor_codegen.cc GetJSON through dmlc::JSONWriter) ---------------


class _Dmlc:
    """dmlc::JSONWriter: ``WriteSeperator`` breaks the line (two spaces per open scope) only
    when the innermost open scope is multi-line; ``", "`` goes before it."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.multi: list[bool] = []
        self.count: list[int] = []

    def sep(self) -> None:
        if not self.multi or self.multi[-1]:
            self.out.append("\n" + "  " * len(self.multi))

    def begin(self, ch: str, multi: bool = True) -> None:
        self.out.append(ch)
        self.multi.append(multi)
        self.count.append(0)

    def end(self, ch: str) -> None:
        newline, n = self.multi.pop(), self.count.pop()
        if newline and n:
            self.sep()
        self.out.append(ch)

    def key(self, k: str) -> None:
        if self.count[-1]:
            self.out.append(", ")
        self.sep()
        self.out.append(f'"{k}": ')
        self.count[-1] += 1

    def item(self) -> None:
        if self.count[-1]:
            self.out.append(", ")
        self.count[-1] += 1
        self.sep()

    def string(self, s: str) -> None:
        self.out.append('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')

    def numbers(self, values: list[int]) -> None:
        """A vector of POD numbers (ArrayHandler: multi-line when longer than 10)."""
        self.begin("[", len(values) > 10)
        for v in values:
            self.item()
            self.out.append(str(v))
        self.end("]")

    def text(self) -> str:
        return "".join(self.out)


#: libstdc++'s unordered_map iteration order for the key sets the codegen writes (g++ 12,
#: checked against a published graph JSON; see the module docstring).
_NODE_ATTR_ORDER = ["num_outputs", "num_inputs", "flatten_data", "func_name", "hash"]
_GRAPH_ATTR_ORDER = ["dltype", "device_index", "storage_id", "shape"]


def _label_hash(func: str) -> str:
    """A stand-in for LabelOps' ``hash`` attribute (16 hex digits of a structural hash)."""
    return hashlib.sha256(func.encode()).hexdigest()[:16]


@dataclass
class _Layout:
    """The graph's nodes in the order GraphExecutorCodegen adds them."""

    nodes: list[tuple[str, str, GOp | None]]  # (kind "null"/"op", name, op)
    node_of: dict[str, tuple[int, int]]  # value -> (node id, output index)
    entries: list[str]  # value of each entry


def _layout(r: GraphRelease) -> _Layout:
    """Inputs first (main's parameters), then the body as VisitExpr meets it: each call's
    arguments (constants become null nodes p<i> there) before the call."""
    net = r.net
    nodes: list[tuple[str, str, GOp | None]] = []
    node_of: dict[str, tuple[int, int]] = {}
    for t in net.inputs:
        node_of[t.name] = (len(nodes), 0)
        nodes.append(("null", t.name, None))
    names_used: dict[str, int] = {}
    for op in net.ops:
        for v in op.inputs:
            if v not in node_of:  # a constant, visited as the call's argument
                node_of[v] = (len(nodes), 0)
                nodes.append(("null", v, None))
        if op.func == "__nop":
            name = "reshape_nop"
        else:
            func = f"tvmgen_{r.mod}_{op.func}"
            n = names_used.get(func, 0)
            names_used[func] = n + 1
            name = func if n == 0 else (f"{func}{n}" if r.style == "0.8" else f"{func}_{n}")
        for i, v in enumerate(op.outputs):
            node_of[v] = (len(nodes), i)
        nodes.append(("op", name, op))
    entries: list[str] = []
    for _kind, name, op in nodes:
        if op is None:
            entries.append(name)
        else:
            entries.extend(op.outputs)
    return _Layout(nodes, node_of, entries)


def graph_json(r: GraphRelease) -> str:
    net, lay = r.net, _layout(r)
    w = _Dmlc()
    w.begin("{")
    w.key("nodes")
    w.begin("[")
    for kind, name, op in lay.nodes:
        w.item()
        w.begin("{")
        w.key("op")
        w.string("null" if kind == "null" else "tvm_op")
        w.key("name")
        w.string(name)
        if op is not None:
            func = "__nop" if op.func == "__nop" else f"tvmgen_{r.mod}_{op.func}"
            attrs = {"num_outputs": str(len(op.outputs)), "num_inputs": str(len(op.inputs)),
                     "flatten_data": "0", "func_name": func,
                     "hash": _label_hash(op.func if op.func != "__nop" else "reshape")}
            w.key("attrs")
            w.begin("{")
            for k in _NODE_ATTR_ORDER:
                w.key(k)
                w.string(attrs[k])
            w.end("}")
            w.key("inputs")
            w.begin("[")
            for v in op.inputs:
                w.item()
                nid, index = lay.node_of[v]
                w.begin("[")
                for n in (nid, index, 0):
                    w.item()
                    w.out.append(str(n))
                w.end("]")
            w.end("]")
        else:
            w.key("inputs")
            w.begin("[", False)
            w.end("]")
        w.end("}")
    w.end("]")
    w.key("arg_nodes")
    w.numbers([i for i, (kind, _n, _o) in enumerate(lay.nodes) if kind == "null"])
    w.key("heads")
    w.begin("[")
    for v in net.heads:
        w.item()
        nid, index = lay.node_of[v]
        w.begin("[")
        for n in (nid, index, 0):
            w.item()
            w.out.append(str(n))
        w.end("]")
    w.end("]")
    w.key("attrs")
    w.begin("{", True)
    for k in _GRAPH_ATTR_ORDER:
        w.key(k)
        w.begin("[")
        w.item()
        kind = {"dltype": "list_str", "shape": "list_shape"}.get(k, "list_int")
        w.string(kind)
        w.item()
        if k == "dltype":
            w.begin("[")
            for v in lay.entries:
                w.item()
                w.string(net.values[v].dtype)
            w.end("]")
        elif k == "shape":
            w.begin("[")
            for v in lay.entries:
                w.item()
                w.numbers(list(net.values[v].shape))
            w.end("]")
        elif k == "storage_id":
            w.numbers([net.sids[v] for v in lay.entries])
        else:
            w.numbers([1] * len(lay.entries))
        w.end("]")
    w.end("}")
    w.key("node_row_ptr")
    rows, n = [0], 0
    for _kind, _name, op in lay.nodes:
        n += 1 if op is None else len(op.outputs)
        rows.append(n)
    w.numbers(rows)
    w.end("}")
    return w.text()


# --- metadata.json -----------------------------------------------------------------------------


def _size(t: Tensor) -> int:
    return t.size


def _sid_map(graph: dict) -> list[dict]:
    """mlf.py ``_build_sid_map`` as written: entries numbered as nodes, shape and dtype read at
    the storage id's index."""
    seen: set[int] = set()
    out = []
    for node_id, storage_id in enumerate(graph["attrs"]["storage_id"][1]):
        if storage_id in seen:
            continue
        seen.add(storage_id)
        elements = 1
        for dim in graph["attrs"]["shape"][1][storage_id]:
            elements *= dim
        bits = int(re.match(r"^[a-zA-Z]+([0-9]+)$", graph["attrs"]["dltype"][1][storage_id])
                   .group(1))
        entry = {"storage_id": storage_id, "size_bytes": (elements * bits + 7) // 8}
        if node_id in graph["arg_nodes"]:
            entry["input_binding"] = graph["nodes"][node_id]["name"]
        out.append(entry)
    return out


def _output_names(r: GraphRelease) -> list[str]:
    n = len(r.net.outputs)
    default = ["output"] if n == 1 else [f"output{i}" for i in range(n)]
    if r.meta_tensors == "named":
        return list(r.net.output_tensor_names)
    return default


def _metadata(r: GraphRelease, graph_text: str) -> dict:
    net = r.net
    graph = json.loads(graph_text)
    ops = [op for op in net.ops if op.func != "__nop"]
    largest = max((op.workspace for op in ops), default=0)
    weights = net.params if r.params != "fused" else {}
    main: dict = {"constants_size_bytes": sum(a.nbytes for a in weights.values()), "device": 1,
                  "io_size_bytes": sum(_size(t) for t in net.inputs + net.outputs),
                  "workspace_size_bytes": largest}
    if r.meta_tensors:
        main["inputs"] = {t.name: {"dtype": t.dtype, "size": _size(t)} for t in net.inputs}
        main["outputs"] = {n: {"dtype": t.dtype, "size": _size(t)}
                           for n, t in zip(_output_names(r), net.outputs, strict=True)}
    memory = {
        "functions": {
            "main": [main],
            "operator_functions": [
                {"function_name": f"tvmgen_{r.mod}_{op.func}",
                 "workspace": [{"device": 1, "workspace_size_bytes": op.workspace}]}
                for op in ops],
        },
        "sids": _sid_map(graph),
    }
    entry = {"executors": ["graph"], "export_datetime": r.export_datetime, "memory": memory,
             "model_name": r.mod, "style": "full-model"}
    if r.mlf_version == 5:
        return {**entry, "target": {"1": r.target}, "version": 5}
    return {"modules": {r.mod: {**entry, "target": [r.target]}}, "version": 7}


# --- Relay text --------------------------------------------------------------------------------


def _relay(r: GraphRelease) -> str:
    """``str(mod.ir_mod)``: the module the frontend gave relay.build, untyped (its parameters
    keep their annotations, the body has no ``ty=`` and @main no ``->``, as a published 0.11
    graph archive shows), the weights as ``%v_param_<i>``, ``output_tensor_names`` from 0.9,
    spans from 0.12 (relay_text_printer.cc ``PrintSpan``)."""
    net = r.net

    def ty(t: Tensor) -> str:
        return f"Tensor[({', '.join(map(str, t.shape))}), {t.dtype}]"

    def note(span: str) -> str:
        return f" /* span={span}:0:0 */" if r.spans else ""

    params = [f"%{t.name}: {ty(t)}" for t in net.inputs]
    arg = {t.name: f"%{t.name}" for t in net.inputs}
    for i, (name, arr) in enumerate(net.params.items()):
        params.append(f"%v_param_{i + 1}: {ty(Tensor(name, str(arr.dtype), arr.shape))}")
        arg[name] = f"%v_param_{i + 1}"
    if r.output_tensor_names_attr:
        params.append("output_tensor_names=[" + ", ".join(
            f'"{n}"' for n in net.output_tensor_names) + "]")
    lines: list[str] = []
    for op in net.ops:
        relay_op = {"__nop": "reshape", "fused_split": "split"}.get(op.func, op.func.replace(
            "fused_", "").replace("nn_", "nn.").replace("qnn_", "qnn.").split("_")[0])
        args = ", ".join(arg[v] for v in op.inputs)
        if len(op.outputs) > 1:
            lines.append(f"  %{len(lines)} = {relay_op}({args}, indices_or_sections=2, "
                         f"axis=1){note(op.outputs[0])};")
            base = len(lines) - 1
            for i, v in enumerate(op.outputs):
                lines.append(f"  %{len(lines)} = %{base}.{i}{note(v)};")
                arg[v] = f"%{len(lines) - 1}"
            continue
        lines.append(f"  %{len(lines)} = {relay_op}({args}){note(op.outputs[0])};")
        arg[op.outputs[0]] = f"%{len(lines) - 1}"
    heads = [arg[v] for v in net.heads]
    if len(heads) == 1:
        last = lines.pop()
        lines.append("  " + last.split(" = ", 1)[1].rstrip(";"))
    else:
        lines.append(f"  ({', '.join(heads)})")
    return f"def @main({', '.join(params)}) {{\n" + "\n".join(lines) + "\n}\n"


# --- generated C -------------------------------------------------------------------------------


def _functions(r: GraphRelease) -> list[GOp]:
    """The functions CodeGenCHost adds: graph order in 0.8, name order from 0.9."""
    ops = [op for op in r.net.ops if op.func != "__nop"]
    unique = list({op.func: op for op in ops}.values())
    return unique if r.style == "0.8" else sorted(unique, key=lambda o: f"tvmgen_{r.mod}_{o.func}")


def _func_names(r: GraphRelease) -> list[str]:
    names = [f"tvmgen_{r.mod}_{op.func}" for op in _functions(r)]
    if r.params == "lookup":
        names.append("_lookup_linked_param")
    if _has_c_metadata(r):
        names.append(f"tvmgen_{r.mod}_get_c_metadata")
    return names


def _has_c_metadata(r: GraphRelease) -> bool:
    """0.9-0.11 give every C-runtime build the metadata module of the AOT executor's packed
    interface (source_module.cc ``CreateCSourceCrtMetadataModule``: ``aot_metadata.defined()``;
    from 0.12 only for ``metadata->executor == "aot"``)."""
    return r.tvm in ("0.9", "0.10", "0.11")


def _c_metadata(r: GraphRelease) -> str:
    """The metadata module (metadata_utils.cc ``MetadataSerializer``, source_module.cc
    ``CreateAotMetadataModule``): empty tensor lists for a graph build, then
    ``tvmgen_<mod>_get_c_metadata``. It comes out of the import tree before the operators
    (``_collect_from_import_tree`` walks a stack), so it is lib1.c and the operators lib2.c."""
    out = ["#include <inttypes.h>\n#include <tvm/runtime/metadata_types.h>\n"
           "#include <tvm/runtime/c_runtime_api.h>\n"]
    for name, kind in (("inputs", "TVMTensorInfo"), ("outputs", "TVMTensorInfo"),
                       ("workspace_pools", "TVMTensorInfo"),
                       ("constant_pools", "TVMConstantInfo")):
        out.append(f"static const struct {kind} kTvmgenMetadata_{name}[0] = {{\n}};\n")
    fields = ["1L /* version*/", "kTvmgenMetadata_inputs", "0L /* num_inputs*/",
              "kTvmgenMetadata_outputs", "0L /* num_outputs*/", "kTvmgenMetadata_workspace_pools",
              "0L /* num_workspace_pools*/", "kTvmgenMetadata_constant_pools",
              "0L /* num_constant_pools*/"]
    out.append("static const struct TVMMetadata kTvmgenMetadata[1] = {\n{\n"
               + "".join(f"{f}, \n" for f in fields) + f'"tvmgen_{r.mod}" /* mod_name*/}}\n}};\n')
    out.append('#ifdef __cplusplus\nextern "C"\n#endif\n'
               f"TVM_DLL int32_t tvmgen_{r.mod}_get_c_metadata(TVMValue* arg_values, int* "
               "arg_tcodes, int num_args, TVMValue* ret_values, int* ret_tcodes, void* "
               "resource_handle) {\n    ret_values[0].v_handle = (void*) &kTvmgenMetadata;\n"
               "    ret_tcodes[0] = kTVMOpaqueHandle;\n    return 0;\n};\n")
    return "".join(out)


def _ndarray_to_c(arr: np.ndarray, release: str) -> str:
    """codegen_params.cc ``NDArrayDataToC`` (indent 4) for float32: hexadecimal, each element
    left-justified to 9 characters, 8 per row (the largest power of two that fits 80 columns).
    From 0.11 each row ends after its ``", "`` and the last in a line break; TVM 0.8 breaks
    before each row but the first, and ends with one only after a partial row."""
    items = [f"{_c_float(v):<9}" for v in arr.reshape(-1)]
    n, per_row = len(items), 8
    out = []
    for i, item in enumerate(items):
        if i % per_row == 0:
            if release == "0.8" and i:
                out.append("\n")
            out.append("    ")
        out.append(item + (", " if i < n - 1 else ""))
        if release != "0.8" and i % per_row == per_row - 1:
            out.append("\n")
    if n % per_row:
        out.append("\n")
    return "".join(out)


def _octal_escape(data: bytes) -> str:
    """support/str_escape.h StrEscape(..., use_octal_escape=true)."""
    out = []
    for c in data:
        if 0x20 <= c <= 0x7E and c not in (0x5C, 0x22):
            out.append(chr(c))
        elif c == 0x22:
            out.append('\\"')
        elif c == 0x5C:
            out.append("\\\\")
        elif c in (9, 13, 10):
            out.append({9: "\\t", 13: "\\r", 10: "\\n"}[c])
        else:
            out.append("\\" + f"{(c >> 6) & 3}{(c >> 3) & 7}{c & 7}")
    return "".join(out)


def _lib0(r: GraphRelease) -> str:
    names = _func_names(r)
    resource = "" if r.style == "0.8" else ", void* resource_handle"
    out = ["#include <tvm/runtime/crt/module.h>\n"]
    for f in names:
        out.append('#ifdef __cplusplus\nextern "C"\n#endif\n'
                   f"TVM_DLL int32_t {f}(TVMValue* args, int* type_code, int num_args, "
                   f"TVMValue* out_value, int* out_type_code{resource});\n")
    out.append("static TVMBackendPackedCFunc _tvm_func_array[] = {\n")
    out += [f"    (TVMBackendPackedCFunc){f},\n" for f in names]
    out.append("};\n")
    count = len(names).to_bytes(1 if r.style == "0.8" else 2, "little")
    registry = count + b"".join(n.encode() + b"\0" for n in names)
    out.append("static const TVMFuncRegistry _tvm_func_registry = {\n"
               f'    "{_octal_escape(registry)}",    _tvm_func_array,\n}};\n')
    out.append("static const TVMModule _tvm_system_lib = {\n    &_tvm_func_registry,\n};\n"
               "const TVMModule* TVMSystemLibEntryPoint(void) {\n    return &_tvm_system_lib;\n}\n")
    out.append(";")
    return "".join(out)


_C_TYPES = {"float32": "float", "int8": "int8_t", "int32": "int32_t"}


def _signature(r: GraphRelease, name: str) -> str:
    if r.style == "0.8":
        return (f"{name}(void* args, void* arg_type_ids, int32_t num_args, void* out_ret_value, "
                "void* out_ret_tcode, void* resource_handle)")
    return (f"{name}(void* args, int32_t* arg_type_ids, int32_t num_args, void* out_ret_value, "
            "int32_t* out_ret_tcode, void* resource_handle)")


def _packed_function(r: GraphRelease, op: GOp) -> str:
    """One fused operator as MakePackedAPI and CodeGenCHost print it in release ``r``."""
    fn = f"tvmgen_{r.mod}_{op.func}"
    n_in, n_out = len(op.inputs), len(op.outputs)
    out_names = [_out_name(op, i) for i in range(n_out)]
    lines = []
    if r.style == "0.8":
        params = [f"arg{i}" for i in range(n_in + n_out)]
        data = ["placeholder" if i == 0 else f"placeholder{i}" for i in range(n_in)] + out_names
        for i, p in enumerate(params):
            lines.append(f"  void* {p} = (((TVMValue*)args)[{i}].v_handle);\n")
            lines.append(f"  int32_t {p}_code = ((int32_t*)arg_type_ids)[({i})];\n")
        shape = [f"{p}_shape" for p in params]
        strides = [f"{p}_strides" for p in params]
        handles = params
    elif r.style == "0.9":
        names = [f"p{i}" for i in range(n_in)] + out_names
        handles = [f"arg_{n}" for n in names]
        data = names
        for i, h in enumerate(handles):
            lines.append(f"  void* {h} = (((TVMValue*)args)[{i}].v_handle);\n")
            lines.append(f"  int32_t {h}_code = arg_type_ids[{i}];\n")
        shape = [f"{h}_shape" for h in handles]
        strides = [f"{h}_strides" for h in handles]
    else:
        names = [f"p{i}" for i in range(n_in)] + out_names
        handles = names
        data = [f"{n}_1" for n in names]
        for i, n in enumerate(names):
            lines.append(f"  int32_t {n}_code = arg_type_ids[{i}];\n")
        for i, n in enumerate(names):
            lines.append(f"  void* {n} = (((TVMValue*)args)[{i}].v_handle);\n")
        shape = [f"{fn}_{n}_shape" for n in names]
        strides = [f"{fn}_{n}_strides" for n in names]
    for i, h in enumerate(handles):
        lines.append(f"  void* {data[i]} = (((DLTensor*){h})[0].data);\n")
        lines.append(f"  void* {shape[i]} = (((DLTensor*){h})[0].shape);\n")
        lines.append(f"  void* {strides[i]} = (((DLTensor*){h})[0].strides);\n")
        if i == 0:
            lines.append(f"  int32_t dev_id = (((DLTensor*){h})[0].device.device_id);\n")
    for s in strides:
        lines.append(f"  if (!({s} == NULL)) {{\n  }}\n")
    body = re.sub(r"@(\d)", lambda m: data[int(m.group(1))], op.body)
    return ('#ifdef __cplusplus\nextern "C"\n#endif\n'
            f"TVM_DLL int32_t {_signature(r, fn)} {{\n" + "".join(lines) + body
            + "  return 0;\n}\n\n")


def _out_name(op: GOp, i: int) -> str:
    """The TE output buffer's name, after the fused group's last operator (``T_relu``,
    ``T_add``; qnn.requantize ends in a cast, ``T_cast``; a split's parts ``T_split``,
    ``T_split_1``)."""
    last = re.sub(r"_\d+$", "", op.func).rsplit("_", 1)[-1]
    base = {"requantize": "T_cast"}.get(last, f"T_{last}")
    return base if i == 0 else f"{base}_{i}"


def _lib1(r: GraphRelease) -> str:
    head = (f"// tvm target: {r.target}\n#define TVM_EXPORTS\n"
            '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
            "#include <math.h>\n")
    if r.tvm not in ("0.8", "0.9", "0.10", "0.11"):
        head += "#include <stdbool.h>\n"
    functions = _functions(r)
    decls = ""
    if r.style == "0.15":
        decls = "".join('#ifdef __cplusplus\nextern "C"\n#endif\n'
                        f"TVM_DLL int32_t {_signature(r, f'tvmgen_{r.mod}_{op.func}')};\n"
                        for op in functions)
    consts = ""
    if r.params == "lookup":  # codegen_c_host.cc DeclareParameters (float32 parameters)
        for name, arr in r.net.params.items():
            consts += ("\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
                       f"static const {_C_TYPES[str(arr.dtype)]} __tvm_param__{name}[{arr.size}] "
                       f"= {{\n{_ndarray_to_c(arr, '0.8')}}};\n"
                       "#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n")
    elif r.params == "fused":  # codegen_c.cc VisitStmt_(AllocateConstNode)
        for name, arr in r.net.constants.items():
            consts += ("\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
                       f"static const {_C_TYPES[str(arr.dtype)]} __attribute__((section("
                       f"\".rodata.tvm\"), aligned(16))) {name}[{arr.size}] = {{\n"
                       f"{_ndarray_to_c(arr, r.tvm)}}};\n"
                       "#ifdef __cplusplus\n}  // extern \"C\"\n#endif\n")
    body = "".join(_packed_function(r, op) for op in functions)
    if r.params == "lookup":
        lay = _layout(r)
        cases = "".join(
            f"    case {r.net.sids[name]}:\n"
            f"        ((uint64_t*)out_ret_value)[0] = (uint64_t) (uintptr_t) __tvm_param__{name};\n"
            "        out_ret_tcode[0] = 3;\n        return 0;\n"
            for name in r.net.params if name in lay.node_of)
        body += ('#ifdef __cplusplus\nextern "C"\n#endif\n'
                 "TVM_DLL int32_t _lookup_linked_param(void* args, int* arg_type_ids, int "
                 "num_args, void* out_ret_value, int* out_ret_tcode, void* resource_handle) {\n"
                 "    switch (((int64_t*) args)[0]) {\n    default:\n"
                 "        out_ret_tcode[0] = 4;\n        return 0;\n" + cases + "    }\n}\n")
    return head + decls + consts + body

"""A conformance corpus: one Model Library Format archive per TVM release layout, built in code.

This module holds the AOT archives; the graph executor's, of every release too, are in
``tests/tvm_graph_corpus.py``, which reuses the tensors, params writer and tar writer here.

``tests/mlf_factory.py`` writes archives from our reading of the format; this module writes them
as each TVM release really did, byte for byte where the release's code decides the bytes (member
order and owners of the tar, ``metadata.json`` keys and formatting, the interface header text,
the Relay text of a TFLite import, the params binary, the style of the generated C). Each archive
holds a tiny but real network whose C computes something :meth:`Model.reference` recomputes in
numpy, so an archive can go through generate, build and run and be checked.

Use::

    from tvm_corpus import build_archive, CORPUS
    entry = build_archive("tvm-0.8-float", tmp_path)   # -> CorpusArchive (path, model, quirks)

Releases and their quirks (TVM source locations are at the release tag; ``mlf.py`` is
``python/tvm/micro/model_library_format.py``):

=====================  =======  ==============================================================
archive                MLF      quirks reproduced (where the fact comes from)
=====================  =======  ==============================================================
tvm-0.8-float          5        top-level module, ``target`` a dict ``{"1": ...}``, ``src/relay.txt``
                                (mlf.py ``_export_graph_model_library_format``, v0.8.0); no
                                per-tensor facts; header without ``WORKSPACE_SIZE`` and outputs
                                named ``output`` (interface_c.cc, mlf.py
                                ``_get_inputs_and_outputs_from_module``, v0.8.0); lib0.c holds only
                                the packed-API ``_run(void* args, ...)`` and lib1.c defines the
                                flat ``tvmgen_default_run_model`` (source_module.cc
                                ``GenerateEntrypointForUnpackedAPI``, module.h
                                ``tvm_run_func_suffix``, v0.8.0) while the header declares
                                ``_run(struct ...)``; Relay ``@main`` lists the unbound weights
                                ``%v_param_1..4`` (frontend/common.py ``ExprTable.new_const``,
                                printer/relay_text_printer.cc ``AllocVar`` adds ``v``); no
                                ``output_tensor_names`` yet; GNU tar format (tarfile's default before
                                Python 3.8, which TVM 0.8 ran on)
tvm-v6-int8            6        nightly of May-June 2022 (commit d1467777c6, "Finish support for
                                list-of-targets"): still one top-level module, ``target`` a list,
                                ``external_dependencies`` at top level, ``src/relay.txt``,
                                ``./runtime`` (mlf.py ``_make_tar``); header with
                                ``WORKSPACE_SIZE`` (interface_c.cc); ``output_tensor_names`` attr
                                in Relay (frontend/tflite.py ``from_tflite``); main is
                                ``__tvm_main__`` (module.h ``tvm_module_main``)
tvm-0.9-float2         7        ``"modules"`` map, ``src/default.relay`` (mlf.py, v0.9.0); still
                                no per-tensor facts; two inputs whose header order (y, x) is not
                                metadata's sorted order; two outputs named by
                                ``output_tensor_names`` (aot_executor_codegen.cc); ``./runtime``
                                members keep the exporter's uid (``_make_tar`` adds them without
                                the ``reset`` filter); PAX tar
tvm-0.10-int8          7        as 0.9 (interface_c.cc and mlf.py unchanged in substance)
tvm-0.11-float         7        per-tensor ``inputs``/``outputs`` (size, dtype) appear, but outputs
                                are named ``output`` while the header uses the model's output
                                names (mlf.py ``_build_function_memory_map``, v0.11.0); header
                                size macros whose doc comment holds the *sanitized* name
                                (interface_c.cc ``EmitIntegerValueMacro``, PR #12789)
tvm-0.12-int8          7        metadata outputs named from ``output_tensor_names`` (PR #13704);
                                ``./templates/*.template`` added as files without a directory
                                member (mlf.py ``_make_tar``); Relay spans
                                ``/* ty=... span=NAME:0:0 */`` (frontend/tflite.py ``set_span``,
                                relay_text_printer.cc ``PrintSpan``)
tvm-0.13-float2        7        as 0.12. lib0.c's prototype of ``__tvm_main__`` prints each
                                input's TIR type annotation and sanitized name (source_module.cc
                                ``GenerateCInterfaceEntrypoint``, same since 0.9): the 2022 MLPerf
                                Tiny code shows ``void*``; the 0.13+ archives here use typed
                                pointers (``float*``) to cover the other outcome
tvm-0.15-int8          7        as 0.13, module named ``kws`` (``tvmgen_kws.h``, ``kws_lib0.c``,
                                ``src/kws.relay``, ``parameters/kws.params``)
tvm-0.13-usmp          7        USMP internal pool in lib0.c, ``static uint8_t
                                global_workspace[N]`` in ``.bss.noinit.tvm`` passed as
                                ``&global_workspace`` (source_module.cc
                                ``GenerateWorkspaceBuffer``); main's ``workspace_size_bytes`` 0
tvm-0.13-cortex-m      7        ``-mcpu=cortex-m7`` target; lib1.c includes ``<arm_acle.h>`` and
                                uses ``__sxtb16``/``__smlad``/``__ror`` unconditionally, after
                                the block TVM's DSP kernels start with (``__ror`` and inline-asm
                                ``__pkhbt``/``__pkhtb`` unless ``ARM_CPU_INTRINSICS_EXIST``;
                                topi/arm_cpu/mprofile/dsp/micro_kernel/common.py, gemm.py)
world-2021-keras-dense 5        rebuilds gromero/sine_aot's model.tar (TVM main, 2021-12-14): the
                                microTVM tutorials' sine model (Keras ``dense_4_input`` via
                                TFLite) for a Cortex-M7; metadata main without inputs/outputs,
                                io_size_bytes 8; header outputs ``{ void* output; }``, no size
                                macros, the workspace brief without EmitBrief's space; ONE C file,
                                default_lib0.c: weights ``__tvm_param__p<i>`` passed to the
                                operators and ``tvmgen_default_run_model(void* input, void*
                                output)``, no ``tvmgen_default_run`` defined anywhere; params
                                named p0, p1, p4, p2, p3, p5; relay.txt untyped, no ``->``; tar
                                modes 700/775/664 and a fractional PAX mtime. metadata.json, the
                                header and relay.txt are byte for byte the published files.
world-2023-cortex-m7-  7        rebuilds patschmidt2/letscope_demo_stm's model.tar (TVM
int8                            0.13.dev0, 2023-09-22): int8 for ``-keys=arm_cpu,cpu
                                -march=armv7e-m -mcpu=cortex-m7``, TVM's gemm micro-kernels
                                (``read_and_pad`` with one-line inline-asm ``__pkhbt``/``__pkhtb``,
                                ``__smlad``), three dense layers each ending in a logistic in
                                float (``expf``/``roundf``), ``void*`` lib0 prototype,
                                ``./runtime``; output ``StatefulPartitionedCall_0`` recorded as
                                ``{dtype int8, size 1}``, no shape; io_size_bytes larger than its
                                tensors; an empty params file; default.relay with spans and
                                ``output_tensor_names``, untyped, ``rounding``/``compute_dtype``
                                printed, ending in ``qnn.quantize(%19, ...)`` after
                                ``qnn.dense(..., units=1)``; ``samples/dummy_input.h`` and
                                ``samples/expected_output.h`` appended (no ``./``, no owner name)
=====================  =======  ==============================================================

No Relay text starts with ``#[version]`` or ends with a metadata note: the exporter writes
``str(ir_mod)`` (every published archive read agrees). All archives use ``-link-params=0``: the weights are both in ``parameters/<mod>.params`` and, as
``static const`` arrays in section ``.rodata.tvm``, in the generated C (the C entry point takes
only the real inputs). The ``./runtime`` and ``./templates`` contents are short stand-ins with
TVM's file names, not TVM's code. Real generated code of the period (MLPerf Tiny v1.0, OctoML)
was read for the style of lib0.c/lib1.c; nothing of it is copied.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# --- the networks ------------------------------------------------------------------------------


@dataclass
class Tensor:
    name: str  # TFLite spelling, e.g. "serving_default_input_1:0"
    dtype: str
    shape: tuple[int, ...]

    @property
    def c_name(self) -> str:
        return re.sub(r"[^0-9A-Za-z]", "_", self.name)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def relay(self) -> str:
        return f"Tensor[({', '.join(map(str, self.shape))}), {self.dtype}]"


@dataclass
class Model:
    """A tiny TFLite-style network: its tensors, weights and a numpy reference."""

    kind: str  # "float_mlp", "int8_dense", "float_two_in_two_out"
    inputs: list[Tensor]
    outputs: list[Tensor]
    params: dict[str, np.ndarray]  # "_param_1" -> array, in ExprTable order
    output_tensor_names: list[str]  # as the TFLite frontend sets them (sanitized)
    quant: dict[str, int] = field(default_factory=dict)  # int8: in_zp, out_zp, mult, shift
    #: int8_sigmoid_mlp: per dense layer in_zp, mult, shift, rq_zp, rq_scale (the requantized
    #: int8 that its logistic dequantizes)
    layers: list[dict] = field(default_factory=list)
    op_workspace: int = 0  # bytes an operator allocates itself (TVMBackendAllocWorkspace)

    def ambiguous(self, feeds: dict[str, np.ndarray]) -> bool:
        """True when a quantized sigmoid's value lies so near a rounding boundary that float32
        with the C library's expf may round it otherwise than numpy; tests draw another sample
        then (every other sample must match exactly)."""
        if self.kind != "int8_sigmoid_mlp":
            return False
        return self._sigmoid_mlp(feeds, np.float64)[1]

    def reference(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The network computed in numpy, independently of the generated C."""
        p = self.params
        if self.kind == "sine_mlp":
            x = feeds[self.inputs[0].name].astype(np.float32).reshape(-1, 1)
            h = np.maximum(x @ p["_param_1"].T + p["_param_2"], np.float32(0))
            h = np.maximum(h @ p["_param_3"].T + p["_param_4"], np.float32(0))
            return [(h @ p["_param_5"].T + p["_param_6"]).astype(np.float32)]
        if self.kind == "int8_sigmoid_mlp":
            return [self._sigmoid_mlp(feeds, np.float32)[0]]
        if self.kind == "float_mlp":
            x = feeds[self.inputs[0].name].astype(np.float32).reshape(1, -1)
            h = np.maximum(x @ p["_param_1"].T + p["_param_2"], np.float32(0))
            return [(h @ p["_param_3"].T + p["_param_4"]).astype(np.float32)]
        if self.kind == "int8_dense":
            q = self.quant
            x = feeds[self.inputs[0].name].astype(np.int64).reshape(1, -1)
            acc = (x - q["in_zp"]) @ p["_param_1"].astype(np.int64).T + p["_param_2"]
            scaled = (acc * q["mult"] + (1 << (q["shift"] - 1))) >> q["shift"]
            return [np.clip(scaled + q["out_zp"], -128, 127).astype(np.int8)]
        if self.kind == "float_two_in_two_out":
            y = feeds[self.inputs[0].name].astype(np.float32)
            x = feeds[self.inputs[1].name].astype(np.float32)
            return [np.maximum(x * p["_param_1"] + y, np.float32(0)), (x - y).astype(np.float32)]
        raise ValueError(self.kind)

    def _sigmoid_mlp(self, feeds: dict[str, np.ndarray], ftype: type) -> tuple[np.ndarray, bool]:
        """int8 dense layers, each requantized (fixed point, rounding up) and then a TFLite
        LOGISTIC as TVM lowers it: dequantize, sigmoid in float, quantize to scale 1/256 and zero
        point -128 (round half away from zero). Also whether any rounding was a near tie."""
        p = self.params
        x = feeds[self.inputs[0].name].astype(np.int64).reshape(1, -1)
        near = False
        for k, q in enumerate(self.layers):
            w, b = p[f"_param_{2 * k + 1}"].astype(np.int64), p[f"_param_{2 * k + 2}"]
            acc = (x - q["in_zp"]) @ w.T + b
            scaled = (acc * q["mult"] + (1 << (q["shift"] - 1))) >> q["shift"]
            rq = np.clip(scaled + q["rq_zp"], -128, 127)
            v = (rq - q["rq_zp"]).astype(ftype) * ftype(q["rq_scale"])
            sig = ftype(1) / (ftype(1) + np.exp(ftype(0) - v))
            scaled_f = sig / ftype(1.0 / 256.0)
            frac = scaled_f - np.floor(scaled_f)
            near = near or bool(np.any(np.abs(frac - 0.5) < 1e-3))
            rounded = np.floor(scaled_f + ftype(0.5))  # the values are positive
            x = np.clip(rounded.astype(np.int64) - 128, -128, 127)
        return x.astype(np.int8), near


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def float_mlp(seed: int = 1) -> Model:
    r = _rng(seed)
    params = {
        "_param_1": r.uniform(-1, 1, (4, 8)).astype(np.float32),
        "_param_2": r.uniform(-0.5, 0.5, (4,)).astype(np.float32),
        "_param_3": r.uniform(-1, 1, (3, 4)).astype(np.float32),
        "_param_4": r.uniform(-0.5, 0.5, (3,)).astype(np.float32),
    }
    return Model("float_mlp", [Tensor("serving_default_input_1:0", "float32", (1, 8))],
                 [Tensor("StatefulPartitionedCall:0", "float32", (1, 3))], params,
                 ["StatefulPartitionedCall_0"])


def int8_dense(seed: int = 2, k: int = 6) -> Model:
    r = _rng(seed)
    params = {
        "_param_1": r.integers(-20, 21, (4, k)).astype(np.int8),
        "_param_2": r.integers(-300, 301, (4,)).astype(np.int32),
    }
    quant = {"in_zp": -3, "out_zp": 5, "mult": 1832519379, "shift": 38}
    return Model("int8_dense", [Tensor("serving_default_input_1:0", "int8", (1, k))],
                 [Tensor("StatefulPartitionedCall:0", "int8", (1, 4))], params,
                 ["StatefulPartitionedCall_0"], quant)


def float_two_in_two_out(seed: int = 3) -> Model:
    r = _rng(seed)
    params = {"_param_1": r.uniform(-2, 2, (4,)).astype(np.float32)}
    return Model("float_two_in_two_out",
                 [Tensor("serving_default_y:0", "float32", (1, 4)),
                  Tensor("serving_default_x:0", "float32", (1, 4))],
                 [Tensor("Identity:0", "float32", (1, 4)), Tensor("Identity_1:0", "float32", (1, 4))],
                 params, ["Identity", "Identity_1"])


def sine_mlp(seed: int = 11) -> Model:
    """TVM's microTVM tutorial model (a Keras Sequential fitting sin(x), exported to TFLite):
    dense 16 relu, dense 16 relu, dense 1 on one float input named by Keras, ``dense_4_input``;
    weights random here."""
    r = _rng(seed)
    params = {
        "_param_1": r.uniform(-1, 1, (16, 1)).astype(np.float32),
        "_param_2": r.uniform(-0.5, 0.5, (16,)).astype(np.float32),
        "_param_3": r.uniform(-0.5, 0.5, (16, 16)).astype(np.float32),
        "_param_4": r.uniform(-0.5, 0.5, (16,)).astype(np.float32),
        "_param_5": r.uniform(-1, 1, (1, 16)).astype(np.float32),
        "_param_6": r.uniform(-0.5, 0.5, (1,)).astype(np.float32),
    }
    return Model("sine_mlp", [Tensor("dense_4_input", "float32", (1, 1))],
                 [Tensor("Identity", "float32", (1, 1))], params, ["Identity"],
                 op_workspace=1024)


def _layer_scales(m: Model) -> list[tuple[float, float, float]]:
    """(input scale, weight scale, requantized scale) of each dense layer, consistent with its
    fixed-point multiplier (mult / 2**shift == input * weight / requantized); after the first
    layer the input is a quantized sigmoid (scale 1/256)."""
    scales = []
    s_in = 0.996078
    for q in m.layers:
        s_out = q["rq_scale"]
        s_w = (q["mult"] / 2.0 ** q["shift"]) * s_out / s_in
        scales.append((s_in, s_w, s_out))
        s_in = 1.0 / 256.0
    return scales


def _fixed_point(scale: float) -> tuple[int, int]:
    """(multiplier, shift) with multiplier / 2**shift == scale, multiplier in [2**30, 2**31)."""
    shift = 30 - math.floor(math.log2(scale))
    mult = round(scale * 2.0 ** shift)
    if mult >= 1 << 31:
        shift -= 1
        mult = round(scale * 2.0 ** shift)
    return mult, shift


def int8_sigmoid_mlp(seed: int = 12) -> Model:
    """The network of a published TVM 0.13 archive (TFLite, int8): three dense layers, each
    followed by LOGISTIC, 5 inputs, 1 output (512 wide there, 16 here)."""
    r = _rng(seed)
    sizes = [(16, 5), (16, 16), (1, 16)]
    params: dict[str, np.ndarray] = {}
    for k, (n, kk) in enumerate(sizes):
        params[f"_param_{2 * k + 1}"] = r.integers(-60, 61, (n, kk)).astype(np.int8)
        params[f"_param_{2 * k + 2}"] = r.integers(-3000, 3001, (n,)).astype(np.int32)
    layers = []
    for in_zp, scale in ((-1, 0.004), (-128, 0.0006), (-128, 0.0008)):
        mult, shift = _fixed_point(scale)
        layers.append({"in_zp": in_zp, "mult": mult, "shift": shift, "rq_zp": -1,
                       "rq_scale": 0.05})
    return Model("int8_sigmoid_mlp", [Tensor("serving_default_input_1:0", "int8", (1, 5))],
                 [Tensor("StatefulPartitionedCall:0", "int8", (1, 1))], params,
                 ["StatefulPartitionedCall_0"], layers=layers)


# --- release profiles --------------------------------------------------------------------------


@dataclass
class Release:
    key: str
    tvm: str  # "0.8", "v6-nightly", ...
    mlf_version: int
    model: Model
    mod: str = "default"
    export_datetime: str = "2022-03-01 10:00:00Z"
    mtime: float = 1646128800
    tar_format: int = tarfile.PAX_FORMAT
    target: str = "c -keys=cpu -link-params=0"
    flat_run_model: bool = False  # 0.8: main is tvmgen_<mod>_run_model, lib0 packed-API entry
    header_workspace_macro: bool = True  # from 0.9 / the v6 nightly
    header_size_macros: bool = False  # from 0.11
    meta_tensors: str | None = None  # None, "output-names" (0.11), "named" (0.12+)
    output_tensor_names_attr: bool = True  # frontend/tflite.py since 0.9
    spans: bool = False  # Relay spans since 0.12
    runtime_dir: bool = False  # ./runtime since 0.9 / v6
    templates_dir: bool = False  # ./templates since 0.12
    typed_lib0_inputs: bool = False  # 0.13: float* / int8_t* in the lib0.c prototype
    usmp: bool = False
    cortex_m: bool = False
    #: the AOT main's name when it is not __tvm_main__ / the 0.8 flat run_model (Dec 2021:
    #: ``run_model`` behind the struct entry point)
    main_suffix: str | None = None
    typed_relay: bool = True  # the Relay text carries ty= comments and @main's -> type
    workspace_brief_space: bool = True  # "... module \"default\" \n": EmitBrief's space
    #: "lib0+lib1"; "single-lib0" (a 2021 export: weights, operators and run_model all in
    #: default_lib0.c, no struct entry point defined anywhere)
    layout: str = "lib0+lib1"
    param_file_names: list[str] | None = None  # the params file's names when lowered (p0..)
    version_spec: str | None = None  # external_dependencies' version_spec
    constants_size: int | None = None  # main's constants_size_bytes if not the weights' bytes
    io_extra: int = 0  # io_size_bytes beyond the tensors (TVM counts other buffers too)
    op_names: list[str] | None = None  # operator functions in metadata order
    op_workspaces: dict[str, int] = field(default_factory=dict)
    modes: tuple[int, int, int] = (0o755, 0o755, 0o644)  # root, folders, files in the tar
    samples: bool = False  # samples/dummy_input.h and expected_output.h appended to the tar
    #: a published archive this one rebuilds (what it is and what it taught)
    world: str = ""
    quirks: list[str] = field(default_factory=list)

    @property
    def arm_only(self) -> bool:
        return self.cortex_m


def _releases() -> dict[str, Release]:
    rel = [
        Release("tvm-0.8-float", "0.8", 5, float_mlp(), export_datetime="2021-11-24 10:00:00Z",
                mtime=1637748000, tar_format=tarfile.GNU_FORMAT,
                target="c -keys=cpu -executor=aot -link-params=0 -unpacked-api=1",
                flat_run_model=True, header_workspace_macro=False,
                output_tensor_names_attr=False,
                quirks=["v5 top-level module", "target dict", "src/relay.txt",
                        "flat _run_model only (header declares _run)", "unbound %v_param_N",
                        "no output_tensor_names", "GNU tar"]),
        Release("tvm-v6-int8", "v6-nightly", 6, int8_dense(), export_datetime="2022-06-01 10:00:00Z",
                mtime=1654077600, runtime_dir=True,
                quirks=["v6 top-level module", "target list", "src/relay.txt",
                        "top-level external_dependencies", "./runtime",
                        "output_tensor_names attr", "no per-tensor metadata"]),
        Release("tvm-0.9-float2", "0.9", 7, float_two_in_two_out(),
                export_datetime="2022-08-22 10:00:00Z", mtime=1661162400, runtime_dir=True,
                quirks=["modules map", "no per-tensor metadata", "header order != sorted",
                        "two named outputs", "runtime/ with exporter uid"]),
        Release("tvm-0.10-int8", "0.10", 7, int8_dense(seed=4),
                export_datetime="2022-10-17 10:00:00Z", mtime=1666000800, runtime_dir=True,
                quirks=["as 0.9"]),
        Release("tvm-0.11-float", "0.11", 7, float_mlp(seed=5),
                export_datetime="2023-02-20 10:00:00Z", mtime=1676887200, runtime_dir=True,
                header_size_macros=True, meta_tensors="output-names",
                quirks=["metadata outputs 'output' vs header StatefulPartitionedCall_0",
                        "size macros with sanitized names"]),
        Release("tvm-0.12-int8", "0.12", 7, int8_dense(seed=6),
                export_datetime="2023-05-12 10:00:00Z", mtime=1683885600, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                quirks=["metadata outputs from output_tensor_names", "./templates files",
                        "Relay span comments"]),
        Release("tvm-0.13-float2", "0.13", 7, float_two_in_two_out(seed=7),
                export_datetime="2023-07-28 10:00:00Z", mtime=1690538400, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                typed_lib0_inputs=True, quirks=["as 0.12", "typed lib0 prototype"]),
        Release("tvm-0.15-int8", "0.15", 7, int8_dense(seed=8), mod="kws",
                export_datetime="2024-01-25 10:00:00Z", mtime=1706176800, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                typed_lib0_inputs=True, quirks=["as 0.13", "module named kws"]),
        Release("tvm-0.13-usmp", "0.13", 7, float_mlp(seed=9),
                export_datetime="2023-07-28 11:00:00Z", mtime=1690542000, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                typed_lib0_inputs=True, usmp=True,
                target="c -keys=cpu -link-params=0 -workspace-byte-alignment=16",
                quirks=["USMP internal pool global_workspace in lib0.c", "workspace 0"]),
        Release("tvm-0.13-cortex-m", "0.13", 7, int8_dense(seed=10, k=8),
                export_datetime="2023-07-28 12:00:00Z", mtime=1690545600, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                typed_lib0_inputs=True, cortex_m=True,
                target="c -keys=arm_cpu,cpu -device=arm_cpu -link-params=0 -mcpu=cortex-m7 "
                       "-model=stm32f746xx",
                quirks=["-mcpu=cortex-m7", "<arm_acle.h>, __smlad/__sxtb16: Arm only"]),
        Release("world-2021-keras-dense", "0.9.dev", 5, sine_mlp(),
                export_datetime="2021-12-14 16:30:04Z", mtime=1639499404.7125788,
                target="c -keys=cpu -link-params=0 -march=armv7e-m -mcpu=cortex-m7 "
                       "-model=stm32f746xx -system-lib=0",
                main_suffix="run_model", output_tensor_names_attr=False, typed_relay=False,
                workspace_brief_space=False, layout="single-lib0", param_file_names=["p0", "p1", "p4", "p2", "p3", "p5"],
                op_names=["fused_reshape_1", "fused_reshape", "fused_nn_dense_add_nn_relu",
                          "fused_nn_dense_add_nn_relu_1", "fused_nn_dense_add"],
                op_workspaces={"fused_nn_dense_add_nn_relu": 96,
                               "fused_nn_dense_add_nn_relu_1": 1056, "fused_nn_dense_add": 80},
                modes=(0o700, 0o775, 0o664),
                world="gromero/sine_aot model.tar (TVM main of 2021-12-14, MLF 5): the microTVM "
                      "tutorials' sine model for a Cortex-M7; metadata.json without "
                      "inputs/outputs, io_size_bytes 8; header outputs { void* output; }, no size "
                      "macros; one C file, default_lib0.c, with the weights (__tvm_param__pN, "
                      "passed to the operators), the operators and tvmgen_default_run_model(void* "
                      "input, void* output), and no tvmgen_default_run defined although the "
                      "header declares it; params named p0, p1, p4, p2, p3, p5; src/relay.txt "
                      "untyped, without '->' and without '#[version]'",
                quirks=["v5", "no per-tensor metadata", "untyped Relay without '->'",
                        "single lib0.c, flat run_model only", "operator workspace",
                        "lowered param names", "tar modes 700/775/664"]),
        Release("world-2023-cortex-m7-int8", "0.13", 7, int8_sigmoid_mlp(),
                export_datetime="2023-09-22 17:08:00Z", mtime=1695395280, runtime_dir=True,
                templates_dir=True, header_size_macros=True, meta_tensors="named", spans=True,
                cortex_m=True, typed_relay=False, version_spec="0.13.dev0", constants_size=0,
                io_extra=64, param_file_names=[], samples=True,
                target="c -keys=arm_cpu,cpu -march=armv7e-m -mcpu=cortex-m7 -model=stm32f746xx",
                op_names=[
                    "fused_nn_dense_subtract_add_fixed_point_multiply_add_clip_subtract_cast_"
                    "multiply_db845967e9aad69d_",
                    "fused_nn_dense_subtract_add_fixed_point_multiply_add_clip_subtract_cast_"
                    "multiply_db845967e9aad69d__2",
                    "fused_reshape",
                    "fused_nn_dense_subtract_add_fixed_point_multiply_add_clip_subtract_cast_"
                    "multiply_db845967e9aad69d__1"],
                world="patschmidt2/letscope_demo_stm model.tar (TVM 0.13.dev0, 2023-09-22, MLF "
                      "7): int8 for a Cortex-M7 with TVM's DSP micro-kernels (<arm_acle.h>, "
                      "inline-asm __pkhbt/__pkhtb on one line, __smlad), the producer's runtime/ "
                      "and templates/; output StatefulPartitionedCall_0 recorded as {dtype int8, "
                      "size 1}, no shape; io_size_bytes larger than the tensors; an empty params "
                      "file; default.relay with spans and output_tensor_names, untyped, three "
                      "dense layers each followed by dequantize/sigmoid/quantize, ending in "
                      "qnn.quantize(%19, ...) after qnn.dense(units=1); samples/dummy_input.h and "
                      "samples/expected_output.h appended (no ./, no owner name, mtime 0)",
                quirks=["output without shape", "untyped Relay with spans", "void* lib0",
                        "TVM DSP gemm micro-kernels", "io_size_bytes != tensors",
                        "samples/ .h pair"]),
    ]
    return {r.key: r for r in rel}


#: Every archive key of the corpus, oldest release first.
CORPUS: list[str] = list(_releases())


@dataclass
class CorpusArchive:
    key: str
    release: Release
    path: Path
    files: dict[str, bytes]

    @property
    def model(self) -> Model:
        return self.release.model


def build_archive(key: str, dest_dir: Path) -> CorpusArchive:
    """Write the corpus archive ``key`` as ``dest_dir/<key>.tar``."""
    release = _releases()[key]
    files = archive_files(release)
    path = Path(dest_dir) / f"{key}.tar"
    _write_tar(path, files, release)
    return CorpusArchive(key, release, path, files)


def build_corpus(dest_dir: Path) -> list[CorpusArchive]:
    return [build_archive(k, dest_dir) for k in CORPUS]


# --- archive contents --------------------------------------------------------------------------


def archive_files(r: Release) -> dict[str, bytes]:
    """{path inside the archive: bytes}; the standalone-CRT stand-ins are added by _write_tar."""
    mod = r.mod
    files: dict[str, bytes] = {}
    files["metadata.json"] = json.dumps(_metadata(r), indent=2, sort_keys=True).encode()
    for name, text in _c_sources(r).items():
        files[f"codegen/host/src/{name}"] = text.encode()
    files[f"codegen/host/include/tvmgen_{mod}.h"] = _header(r).encode()
    files[f"parameters/{mod}.params"] = save_param_dict(_file_params(r))
    relay_path = "src/relay.txt" if r.mlf_version < 7 else f"src/{mod}.relay"
    files[relay_path] = _relay_text(r).encode()
    return files


def _file_params(r: Release) -> dict[str, np.ndarray]:
    """The params file's arrays: the frontend's names (_param_1, ...), or the lowered names a
    build kept (p0, ... in the file's order; p<i> is the i-th weight of @main)."""
    if r.param_file_names is None:
        return dict(r.model.params)
    weights = list(r.model.params.values())
    return {n: weights[int(n[1:])] for n in r.param_file_names}


def _output_names(r: Release) -> list[str]:
    """Output names of the C interface (aot_executor_codegen.cc: output_tensor_names if set)."""
    if r.output_tensor_names_attr:
        return list(r.model.output_tensor_names)
    n = len(r.model.outputs)
    return ["output"] if n == 1 else [f"output{i}" for i in range(n)]


def _workspace_bytes(r: Release) -> int:
    """main's own buffers plus the largest operator's (mlf.py _build_function_memory_map)."""
    if r.usmp:
        return 0
    largest = max(r.op_workspaces.values(), default=r.model.op_workspace)
    return sum(_align16(n) for n in _intermediates(r.model).values()) + largest


def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


def _intermediates(m: Model) -> dict[str, int]:
    if m.kind == "float_mlp":
        return {"sid_1": 16}
    if m.kind == "int8_dense":
        return {"sid_1": 16}  # the int32 accumulators
    if m.kind == "sine_mlp":
        return {"sid_6": 64, "sid_5": 64}
    if m.kind == "int8_sigmoid_mlp":
        return {"sid_1": 16, "sid_2": 16}  # int8 activations, ping-pong
    return {}


def _operator_functions(r: Release) -> list[str]:
    mod = r.mod
    if r.model.kind == "float_mlp":
        names = ["fused_nn_dense_add_nn_relu", "fused_nn_dense_add"]
    elif r.model.kind == "int8_dense":
        names = ["fused_nn_contrib_dense_pack_add", "fused_qnn_requantize"]
    elif r.model.kind == "sine_mlp":
        names = ["fused_reshape", "fused_nn_dense_add_nn_relu", "fused_reshape_1",
                 "fused_nn_dense_add_nn_relu_1", "fused_nn_dense_add"]
    elif r.model.kind == "int8_sigmoid_mlp":  # reshape, then the three dense+logistic layers
        layer = ("fused_nn_dense_subtract_add_fixed_point_multiply_add_clip_subtract_cast_"
                 "multiply_db845967e9aad69d_")
        names = ["fused_reshape", layer, f"{layer}_1", f"{layer}_2"]
    else:
        names = ["fused_multiply_add_nn_relu", "fused_subtract"]
    return [f"tvmgen_{mod}_{n}" for n in names]


def _metadata(r: Release) -> dict:
    m = r.model
    io_size = sum(t.size for t in m.inputs + m.outputs) + r.io_extra
    constants = (sum(a.nbytes for a in m.params.values()) if r.constants_size is None
                 else r.constants_size)
    main: dict = {"constants_size_bytes": constants, "device": 1, "io_size_bytes": io_size,
                  "workspace_size_bytes": _workspace_bytes(r)}
    if r.meta_tensors:
        main["inputs"] = {t.name: {"dtype": t.dtype, "size": t.size} for t in m.inputs}
        if r.meta_tensors == "output-names":
            names = ["output"] if len(m.outputs) == 1 else [
                f"output{i}" for i in range(len(m.outputs))]
        else:
            names = m.output_tensor_names
        main["outputs"] = {n: {"dtype": t.dtype, "size": t.size}
                           for n, t in zip(names, m.outputs, strict=True)}
    memory = {"functions": {
        "main": [main],
        "operator_functions": [
            {"function_name": f, "workspace": [{"device": 1, "workspace_size_bytes":
                                                _op_workspace(r, f)}]}
            for f in ([f"tvmgen_{r.mod}_{n}" for n in r.op_names] if r.op_names
                      else _operator_functions(r))],
    }}
    entry: dict = {"executors": ["aot"], "export_datetime": r.export_datetime, "memory": memory,
                   "model_name": r.mod, "style": "full-model"}
    crt_dep = [{"short_name": "tvm_standalone_crt", "url": "./runtime", "url_type": "mlf_path",
                "version_spec": _version_spec(r)}]
    if r.mlf_version == 5:
        return {**entry, "target": {"1": r.target}, "version": 5}
    if r.mlf_version == 6:
        return {**entry, "external_dependencies": crt_dep, "target": [r.target], "version": 6}
    entry["target"] = [r.target]
    if r.runtime_dir:
        entry["external_dependencies"] = crt_dep
    return {"modules": {r.mod: entry}, "version": 7}


def _version_spec(r: Release) -> str:
    if r.version_spec:
        return r.version_spec
    return {"v6-nightly": "0.9.dev1074+gd1467777c"}.get(r.tvm, f"{r.tvm}.0")


def _op_workspace(r: Release, function: str) -> int:
    short = function[len(f"tvmgen_{r.mod}_"):]
    if r.op_workspaces:
        return r.op_workspaces.get(short, 0)
    return r.model.op_workspace if short.endswith("_relu_1") else 0


# --- interface header (src/target/source/interface_c.cc) ---------------------------------------


def _brief(mod: str, description: str) -> str:
    return f'/*!\n * \\brief {description} for TVM module "{mod}" \n */\n'


def _header(r: Release) -> str:
    m, mod = r.model, r.mod
    guard = f"TVMGEN_{mod.upper()}_H"
    up = f"TVMGEN_{mod.upper()}"
    out = [f"#ifndef {guard}_\n#define {guard}_\n#include <stdint.h>\n\n"
           '#ifdef __cplusplus\nextern "C" {\n#endif\n\n']
    if r.header_size_macros:
        for t in m.inputs:
            out.append(_brief(mod, f"Input tensor {t.c_name} size (in bytes)"))
            out.append(f"#define {up}_{t.c_name.upper()}_SIZE {t.size}\n")
        for n, t in zip(_output_names(r), m.outputs, strict=True):
            out.append(_brief(mod, f"Output tensor {n} size (in bytes)"))
            out.append(f"#define {up}_{n.upper()}_SIZE {t.size}\n")
    out.append(_brief(mod, "Input tensor pointers"))
    out.append(f"struct tvmgen_{mod}_inputs {{\n"
               + "".join(f"  void* {t.c_name};\n" for t in m.inputs) + "};\n\n")
    out.append(_brief(mod, "Output tensor pointers"))
    out.append(f"struct tvmgen_{mod}_outputs {{\n"
               + "".join(f"  void* {n};\n" for n in _output_names(r)) + "};\n\n")
    out.append(f'/*!\n * \\brief entrypoint function for TVM module "{mod}"\n'
               " * \\param inputs Input tensors for the module \n"
               " * \\param outputs Output tensors for the module \n */\n"
               f"int32_t tvmgen_{mod}_run(\n  struct tvmgen_{mod}_inputs* inputs,\n"
               f"  struct tvmgen_{mod}_outputs* outputs\n);\n")
    if r.header_workspace_macro:
        # Until 2022 EmitWorkspaceSize wrote its own brief, without EmitBrief's space.
        out.append(_brief(mod, "Workspace size") if r.workspace_brief_space
                   else f'/*!\n * \\brief Workspace size for TVM module "{mod}"\n */\n')
        out.append(f"#define {up}_WORKSPACE_SIZE {_workspace_bytes(r)}\n")
    out.append(f"\n#ifdef __cplusplus\n}}\n#endif\n\n#endif // {guard}_\n")
    return "".join(out)


# --- Relay text (str(ir_mod) of a TFLite import, before the params are bound) ------------------


def _relay_text(r: Release) -> str:
    """``str(ir_mod)``: typed (``ty=`` after each expression and ``-> T``) once TVM's type
    inference has run on the module; a frontend's fresh module (``typed_relay`` False) has no
    types, only the spans of 0.12+ (PrintOptionalInfo prints ``/* span=... */`` alone)."""
    m = r.model

    def note(ty: str, span: str | None = None) -> str:
        if not r.typed_relay:
            return f" /* span={span}:0:0 */" if r.spans and span else ""
        if r.spans and span:
            return f" /* ty={ty} span={span}:0:0 */"
        return f" /* ty={ty} */"

    params = []
    for t in m.inputs:
        params.append(f"%{t.name}: {t.relay()}{note(t.relay(), t.name) if r.spans else ''}")
    for name, arr in m.params.items():
        ty = f"Tensor[({', '.join(map(str, arr.shape))}), {arr.dtype}]"
        if r.typed_relay:
            params.append(f"%v{name}: {ty}" + (f" /* ty={ty} */" if r.spans else ""))
        else:
            params.append(f"%v{name}: {ty}" + note(ty, _weight_span(m, name)))
    if r.output_tensor_names_attr:
        params.append("output_tensor_names=[" + ", ".join(
            f'"{n}"' for n in m.output_tensor_names) + "]")
    if len(m.outputs) == 1:
        ret = m.outputs[0].relay()
    else:
        ret = "(" + ", ".join(t.relay() for t in m.outputs) + ")"
    x = f"%{m.inputs[0].name}"
    out_span = m.outputs[0].name
    if m.kind in ("sine_mlp", "int8_sigmoid_mlp"):
        body = _world_body(m, x, note)
    elif m.kind == "float_mlp":
        body = [
            f"  %0 = reshape({x}, newshape=[-1, 8]){note('Tensor[(1, 8), float32]', 'model/flatten/Reshape')};",
            f"  %1 = nn.dense(%0, %v_param_1, units=4){note('Tensor[(1, 4), float32]', 'model/dense/MatMul')};",
            f"  %2 = nn.bias_add(%1, %v_param_2){note('Tensor[(1, 4), float32]', 'model/dense/BiasAdd')};",
            f"  %3 = nn.relu(%2){note('Tensor[(1, 4), float32]', 'model/dense/Relu')};",
            f"  %4 = nn.dense(%3, %v_param_3, units=3){note('Tensor[(1, 3), float32]', 'model/dense_1/MatMul')};",
            f"  nn.bias_add(%4, %v_param_4){note('Tensor[(1, 3), float32]', out_span)}",
        ]
    elif m.kind == "int8_dense":
        q, k = m.quant, m.inputs[0].shape[1]
        body = [
            f"  %0 = reshape({x}, newshape=[-1, {k}]){note(f'Tensor[(1, {k}), int8]', 'model/flatten/Reshape')};",
            f"  %1 = qnn.dense(%0, %v_param_1, {q['in_zp']}{note('int32')}, 0{note('int32')}, "
            f"0.5f{note('float32')}, meta[relay.Constant][0]{note('Tensor[(4), float32]')}, "
            f"units=4, out_dtype=\"int32\"){note('Tensor[(1, 4), int32]', 'model/dense/MatMul')};",
            f"  %2 = nn.bias_add(%1, %v_param_2){note('Tensor[(1, 4), int32]', 'model/dense/BiasAdd')};",
            f"  qnn.requantize(%2, meta[relay.Constant][1]{note('Tensor[(4), float32]')}, "
            f"0{note('int32')}, 0.25f{note('float32')}, {q['out_zp']}{note('int32')}, axis=1, "
            f"out_dtype=\"int8\"){note('Tensor[(1, 4), int8]', out_span)}",
        ]
    else:
        y, x2 = f"%{m.inputs[0].name}", f"%{m.inputs[1].name}"
        body = [
            f"  %0 = multiply({x2}, %v_param_1){note('Tensor[(1, 4), float32]', 'model/mul')};",
            f"  %1 = add(%0, {y}){note('Tensor[(1, 4), float32]', 'model/add')};",
            f"  %2 = nn.relu(%1){note('Tensor[(1, 4), float32]', 'Identity:0')};",
            f"  %3 = subtract({x2}, {y}){note('Tensor[(1, 4), float32]', 'Identity_1:0')};",
            f"  (%2, %3){note('(Tensor[(1, 4), float32], Tensor[(1, 4), float32])')}",
        ]
    # str(ir_mod) as model_library_format.py writes it: no #[version] line and no metadata
    # section or its note (published archives of 0.9.dev, 0.11.dev and 0.13.dev agree).
    arrow = f" -> {ret}" if r.typed_relay else ""
    return f"def @main({', '.join(params)}){arrow} {{\n" + "\n".join(body) + "\n}\n"


def _f(value: float) -> str:
    """A float32 scalar or double attribute as the printer writes it: C++ ``ostream <<`` (six
    significant digits, %g style) and ``f``."""
    return f"{float(np.float32(value)):g}f"


def _weight_span(m: Model, name: str) -> str:
    """The TFLite tensor a weight came from (ExprTable.new_const's source_name, 0.12+; the
    published archive names each bias after the next layer)."""
    k = int(name.rsplit("_", 1)[1]) - 1
    layer = "dense" if k < 2 else f"dense_{k // 2}"
    if k % 2 == 0:
        return f"model/{layer}/MatMul"
    return f"model/dense_{k // 2 + 1}/BiasAdd/ReadVariableOp"


def _world_body(m: Model, x: str, note) -> list[str]:
    """The statements of @main for the two published archives, as the TFLite frontend builds
    them (convert_fully_connected: reshape, dense, bias_add[, requantize, clip]; convert_logistic:
    dequantize, sigmoid, quantize) and the printer prints them (one temporary per call, the
    last call inline)."""
    lines: list[str] = []
    if m.kind == "sine_mlp":
        prev = x
        widths = [(1, 16), (16, 16), (16, 1)]
        for k, (kin, units) in enumerate(widths):
            n = len(lines)
            lines.append(f"  %{n} = reshape({prev}, newshape=[-1, {kin}]){note('', None)};")
            lines.append(f"  %{n + 1} = nn.dense(%{n}, %v_param_{2 * k + 1}, units={units})"
                         f"{note('', None)};")
            bias = f"nn.bias_add(%{n + 1}, %v_param_{2 * k + 2}){note('', None)}"
            if k < len(widths) - 1:
                lines.append(f"  %{n + 2} = {bias};")
                lines.append(f"  %{n + 3} = nn.relu(%{n + 2}){note('', None)};")
                prev = f"%{n + 3}"
            else:
                lines.append(f"  {bias}")
        return lines
    prev = x
    scales = _layer_scales(m)
    last = len(m.layers) - 1
    for k, q in enumerate(m.layers):
        layer = "dense" if k == 0 else f"dense_{k}"
        c = note("", f"model/{layer}/MatMul;model/{layer}/BiasAdd")
        sig = note("", "StatefulPartitionedCall:0" if k == last else f"model/{layer}/Sigmoid")
        w = m.params[f"_param_{2 * k + 1}"]
        s_in, s_w, s_out = scales[k]
        n = len(lines)
        lines.append(f"  %{n} = reshape({prev}, newshape=[-1, {w.shape[1]}]){c};")
        lines.append(f"  %{n + 1} = qnn.dense(%{n}, %v_param_{2 * k + 1}, {q['in_zp']}{c}, 0{c}, "
                     f"{_f(s_in)}{c}, {_f(s_w)}{c}, units={w.shape[0]}, out_dtype=\"int32\"){c};")
        lines.append(f"  %{n + 2} = nn.bias_add(%{n + 1}, %v_param_{2 * k + 2}){c};")
        lines.append(f"  %{n + 3} = qnn.requantize(%{n + 2}, {_f(s_in * s_w)}{c}, 0{c}, "
                     f"{_f(s_out)}{c}, {q['rq_zp']}{c}, rounding=\"UPWARD\", "
                     f"compute_dtype=\"int64\", out_dtype=\"int8\"){c};")
        lines.append(f"  %{n + 4} = qnn.dequantize(%{n + 3}, {_f(s_out)}{sig}, {q['rq_zp']}{sig})"
                     f"{sig};")
        lines.append(f"  %{n + 5} = sigmoid(%{n + 4}){sig};")
        quantize = (f"qnn.quantize(%{n + 5}, 0.00390625f{sig}, -128{sig}, "
                    f"out_dtype=\"int8\"){sig}")
        if k < last:
            lines.append(f"  %{n + 6} = {quantize};")
            prev = f"%{n + 6}"
        else:
            lines.append(f"  {quantize}")
    return lines


# --- params (src/relay/backend/param_dict / runtime NDArray::Save; spec §3.6) ------------------

_DL_CODES = {"i": 0, "u": 1, "f": 2}


def save_param_dict(params: dict[str, np.ndarray]) -> bytes:
    out = [struct.pack("<QQ", 0xF7E58D4F05049CB7, 0), struct.pack("<Q", len(params))]
    for name in params:
        raw = name.encode()
        out.append(struct.pack("<Q", len(raw)) + raw)
    out.append(struct.pack("<Q", len(params)))
    for arr in params.values():
        arr = np.ascontiguousarray(arr)
        out.append(struct.pack("<QQ", 0xDD5E40F096B4A13F, 0))
        out.append(struct.pack("<ii", 1, 0))
        out.append(struct.pack("<i", arr.ndim))
        out.append(struct.pack("<BBH", _DL_CODES[arr.dtype.kind], arr.dtype.itemsize * 8, 1))
        out.append(struct.pack(f"<{arr.ndim}q", *arr.shape))
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        out.append(struct.pack("<q", len(data)) + data)
    return b"".join(out)


# --- generated C -------------------------------------------------------------------------------


def _c_float(v: float) -> str:
    """A float32 as TVM's NDArrayDataToC prints it: hexadecimal, no trailing zeros."""
    h = float(np.float32(v)).hex()
    if h in ("0x0.0p+0", "-0x0.0p+0"):
        return h.replace("0x0.0p+0", "0x0p+0")
    mant, exp = h.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def _c_int(v: int, width: int) -> str:
    digits = width // 4
    return f"{'-' if v < 0 else '+'}0x{abs(int(v)):0{digits}x}"


def _const_array(name: str, arr: np.ndarray) -> str:
    ctype = {"float32": "float", "int8": "int8_t", "int32": "int32_t"}[str(arr.dtype)]
    flat = arr.reshape(-1)
    if arr.dtype == np.float32:
        items = [_c_float(v) for v in flat]
    else:
        items = [_c_int(v, arr.dtype.itemsize * 8) for v in flat]
    rows = [", ".join(items[i : i + 8]) for i in range(0, len(items), 8)]
    body = ", \n    ".join(rows)
    return ('#ifdef __cplusplus\nextern "C" {\n#endif\n'
            f'static const {ctype} __attribute__((section(".rodata.tvm"), aligned(16))) '
            f"{name}[{flat.size}] = {{\n    {body}\n}};\n"
            '#ifdef __cplusplus\n}  // extern "C"\n#endif\n\n')


def _fn(signature: str, body: str) -> str:
    return f'#ifdef __cplusplus\nextern "C"\n#endif\nTVM_DLL int32_t {signature} {{\n{body}  return 0;\n}}\n\n'


def _c_sources(r: Release) -> dict[str, str]:
    if r.layout == "single-lib0":
        return {f"{r.mod}_lib0.c": _single_lib0(r)}
    return {f"{r.mod}_lib0.c": _lib0(r), f"{r.mod}_lib1.c": _lib1(r)}


def _single_lib0(r: Release) -> str:
    """A late-2021 build's only C file: the weights as ``__tvm_param__p<i>`` arrays, the
    operators taking them as arguments, ``<mod>_run_model(void* input, void* output)`` calling
    them; nothing defines the header's struct entry point."""
    m, mod = r.model, r.mod
    head = (f"// tvm target: {r.target}\n#define TVM_EXPORTS\n"
            '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
            "#include <math.h>\n\n")
    weights = list(m.params.values())
    consts = "".join(_const_array(f"__tvm_param__p{int(n[1:])}", weights[int(n[1:])])
                     for n in ["p1", "p0", "p4", "p2", "p3", "p5"])
    f = {n: f"tvmgen_{mod}_{n}" for n in r.op_names or []}
    ops = (
        _fn(f"{f['fused_nn_dense_add']}(float* placeholder, float* placeholder1, "
            "float* placeholder2, float* T_add)",
            "  float compute_global = 0.000000e+00f;\n"
            "  for (int32_t k_outer = 0; k_outer < 16; ++k_outer) {\n"
            "    compute_global = (compute_global + (placeholder[(k_outer)] * "
            "placeholder1[(k_outer)]));\n"
            "  }\n"
            "  T_add[(0)] = (compute_global + placeholder2[(0)]);\n")
        + _fn(f"{f['fused_reshape_1']}(float* placeholder, float* T_reshape)",
              "  for (int32_t ax1_inner = 0; ax1_inner < 16; ++ax1_inner) {\n"
              "    T_reshape[(ax1_inner)] = placeholder[(ax1_inner)];\n"
              "  }\n")
        + _fn(f"{f['fused_nn_dense_add_nn_relu_1']}(float* placeholder, float* placeholder1, "
              "float* placeholder2, float* T_relu)",
              "  void* packed_weight = TVMBackendAllocWorkspace(1, 0, (uint64_t)1024, 2, 32);\n"
              "  if (packed_weight == NULL) {\n    return -1;\n  }\n"
              "  for (int32_t k = 0; k < 16; ++k) {\n"
              "    for (int32_t j = 0; j < 16; ++j) {\n"
              "      ((float*)packed_weight)[((k * 16) + j)] = placeholder1[((j * 16) + k)];\n"
              "    }\n"
              "  }\n"
              "  for (int32_t ax1 = 0; ax1 < 16; ++ax1) {\n"
              "    float compute_global = 0.000000e+00f;\n"
              "    for (int32_t k_outer = 0; k_outer < 16; ++k_outer) {\n"
              "      compute_global = (compute_global + (placeholder[(k_outer)] * "
              "((float*)packed_weight)[((k_outer * 16) + ax1)]));\n"
              "    }\n"
              "    float _1 = compute_global + placeholder2[(ax1)];\n"
              "    T_relu[(ax1)] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
              "  }\n"
              "  if (TVMBackendFreeWorkspace(1, 0, packed_weight) != 0) {\n    return -1;\n  }\n")
        + _fn(f"{f['fused_nn_dense_add_nn_relu']}(float* placeholder, float* placeholder1, "
              "float* placeholder2, float* T_relu)",
              "  for (int32_t ax1 = 0; ax1 < 16; ++ax1) {\n"
              "    float _1 = (placeholder[(0)] * placeholder1[(ax1)]) + placeholder2[(ax1)];\n"
              "    T_relu[(ax1)] = ((_1) > (0.000000e+00f) ? (_1) : (0.000000e+00f));\n"
              "  }\n")
        + _fn(f"{f['fused_reshape']}(float* placeholder, float* T_reshape)",
              "  T_reshape[(0)] = placeholder[(0)];\n"))
    body = ("  void* sid_6 = TVMBackendAllocWorkspace(1, 0, (uint64_t)64, 0, 8);\n"
            "  if (sid_6 == NULL) {\n    return -1;\n  }\n"
            "  void* sid_5 = TVMBackendAllocWorkspace(1, 0, (uint64_t)64, 0, 8);\n"
            "  if (sid_5 == NULL) {\n    return -1;\n  }\n"
            f"  (void){f['fused_reshape']}(input, sid_6);\n"
            f"  (void){f['fused_nn_dense_add_nn_relu']}(sid_6, __tvm_param__p0, __tvm_param__p1, sid_5);\n"
            f"  (void){f['fused_reshape_1']}(sid_5, sid_6);\n"
            f"  (void){f['fused_nn_dense_add_nn_relu_1']}(sid_6, __tvm_param__p2, __tvm_param__p3, sid_5);\n"
            f"  (void){f['fused_reshape_1']}(sid_5, sid_6);\n"
            f"  (void){f['fused_nn_dense_add']}(sid_6, __tvm_param__p4, __tvm_param__p5, output);\n"
            "  if (TVMBackendFreeWorkspace(1, 0, sid_5) != 0) {\n    return -1;\n  }\n"
            "  if (TVMBackendFreeWorkspace(1, 0, sid_6) != 0) {\n    return -1;\n  }\n")
    main = _fn(f"{_main_name(r)}(void* input, void* output)", body)
    return head + consts + ops + main


def _main_name(r: Release) -> str:
    if r.main_suffix:
        return f"tvmgen_{r.mod}_{r.main_suffix}"
    return f"tvmgen_{r.mod}_run_model" if r.flat_run_model else f"tvmgen_{r.mod}___tvm_main__"


def _ctype(dtype: str) -> str:
    return {"float32": "float", "int8": "int8_t"}[dtype]


def _lib0(r: Release) -> str:
    m, mod = r.model, r.mod
    main = _main_name(r)
    out = ['#include "tvm/runtime/c_runtime_api.h"\n#ifdef __cplusplus\nextern "C" {\n#endif\n']
    n_in, n_out = len(m.inputs), len(m.outputs)
    if r.flat_run_model:
        # 0.8, unpacked API with the packed interface: no struct entry point at all.
        args = ",".join(f"void* arg{i}" for i in range(n_in + n_out))
        out.append(f"TVM_DLL int32_t {main}({args});\n")
        out.append(f"int32_t tvmgen_{mod}_run(void* args, void* type_code, int num_args, "
                   "void* out_value, void* out_type_code, void* resource_handle) {\n")
        call = ",".join(f"((DLTensor*)(((TVMValue*)args)[{i}].v_handle))[0].data"
                        for i in range(n_in + n_out))
        out.append(f"return {main}({call});\n}}\n")
    elif r.main_suffix == "run_model":
        # Dec 2021 (GenerateCInterfaceEntrypoint, source_module.cc): the struct entry point
        # calls run_model(void* arg0, ...), a single output is outputs->output; no ';' after.
        args = ",".join(f"void* arg{i}" for i in range(n_in + n_out))
        call = [f"inputs->{t.c_name}" for t in m.inputs] + [
            f"outputs->{n}" for n in _output_names(r)]
        out.append(f"#include <tvmgen_{mod}.h>\nTVM_DLL int32_t {main}({args});\n"
                   f"int32_t tvmgen_{mod}_run(struct tvmgen_{mod}_inputs* inputs,struct "
                   f"tvmgen_{mod}_outputs* outputs) {{return {main}({','.join(call)});\n}}\n"
                   "#ifdef __cplusplus\n}\n#endif\n")
        return "".join(out)
    else:
        if r.usmp:
            out.append('__attribute__((section(".bss.noinit.tvm"), aligned(16)))\n'
                       f"static uint8_t global_workspace[{_usmp_pool_bytes(m)}];\n")
        out.append(f"#include <tvmgen_{mod}.h>\n")
        if r.typed_lib0_inputs:
            ins = [f"{_ctype(t.dtype)}* {t.c_name}" for t in m.inputs]
        else:
            ins = [f"void* {t.c_name}" for t in m.inputs]
        params = ins + [f"void* output{i}" for i in range(n_out)]
        if r.usmp:
            params.append("uint8_t* global_workspace_0_var")
        out.append(f"TVM_DLL int32_t {main}({','.join(params)});\n")
        call = [f"inputs->{t.c_name}" for t in m.inputs] + [
            f"outputs->{n}" for n in _output_names(r)]
        if r.usmp:
            call.append("&global_workspace")
        out.append(f"int32_t tvmgen_{mod}_run(struct tvmgen_{mod}_inputs* inputs,"
                   f"struct tvmgen_{mod}_outputs* outputs) {{return {main}({','.join(call)});\n}}\n")
    out.append("#ifdef __cplusplus\n}\n#endif\n;")
    return "".join(out)


def _usmp_pool_bytes(m: Model) -> int:
    return sum(_align16(n) for n in _intermediates(m).values())


def _lib1(r: Release) -> str:
    m = r.model
    head = (f"// tvm target: {r.target}\n#define TVM_EXPORTS\n"
            '#include "tvm/runtime/c_runtime_api.h"\n#include "tvm/runtime/c_backend_api.h"\n'
            "#include <math.h>\n")
    if r.cortex_m:
        head += _DSP_COMMON
    if m.kind == "int8_sigmoid_mlp":
        head = head.replace("#include <math.h>\n", "#include <math.h>\n#include <stdbool.h>\n")
        head += _DSP_READ_AND_PAD + "".join(
            _gemm(1, w.shape[1], w.shape[0], uid) for w, uid in zip(
                [m.params[f"_param_{2 * k + 1}"] for k in range(len(m.layers))], _GEMM_IDS,
                strict=False))
        consts = ""
        for k, q in enumerate(m.layers):
            w = m.params[f"_param_{2 * k + 1}"]
            b = m.params[f"_param_{2 * k + 2}"].astype(np.int64)
            # qnn.dense canonicalized: the input zero point's term folds into the bias.
            folded = (b - q["in_zp"] * w.astype(np.int64).sum(axis=1)).astype(np.int32)
            consts += _const_array(f"fused_constant_{2 * k}", w)
            consts += _const_array(f"fused_constant_{2 * k + 1}", folded)
    else:
        consts = "".join(_const_array(f"fused_constant_{i}", arr)
                         for i, arr in enumerate(m.params.values()))
    ops = _operators(r)
    return head + consts + ops + _main(r)


#: What TVM's Cortex-M DSP schedules put before their micro-kernels (python/tvm/topi/arm_cpu/
#: mprofile/dsp/micro_kernel/common.py, ``common_includes``, 0.9-0.15): the compiler's
#: <arm_acle.h>, then __ror and the PKHBT/PKHTB instructions defined by the file itself unless
#: ARM_CPU_INTRINSICS_EXIST (GCC's <arm_acle.h> has neither) -- as inline assembly, so this C
#: builds only for Arm. The macros arrive on one line each (as in a published 0.13 archive: the
#: kernel source passes through TIR, which drops the line continuations). Written here in our
#: words, with TVM's names.
_DSP_COMMON = """
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <arm_acle.h>

#include <tvm/runtime/crt/error_codes.h>


#ifndef ARM_CPU_INTRINSICS_EXIST
#define ARM_CPU_INTRINSICS_EXIST
__attribute__((always_inline)) uint32_t __ror(uint32_t op1, uint32_t op2)
{
  op2 %= 32U;
  return op2 == 0U ? op1 : ((op1 >> op2) | (op1 << (32U - op2)));
}

#define __pkhbt(ARG1,ARG2,ARG3) __extension__ ({ uint32_t __RES, __ARG1 = (ARG1), __ARG2 = (ARG2); __asm("pkhbt %0, %1, %2, lsl %3" : "=r" (__RES) : "r" (__ARG1), "r" (__ARG2), "I" (ARG3)); __RES; })

#define __pkhtb(ARG1,ARG2,ARG3) __extension__ ({ uint32_t __RES, __ARG1 = (ARG1), __ARG2 = (ARG2); if (ARG3 == 0) __asm("pkhtb %0, %1, %2" : "=r" (__RES) : "r" (__ARG1), "r" (__ARG2)); else __asm("pkhtb %0, %1, %2, asr %3" : "=r" (__RES) : "r" (__ARG1), "r" (__ARG2), "I" (ARG3)); __RES; })
#endif
"""

#: gemm.py's helper: four int8 of ``source`` as two words of two int16 each (bytes 0 and 2,
#: then 1 and 3 swapped back into order by PKHBT/PKHTB), for SMLAD.
_DSP_READ_AND_PAD = """
#ifndef ARM_CPU_MPROFILE_READ_AND_PAD_EXISTS
#define ARM_CPU_MPROFILE_READ_AND_PAD_EXISTS
__attribute__((always_inline)) static inline const int8_t *read_and_pad(const int8_t *source, int32_t *out1, int32_t *out2)
{
    int32_t inA;
    memcpy(&inA, source, 4);
    source += 4;

    int32_t inAbuf1 = __sxtb16(__ror((uint32_t)inA, 8));
    int32_t inAbuf2 = __sxtb16(inA);
    *out2 = (int32_t)(__pkhtb(inAbuf1, inAbuf2, 16));
    *out1 = (int32_t)(__pkhbt(inAbuf2, inAbuf1, 16));

    return source;
}
#endif
"""

#: The intrinsic's random 8-letter ids (gemm.py ``uniq_id``), fixed here.
_GEMM_IDS = ["PXQZDLMV", "KJWRTBNA", "YHCEFGOS", "LQMAZRTX"]


def _gemm(mm: int, kk: int, nn: int, uid: str) -> str:
    """``gemm_{M}x{K}x{N}_body_{id}``: C = A * B^T, int8 in, int32 out, SMLAD over the padded
    int16 pairs; M < 2 and N < 2 take a plain loop; a K not divisible by 4 ends in a loop."""
    name = f"gemm_{mm}x{kk}x{nn}"
    rest = ("" if kk % 4 == 0 else
            f"  for (int i = 0; i < {mm}; i++)\n"
            f"    for (int j = 0; j < {nn}; j++)\n"
            f"      for (int l = {kk // 4 * 4}; l < {kk}; l++)\n"
            "        cc[i*C_stride + j] += (int32_t) aa[i*A_stride + l] * (int32_t) bb[j*B_stride + l];\n")
    return f"""

#ifdef __cplusplus
extern "C"
#endif
__attribute__((always_inline)) static inline int32_t {name}_body_loop_{uid}(
    int8_t *aa, int8_t *bb, int32_t *cc,
    int A_stride, int B_stride, int C_stride) {{
  for (int i = 0; i < {mm}; i++) {{
    for (int j = 0; j < {nn}; j++) {{
      int32_t sum = 0;
      for (int l = 0; l < {kk}; l++) {{
        sum += (int32_t) aa[i*A_stride + l] * (int32_t) bb[j*B_stride + l];
      }}
      cc[i*C_stride + j] = sum;
    }}
  }}
  return 0;
}}

#ifdef __cplusplus
extern "C"
#endif
__attribute__((always_inline)) static inline int32_t {name}_body_{uid}(
    int8_t *aa, int8_t *bb, int32_t *cc,
    int A_stride, int B_stride, int C_stride) {{
  int16_t bb_pad[{nn * kk}];

  if ( {mm} < 2 && {nn} < 2 ) {{
    return {name}_body_loop_{uid}(aa, bb, cc, A_stride, B_stride, C_stride);
  }}

  for (int i = 0; i < {nn}; i++)
    for (int j = 0; j < {kk} / 4; j++)
      read_and_pad(&bb[i*B_stride + j*4], (int32_t*) &bb_pad[i*{kk} + j*4], (int32_t*) &bb_pad[i*{kk} + j*4 + 2]);

  for (int i = 0; i < {mm}; i++) {{
    int16_t aa_pad_line[{kk}];
    for (int l = 0; l < {kk} / 4; l++)
      read_and_pad(&aa[i*A_stride + l*4], (int32_t*) &aa_pad_line[l*4], (int32_t*) &aa_pad_line[l*4 + 2]);

    for (int j = 0; j < {nn}; j++) {{
      int32_t *aa_ptr = (int32_t *) aa_pad_line;
      int32_t *bb_ptr = (int32_t *) &bb_pad[j*{kk}];
      int32_t sum = 0;
      for (int l = 0; l < 2 * ({kk} / 4); l++) {{
        sum = __smlad(*aa_ptr, *bb_ptr, sum);
        ++ aa_ptr; ++ bb_ptr;
      }}
      cc[i*C_stride + j] = sum;
    }}
  }}
{rest}  return 0;
}}
"""


def _c_e(value: float) -> str:
    """A float constant as TVM's C codegen prints an immediate (``%e`` with ``f``)."""
    return f"{float(np.float32(value)):.6e}f"


def _sigmoid_mlp_operators(r: Release) -> str:
    """The operators as TVM 0.13 schedules them for a Cortex-M with DSP: the reshape, then per
    layer the gemm micro-kernel (raw sum of products), the folded bias, the fixed-point
    requantization, and the logistic in float (expf, roundf) back to int8."""
    m, f = r.model, _operator_functions(r)
    n_in = m.inputs[0].shape[-1]
    out = [_fn(f"{f[0]}(int8_t* p0, int8_t* T_reshape)",
               f"  for (int32_t ax1 = 0; ax1 < {n_in}; ++ax1) {{\n"
               "    T_reshape[ax1] = p0[ax1];\n  }\n")]
    for k, q in enumerate(m.layers):
        w = m.params[f"_param_{2 * k + 1}"]
        n, kk = w.shape
        gemm = f"gemm_1x{kk}x{n}_body_{_GEMM_IDS[k]}"
        out.append(_fn(
            f"{f[k + 1]}(int8_t* p0, int8_t* T_cast)",
            f"  int32_t dense[{n}];\n"
            f"  {gemm}((int8_t*)p0, (int8_t*)fused_constant_{2 * k}, dense, {kk}, {kk}, {n});\n"
            f"  for (int32_t ax1 = 0; ax1 < {n}; ++ax1) {{\n"
            f"    int64_t acc = ((int64_t)(dense[ax1] + fused_constant_{2 * k + 1}[ax1]));\n"
            f"    int32_t v = ((int32_t)(((acc * (int64_t){q['mult']}) + ((int64_t)1 << "
            f"((int64_t){q['shift'] - 1}))) >> ((int64_t){q['shift']}))) + {q['rq_zp']};\n"
            "    int32_t rq = (v) < (127) ? ((v) > (-128) ? (v) : (-128)) : (127);\n"
            f"    float x = (((float)(rq - {q['rq_zp']})) * {_c_e(q['rq_scale'])});\n"
            "    float sig = (1.000000e+00f / (1.000000e+00f + expf((0.000000e+00f - x))));\n"
            "    int32_t s = (((int32_t)roundf((sig / 3.906250e-03f))) + -128);\n"
            "    T_cast[ax1] = ((int8_t)((s) < (127) ? ((s) > (-128) ? (s) : (-128)) : (127)));\n"
            "  }\n"))
    return "".join(out)


def _operators(r: Release) -> str:
    m = r.model
    pool = ", uint8_t* global_workspace_1_var" if r.usmp else ""
    f = _operator_functions(r)
    if m.kind == "int8_sigmoid_mlp":
        return _sigmoid_mlp_operators(r)
    if m.kind == "float_mlp":
        return (
            _fn(f"{f[0]}(float* p0, float* T_relu{pool})",
                "  for (int32_t j = 0; j < 4; ++j) {\n"
                "    float acc = 0.000000e+00f;\n"
                "    for (int32_t k = 0; k < 8; ++k) {\n"
                "      acc = acc + (p0[k] * fused_constant_0[((j * 8) + k)]);\n"
                "    }\n"
                "    float v = acc + fused_constant_1[j];\n"
                "    T_relu[j] = (v) > (0.000000e+00f) ? (v) : (0.000000e+00f);\n"
                "  }\n")
            + _fn(f"{f[1]}(float* p0, float* T_add{pool})",
                  "  for (int32_t j = 0; j < 3; ++j) {\n"
                  "    float acc = 0.000000e+00f;\n"
                  "    for (int32_t k = 0; k < 4; ++k) {\n"
                  "      acc = acc + (p0[k] * fused_constant_2[((j * 4) + k)]);\n"
                  "    }\n"
                  "    T_add[j] = acc + fused_constant_3[j];\n"
                  "  }\n"))
    if m.kind == "int8_dense":
        q, k = m.quant, m.inputs[0].shape[1]
        if r.cortex_m:
            # Bias with the input zero point folded in, as TFLite does: sum(x*w) - zp*sum(w).
            dense = _fn(
                f"{f[0]}(int8_t* p0, int32_t* T_add{pool})",
                "  for (int32_t j = 0; j < 4; ++j) {\n"
                "    int32_t sum = 0;\n"
                f"    for (int32_t l = 0; l < {k // 4}; ++l) {{\n"
                "      uint32_t a; uint32_t b;\n"
                "      memcpy(&a, &p0[l * 4], 4);\n"
                f"      memcpy(&b, &fused_constant_0[(j * {k}) + (l * 4)], 4);\n"
                "      int32_t a20 = __sxtb16(a);\n"
                "      int32_t a31 = __sxtb16(__ror(a, 8));\n"
                "      int32_t b20 = __sxtb16(b);\n"
                "      int32_t b31 = __sxtb16(__ror(b, 8));\n"
                "      sum = __smlad(a20, b20, sum);\n"
                "      sum = __smlad(a31, b31, sum);\n"
                "    }\n"
                "    int32_t wsum = 0;\n"
                f"    for (int32_t l = 0; l < {k}; ++l) {{\n"
                f"      wsum = wsum + ((int32_t)fused_constant_0[(j * {k}) + l]);\n"
                "    }\n"
                f"    T_add[j] = (sum - ({q['in_zp']} * wsum)) + fused_constant_1[j];\n"
                "  }\n")
        else:
            dense = _fn(
                f"{f[0]}(int8_t* p0, int32_t* T_add{pool})",
                "  for (int32_t j = 0; j < 4; ++j) {\n"
                "    int32_t acc = 0;\n"
                f"    for (int32_t k = 0; k < {k}; ++k) {{\n"
                f"      acc = acc + ((((int32_t)p0[k]) - ({q['in_zp']})) * "
                f"((int32_t)fused_constant_0[((j * {k}) + k)]));\n"
                "    }\n"
                "    T_add[j] = acc + fused_constant_1[j];\n"
                "  }\n")
        requant = _fn(
            f"{f[1]}(int32_t* p0, int8_t* T_cast{pool})",
            "  for (int32_t j = 0; j < 4; ++j) {\n"
            f"    int32_t v = ((int32_t)(((((int64_t)p0[j]) * (int64_t){q['mult']}) + "
            f"((int64_t)1 << ((int64_t){q['shift'] - 1}))) >> ((int64_t){q['shift']}))) + {q['out_zp']};\n"
            "    int32_t lo = (v) > (-128) ? (v) : (-128);\n"
            "    T_cast[j] = ((int8_t)((lo) < (127) ? (lo) : (127)));\n"
            "  }\n")
        return dense + requant
    return (
        _fn(f"{f[0]}(float* p0, float* p1, float* T_relu{pool})",
            "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
            "    float v = (p0[ax1] * fused_constant_0[ax1]) + p1[ax1];\n"
            "    T_relu[ax1] = (v) > (0.000000e+00f) ? (v) : (0.000000e+00f);\n"
            "  }\n")
        + _fn(f"{f[1]}(float* p0, float* p1, float* T_subtract{pool})",
              "  for (int32_t ax1 = 0; ax1 < 4; ++ax1) {\n"
              "    T_subtract[ax1] = (p0[ax1] - p1[ax1]);\n"
              "  }\n"))


def _main(r: Release) -> str:
    m = r.model
    f = _operator_functions(r)
    ins = [f"{_ctype(t.dtype)}* {t.c_name}_buffer_var" for t in m.inputs]
    outs = [f"{_ctype(t.dtype)}* {n}_buffer_var" for n, t in zip(
        ["output"] if len(m.outputs) == 1 and not r.output_tensor_names_attr
        else _output_names(r), m.outputs, strict=True)]
    if r.flat_run_model:
        # 0.8 names the parameters arg0.. to match its own prototype in lib0.c.
        ins = [f"void* arg{i}" for i in range(len(m.inputs))]
        outs = [f"void* arg{len(m.inputs) + i}" for i in range(len(m.outputs))]
    params = ins + outs + (["uint8_t* global_workspace_0_var"] if r.usmp else [])
    in_names = [p.split()[-1] for p in ins]
    out_names = [p.split()[-1] for p in outs]
    pool_args = ", global_workspace_0_var" if r.usmp else ""
    body = []
    if m.kind == "int8_sigmoid_mlp":
        bufs = list(_intermediates(m))
        for b in bufs:
            body.append(f"  void* {b} = TVMBackendAllocWorkspace(1, 0, (uint64_t)"
                        f"{_intermediates(m)[b]}, 0, 8);\n  if ({b} == NULL) {{\n    return -1;\n  }}\n")
        a, b = bufs
        x, y = in_names[0], out_names[0]
        calls = [(f[0], x, a), (f[1], a, b), (f[2], b, a), (f[3], a, y)]
        for fn_name, src, dst in calls:
            body.append(f"  if ({fn_name}({src}, {dst}) != 0 ) return -1;\n")
        for b in reversed(bufs):
            body.append(f"  if (TVMBackendFreeWorkspace(1, 0, {b}) != 0) {{\n    return -1;\n  }}\n")
    elif m.kind in ("float_mlp", "int8_dense"):
        size = _intermediates(m)["sid_1"]
        if r.usmp:
            body.append("  void* sid_1_let = (&(global_workspace_0_var[0]));\n")
        else:
            body.append(f"  void* sid_1_let = TVMBackendAllocWorkspace(1, 0, (uint64_t){size}, 2, 32);\n"
                        "  if (sid_1_let == NULL) {\n    return -1;\n  }\n")
        body.append(f"  if ({f[0]}({in_names[0]}, sid_1_let{pool_args}) != 0 ) return -1;\n")
        body.append(f"  if ({f[1]}(sid_1_let, {out_names[0]}{pool_args}) != 0 ) return -1;\n")
        if not r.usmp:
            body.append("  if (TVMBackendFreeWorkspace(1, 0, sid_1_let) != 0 ) {\n"
                        "    return -1;\n  }\n")
    else:
        y, x = in_names
        body.append(f"  if ({f[0]}({x}, {y}, {out_names[0]}) != 0 ) return -1;\n")
        body.append(f"  if ({f[1]}({x}, {y}, {out_names[1]}) != 0 ) return -1;\n")
    return _fn(f"{_main_name(r)}({', '.join(params)})", "".join(body))


# --- the tar (python/tvm/micro/model_library_format.py, _make_tar) ----------------------------

_RUNTIME_STANDINS = {
    "runtime/include/tvm/runtime/crt/platform.h":
        b"/* stand-in for the producer's standalone CRT (not compiled by project-api) */\n",
    "runtime/src/runtime/crt/common/crt_runtime_api.c":
        b"/* stand-in for the producer's standalone CRT (not compiled by project-api) */\n",
    "runtime/src/runtime/crt/memory/stack_allocator.c":
        b"/* stand-in for the producer's standalone CRT (not compiled by project-api) */\n",
}
_TEMPLATE_STANDINS = {
    "templates/crt_config.h.template": b"/* stand-in for the crt template's crt_config.h */\n",
    "templates/platform.c.template": b"/* stand-in for the crt template's platform.c */\n",
}


def _write_tar(path: Path, files: dict[str, bytes], r: Release) -> None:
    """``tar_f.add(tempdir, arcname=".", filter=reset)``: depth first, names sorted per folder
    (tarfile.add sorts os.listdir), uid/gid 0 "root"; then ``./runtime`` and the template files
    added without the filter, so they keep the exporter's owner."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tree: dict = {}
    for name, data in files.items():
        node = tree
        parts = name.split("/")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = data

    def info(name: str, data: bytes | None, owner: tuple[int, str]) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.mtime = r.mtime
        ti.uid = ti.gid = owner[0]
        ti.uname = ti.gname = owner[1]
        if data is None:
            ti.type = tarfile.DIRTYPE
            ti.mode = r.modes[0] if name == "." else r.modes[1]
        else:
            ti.size = len(data)
            ti.mode = r.modes[2]
        return ti

    root_owner = (0, "root")
    user = (1000, "tvm")
    with tarfile.open(path, "w", format=r.tar_format) as tar:
        def add(name: str, node: dict | bytes, owner: tuple[int, str]) -> None:
            if isinstance(node, dict):
                tar.addfile(info(name, None, owner))
                for child in sorted(node):
                    add(f"{name}/{child}", node[child], owner)
            else:
                tar.addfile(info(name, node, owner), io.BytesIO(node))

        add(".", tree, root_owner)
        if r.runtime_dir:
            rt: dict = {}
            for name, data in _RUNTIME_STANDINS.items():
                node = rt
                parts = name.split("/")[1:]
                for p in parts[:-1]:
                    node = node.setdefault(p, {})
                node[parts[-1]] = data
            add("./runtime", rt, user)
        if r.templates_dir:
            for name, data in _TEMPLATE_STANDINS.items():
                tar.addfile(info(f"./{name}", data, user), io.BytesIO(data))
        if r.samples:
            # Appended by another tool: relative names without "./", uid 0 without an owner
            # name, mtime 0; C headers of one sample (the form TVM's test utilities write).
            for name, data in _sample_headers(r).items():
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime, ti.uname, ti.gname = len(data), 0o644, 0, "", ""
                tar.addfile(ti, io.BytesIO(data))


def _sample_headers(r: Release) -> dict[str, bytes]:
    """``samples/dummy_input.h`` and ``samples/expected_output.h``: one input and the output the
    network gives for it (numpy), as int8 C arrays."""
    m = r.model
    x = _rng(7).integers(-128, 128, m.inputs[0].shape).astype(np.int8)
    while m.ambiguous({m.inputs[0].name: x}):
        x = (x.astype(np.int16) + 1).clip(-128, 127).astype(np.int8)
    (y,) = m.reference({m.inputs[0].name: x})

    def header(name: str, arr: np.ndarray) -> bytes:
        values = "".join(f"{int(v)}, " for v in arr.reshape(-1))
        return (f"#include <stddef.h>\n#include <stdint.h>\n#include <dlpack/dlpack.h>\n"
                f"#define {name.upper()}_LEN {arr.size}\nint8_t {name}[] ={{{values}}};\n\n"
                ).encode()

    return {"samples/dummy_input.h": header("dummy_input", x),
            "samples/expected_output.h": header("expected_output", y)}

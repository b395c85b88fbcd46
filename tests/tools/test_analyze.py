"""``project-api analyze``: per-layer tables of every shared model against golden JSON, checked
themselves against the ``tflite`` package's reading of the flatbuffers (shapes, MACs from the
filter shapes, weights at least the filters' bytes, live pool bytes from the tensors'
lifetimes); code sizes measured against ``arm-none-eabi-nm``; the fit against a board from the
stm32 build's memory report, refusing ad01 on the smallest board with ld's own byte count;
archives of our emitter and of TVM; the pictures; one-line errors.

Regenerate the golden files with ``PROJECT_API_UPDATE_GOLDEN=1`` after a deliberate change."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite
from conftest import REPO_ROOT, require_tool

from project_api.cli import main
from project_api.emit import emit
from project_api.emit.planner import align
from project_api.tools import analyze as A

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "analyze"
MODELS = ["ad01_int8", "hello_world_float", "hello_world_int8", "ic_resnet8_int8",
          "kws_ref_model_float32", "kws_ref_model_int8", "micro_speech_int8", "vww_96_int8"]
TARGETS = ["generic", "cortex-m4"]
_OP_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8}  # TensorType -> bytes


def _model_path(models_dir: Path, name: str) -> Path:
    return models_dir / f"{name}.tflite"


def _read(path: Path) -> tuple[list[dict], list[tuple[str, list[int], list[int]]], set[int]]:
    """Tensors (name, shape, itemsize, constant bytes) and ops of subgraph 0, and its I/O, read
    with the ``tflite`` package (not our reader)."""
    data = path.read_bytes()
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    tensors = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        buf = m.Buffers(t.Buffer())
        const = buf.DataLength() if buf is not None else 0
        tensors.append({"name": t.Name().decode(), "shape": [int(d) for d in t.ShapeAsNumpy()]
                        if t.ShapeLength() else [], "itemsize": _ITEMSIZE.get(t.Type(), 1),
                        "const": const})
    ops = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        ops.append((_OP_NAMES[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())],
                    [int(v) for v in op.InputsAsNumpy()], [int(v) for v in op.OutputsAsNumpy()]))
    io = {int(v) for v in sg.InputsAsNumpy()} | {int(v) for v in sg.OutputsAsNumpy()}
    return tensors, ops, io


def _independent_macs(op: str, ins: list[int], outs: list[int], tensors: list[dict]) -> int:
    shape = [tensors[t]["shape"] for t in ins]
    out = tensors[outs[0]]["shape"]
    if op == "CONV_2D":
        return int(np.prod(out)) * int(np.prod(shape[1][1:]))
    if op == "DEPTHWISE_CONV_2D":
        return int(np.prod(out)) * shape[1][1] * shape[1][2]
    if op == "FULLY_CONNECTED":
        return int(np.prod(out)) * shape[1][1]
    return 0


def _golden_json(models_dir: Path, name: str, target: str) -> dict:
    a = A.analyze(_model_path(models_dir, name), target=target, compile=False)
    return json.loads(json.dumps(a.to_json(), sort_keys=True))


def test_every_shared_model_has_its_golden(models_dir: Path) -> None:
    """A model added to the shared folder fails here until its golden tables exist."""
    assert sorted(p.stem for p in models_dir.glob("*.tflite")) == MODELS
    assert sorted(p.name for p in GOLDEN.glob("*.json")) == sorted(
        f"{m}.{t}.json" for m in MODELS for t in TARGETS)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", MODELS)
def test_analysis_matches_golden(models_dir: Path, name: str, target: str) -> None:
    got = _golden_json(models_dir, name, target)
    golden = GOLDEN / f"{name}.{target}.json"
    if os.environ.get("PROJECT_API_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden.read_text())


@pytest.mark.parametrize("name", MODELS)
def test_golden_agrees_with_the_flatbuffer(models_dir: Path, name: str) -> None:
    """The golden tables, read back, against an independent reading of the model."""
    tensors, ops, io = _read(_model_path(models_dir, name))
    for target in TARGETS:
        g = json.loads((GOLDEN / f"{name}.{target}.json").read_text())
        layers = g["layers"]
        assert [la["node"] for la in layers] == list(range(len(ops)))
        for la, (op, ins, outs) in zip(layers, ops, strict=True):
            assert la["op"] == op
            acts = [t for t in ins if t >= 0 and not tensors[t]["const"]]
            assert [x["shape"] for x in la["inputs"]] == [tensors[t]["shape"] for t in acts]
            assert [x["shape"] for x in la["outputs"]] == [tensors[t]["shape"] for t in outs]
            assert la["macs"] == _independent_macs(op, ins, outs, tensors), (name, la["node"])
            filters = sum(tensors[t]["const"] for t in ins if t >= 0 and tensors[t]["const"])
            if la["kernel"] != "view" and tensors[outs[0]]["itemsize"] == 1:
                # int8 weights are stored at least once (DSP layouts may pad; biases, multipliers
                # and shifts come on top), and a float model's int8 weights are widened
                assert la["weight_bytes"] >= filters
            if la["kernel"] == "view":
                assert la["weight_bytes"] == 0 and la["scratch_bytes"] == 0
        assert g["totals"]["macs"] == sum(la["macs"] for la in layers)
        assert g["totals"]["weight_bytes"] == sum(la["weight_bytes"] for la in layers)
        assert g["totals"]["pool_lower_bound_bytes"] == max(la["live_bytes"] for la in layers)
        assert g["totals"]["pool_bytes"] >= g["totals"]["pool_lower_bound_bytes"]
        io_bytes = sum(int(np.prod(tensors[t]["shape"])) * tensors[t]["itemsize"] for t in io)
        assert g["totals"]["io_bytes"] == io_bytes
        # an emitted .tflite takes its pool as one workspace, no USMP pool struct
        assert g["totals"]["external_pools"] == {}


def _live_from_lifetimes(tensors: list[dict], ops: list, io: set[int]) -> list[int]:
    """Bytes of intermediates live at each op: a tensor from the op that writes it to the last
    that reads it, a RESHAPE's output one buffer with its input (in the caller's buffer when
    either is a graph input or output), each buffer rounded up to 8 bytes."""
    parent: dict[int, int] = {}

    def find(t: int) -> int:
        while parent.get(t, t) != t:
            t = parent[t]
        return t

    for op, ins, outs in ops:
        if op == "RESHAPE":
            parent[find(outs[0])] = find(ins[0])
    external = {find(t) for t in io}
    span: dict[int, list[int]] = {}
    for k, (_op, ins, outs) in enumerate(ops):
        for t in [*ins, *outs]:
            if t < 0 or tensors[t]["const"] or find(t) in external:
                continue
            r = find(t)
            lo, hi = span.get(r, [k, k])
            span[r] = [min(lo, k), max(hi, k)]
    size = {r: align(int(np.prod(tensors[r]["shape"])) * tensors[r]["itemsize"]) for r in span}
    return [sum(size[r] for r, (lo, hi) in span.items() if lo <= k <= hi)
            for k in range(len(ops))]


@pytest.mark.parametrize("name", ["kws_ref_model_int8", "micro_speech_int8", "ad01_int8",
                                  "hello_world_int8"])
def test_live_pool_bytes_follow_the_tensors_lifetimes(models_dir: Path, name: str) -> None:
    tensors, ops, io = _read(_model_path(models_dir, name))
    want = _live_from_lifetimes(tensors, ops, io)
    g = json.loads((GOLDEN / f"{name}.generic.json").read_text())
    got = [la["live_bytes"] - la["scratch_bytes"] for la in g["layers"]]
    assert got == want


def test_archive_of_our_emitter_analyzes_as_its_tflite(models_dir: Path, tmp_path: Path) -> None:
    model = _model_path(models_dir, "kws_ref_model_int8")
    emit(model, tmp_path / "kws.tar", target="cortex-m4")
    from_tflite = A.analyze(model, target="cortex-m4", compile=False).to_json()
    from_mlf = A.analyze(tmp_path / "kws.tar", compile=False).to_json()
    assert from_mlf["kind"] == "mlf" and from_tflite["kind"] == "tflite"
    for key in ("layers", "totals", "pool_plan", "inputs", "outputs", "target", "weights"):
        assert from_mlf[key] == from_tflite[key], key


def test_analysis_records_the_weight_layout(models_dir: Path, tmp_path: Path) -> None:
    """``--weights`` as emit's: each convolution's constants (filters plus biases and
    requantization) take more with int16 pairs (at least twice the .tflite's filter bytes) than
    with int8 (the default); an archive says which layout it holds (metadata.json 'weights')."""
    path = _model_path(models_dir, "kws_ref_model_int8")
    tensors, ops, _io = _read(path)
    w8 = A.analyze(path, target="cortex-m4", compile=False)
    w16 = A.analyze(path, target="cortex-m4", weights="int16", compile=False)
    assert (w8.weights, w16.weights) == ("int8", "int16")
    assert w8.to_json()["weights"] == "int8" and w16.to_json()["weights"] == "int16"
    for la8, la16, (op, ins, _outs) in zip(w8.layers, w16.layers, ops, strict=True):
        if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            filters = tensors[ins[1]]["const"]
            assert filters <= la8.weight_bytes < la16.weight_bytes, (la8.node, op)
            assert la16.weight_bytes >= 2 * filters, (la16.node, op)
    emit(path, tmp_path / "w16.tar", target="cortex-m4", weights="int16")
    from_mlf = A.analyze(tmp_path / "w16.tar", compile=False)
    assert from_mlf.weights == "int16" and from_mlf.weight_bytes == w16.weight_bytes


def _symbol_sizes(obj: Path) -> dict[str, int]:
    """Symbol -> size from arm-none-eabi-objdump's symbol table, for symbols in a section of
    their own (an array the compiler folded into an identical one's section has none)."""
    out = subprocess.run(["arm-none-eabi-objdump", "-t", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ .{7} (\S+)\s+([0-9a-f]+) (\S+)$", line)
        if m and m.group(1) in (f".text.{m.group(3)}", f".rodata.{m.group(3)}"):
            sizes[m.group(3)] = int(m.group(2), 16)
    return sizes


def test_measured_code_sizes_match_the_symbol_table(models_dir: Path, tmp_path: Path) -> None:
    """Each layer's code and constants as analyze measures them are the sizes objdump gives
    its function and arrays in an object compiled here with the same flags (plus each section's
    alignment padding; an array folded into an identical one counts once, where it lives); the
    total is their sum."""
    require_tool("arm-none-eabi-gcc")
    require_tool("arm-none-eabi-objdump")
    from project_api.emit import emit_sources
    from project_api.system.paths import crt_dir

    model = _model_path(models_dir, "kws_ref_model_int8")
    a = A.analyze(model, target="cortex-m4")
    assert a.sizes is not None and a.sizes.measured and not a.sizes.estimates
    gen = emit_sources(model.read_bytes(), target="cortex-m4")
    (tmp_path / "tvmgen_default.h").write_text(gen.header)
    (tmp_path / "lib0.c").write_text(gen.source)
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                    "-mfpu=fpv4-sp-d16", "-Os", "-ffunction-sections", "-fdata-sections", "-w",
                    "-fno-strict-aliasing", f"-I{tmp_path}", f"-I{crt_dir() / 'include'}", "-c",
                    str(tmp_path / "lib0.c"), "-o", str(tmp_path / "lib0.o")], check=True)
    nm = _symbol_sizes(tmp_path / "lib0.o")
    for la in a.layers or []:
        code, const = a.sizes.layer_bytes(la)
        if la.function is None:
            assert (code, const) == (0, 0)
            continue
        # a section holds its symbol, padded to the section's alignment (at most 3 bytes)
        assert nm[la.function] <= code <= nm[la.function] + 3, la.function
        arrays = [n for sym, n in nm.items() if sym.startswith(la.function + "_")]
        assert sum(arrays) <= const <= sum(arrays) + 3 * len(arrays), la.function
    assert a.sizes.code_bytes == sum(n for sym, (k, n) in a.sizes.symbols.items() if k == "code")
    assert a.sizes.code_bytes == sum(a.sizes.layer_bytes(la)[0] for la in a.layers) + \
        a.sizes.shared_code_bytes(a.layers)


def test_without_the_toolchain_sizes_are_estimates(models_dir: Path, monkeypatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(A, "_compiler_for", lambda _cpu: None)
    model = _model_path(models_dir, "hello_world_int8")
    a = A.analyze(model, target="cortex-m4")
    assert a.sizes is not None and not a.sizes.measured and a.sizes.code_bytes is None
    assert any("code: unknown" in e for e in a.sizes.estimates)
    assert a.sizes.constant_bytes == a.weight_bytes
    assert main(["analyze", str(model), "--target", "cortex-m4"]) == 0
    assert "estimates: code: unknown without arm-none-eabi-gcc" in capsys.readouterr().out


def _ld_overflow(models_dir: Path, tmp_path: Path, model: str, board: str) -> dict[str, int]:
    """ld's own "region `X' overflowed by N bytes" for the stm32 build of ``model``."""
    from project_api.api.project import generate_project
    from project_api.errors import ProjectAPIError

    emit(_model_path(models_dir, model), tmp_path / "m.tar", target="cortex-m4")
    with generate_project("stm32", tmp_path / "m.tar", tmp_path / "prj", {"board": board}) as prj:
        with pytest.raises(ProjectAPIError):
            prj.build()
    log = (tmp_path / "prj" / "build" / "build.log").read_text()
    return {r.lower(): int(n) for r, n in re.findall(r"region `(\w+)' overflowed by (\d+) bytes",
                                                     log)}


def _smallest_board() -> str:
    import yaml

    boards = yaml.safe_load((REPO_ROOT / "templates/stm32/boards.yaml").read_text())["boards"]
    return min(boards, key=lambda b: (boards[b]["memory"]["flash"]["length"],
                                      boards[b]["memory"]["ram"]["length"]))


def test_fit_refuses_ad01_on_the_smallest_board(models_dir: Path, tmp_path: Path,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    require_tool("arm-none-eabi-gcc")
    board = _smallest_board()
    model = _model_path(models_dir, "ad01_int8")
    assert main(["analyze", str(model), "--template", "stm32", "-o", f"board={board}",
                 "--json"]) == 1
    out, err = capfd.readouterr()
    data = json.loads(out)
    want = _ld_overflow(models_dir, tmp_path, "ad01_int8", board)
    assert "flash" in want
    assert data["fit"]["fits"] is False and data["fit"]["overflow"] == want
    assert data["fit"]["board"] == board
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"error: the firmware does not fit {board}: flash by "
                           f"{want['flash']:,} bytes of")
    top = data["fit"]["largest"]["flash"]
    assert len(top) == 3 and all(p["name"] in line for p in top)
    assert top[0]["name"].endswith("_w") and top[0]["category"] == "model weights"
    # the split covers the runtime and the RPC server, as the build's report does
    split = data["fit"]["regions"]["flash"]["split"]
    assert split["runtime"] > 0 and split["rpc server"] > 0 and split["model weights"] > 250_000
    assert data["sizes"]["measured"] is True


def test_fit_on_the_emulated_board(models_dir: Path, tmp_path: Path) -> None:
    """KWS fits qemu_netduinoplus2; the regions add up and are the board's."""
    require_tool("arm-none-eabi-gcc")
    import yaml

    a = A.analyze(_model_path(models_dir, "kws_ref_model_int8"), template="stm32",
                  options={"board": "qemu_netduinoplus2"})
    assert a.target == "cortex-m4"  # the board's CPU picks the kernels
    assert a.fit is not None and a.fit.fits and a.fit.problem() is None
    board = yaml.safe_load((REPO_ROOT / "templates/stm32/boards.yaml").read_text())[
        "boards"]["qemu_netduinoplus2"]
    for region in ("flash", "ram"):
        r = a.fit.regions[region]
        assert r["length"] == board["memory"][region]["length"]
        assert r["used"] == sum(r["split"].values()) < r["length"]
    assert a.fit.regions["ram"]["split"]["activations"] >= a.pool_plan.size
    assert a.sizes is not None and a.sizes.measured
    assert a.sizes.constant_bytes == a.fit.regions["flash"]["split"]["model weights"]


@pytest.mark.parametrize("key", ["world-2021-keras-dense", "tvm-0.13-usmp"])
def test_tvm_archive_shows_what_its_metadata_allows(tmp_path: Path, key: str) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tvm_corpus import build_archive

    arc = build_archive(key, tmp_path)
    meta = json.loads(arc.files["metadata.json"])
    a = A.analyze(arc.path, compile=False)
    data = a.to_json()
    assert data["kind"] == "tvm" and data["layers"] is None
    assert data["totals"]["macs"] is None and data["totals"]["pool_lower_bound_bytes"] is None
    assert any("per layer" in u for u in data["unknown"])
    entry = meta["modules"]["default"] if "modules" in meta else meta
    functions = entry["memory"]["functions"]["operator_functions"]
    assert [f["function"] for f in data["operator_functions"]] == \
        [f["function_name"] for f in functions]
    assert [f["workspace_bytes"] for f in data["operator_functions"]] == \
        [f["workspace"][0]["workspace_size_bytes"] for f in functions]
    main_entry = entry["memory"]["functions"]["main"][0]
    assert data["totals"]["pool_bytes"] == main_entry["workspace_size_bytes"]
    assert data["totals"]["weight_bytes"] == main_entry["constants_size_bytes"]
    assert data["totals"]["external_pools"] == {}


def test_tvm_archive_shows_the_pools_its_caller_provides(tmp_path: Path) -> None:
    """A USMP header declaring a pool the caller provides (struct tvmgen_default_workspace_pools
    with its _WORKSPACE_POOL_SIZE, and one without a size): analyze names both, with the size
    the header gives, in the JSON and the table."""
    import io
    import tarfile

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tvm_corpus import build_archive

    from project_api.cli.analyze import render

    arc = build_archive("tvm-0.13-float2", tmp_path)
    member = "codegen/host/include/tvmgen_default.h"
    header = arc.files[member].decode()
    pools = ('/*!\n * \\brief Workspace pool pointers for TVM module "default" \n */\n'
             "struct tvmgen_default_workspace_pools {\n  void* sram;\n  void* dtcm;\n};\n\n")
    assert "/*!\n * \\brief entrypoint" in header
    header = header.replace("/*!\n * \\brief entrypoint", pools + "/*!\n * \\brief entrypoint")
    header = header.replace("#define TVMGEN_DEFAULT_WORKSPACE_SIZE 0\n",
                            "#define TVMGEN_DEFAULT_WORKSPACE_SIZE 0\n"
                            "#define TVMGEN_DEFAULT_SRAM_WORKSPACE_POOL_SIZE 4096\n")
    assert "SRAM_WORKSPACE_POOL_SIZE 4096" in header
    dest = tmp_path / "pools.tar"
    with tarfile.open(arc.path) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            if m.name.removeprefix("./") == member:
                m.size = len(header.encode())
                out.addfile(m, io.BytesIO(header.encode()))
            else:
                out.addfile(m, src.extractfile(m) if m.isfile() else None)
    a = A.analyze(dest, compile=False)
    assert a.to_json()["totals"]["external_pools"] == {"sram": 4096, "dtcm": None}
    assert "pools the caller provides: sram 4,096 B, dtcm ? B" in render(a)


def test_comparisons_hook_reaches_table_and_json(models_dir: Path, tmp_path: Path,
                                                 monkeypatch) -> None:
    """What a provider of COMPARISONS returns (the graph executor's RAM, later) is shown."""
    emit(_model_path(models_dir, "hello_world_int8"), tmp_path / "hw.tar")
    seen = []

    def provider(mod):
        seen.append(mod.name)
        return [A.Comparison("another runtime's RAM", 1234, "a test figure")]

    monkeypatch.setattr(A, "COMPARISONS", [provider])
    a = A.analyze(tmp_path / "hw.tar", compile=False)
    assert seen == ["default"]
    assert a.to_json()["comparisons"] == [{"label": "another runtime's RAM", "bytes": 1234,
                                           "note": "a test figure"}]
    from project_api.cli.analyze import render

    assert "beside the pool: another runtime's RAM 1,234 B (a test figure)" in render(a)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_writes_the_pictures(models_dir: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pics"
    model = str(_model_path(models_dir, "kws_ref_model_int8"))
    assert main(["analyze", model, "--target", "cortex-m4", "--no-compile", "--plot",
                 str(out)]) == 0
    for name in ("pool.png", "layers.png", "memory.png"):
        p = out / name
        assert 10_000 < p.stat().st_size < 150_000, (name, p.stat().st_size)
        assert _png_size(p) == (640, 336)
    assert "pictures: " in capsys.readouterr().out
    before = (out / "pool.png").read_bytes()
    assert main(["analyze", model, "--no-compile", "--plot", str(out)]) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (out / "pool.png").read_bytes() == before
    assert main(["analyze", model, "--no-compile", "--plot", str(out), "--force"]) == 0


def test_plot_without_matplotlib_names_the_extra(models_dir: Path, tmp_path: Path,
                                                 monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["analyze", str(_model_path(models_dir, "hello_world_int8")), "--no-compile",
                 "--plot", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err
    assert "analyze --plot needs the 'matplotlib' package" in err
    assert "pip install 'project-api[plot]'" in err
    assert not (tmp_path / "p").exists()


def test_cli_errors_are_one_line(models_dir: Path, tmp_path: Path, capsys) -> None:
    model = str(_model_path(models_dir, "hello_world_int8"))
    emit(model, tmp_path / "hw.tar")
    cases = [
        (["analyze", str(tmp_path / "missing.tflite")], 2, "does not exist"),
        (["analyze", model, "-o", "board=x"], 2, "give --template too"),
        (["analyze", str(tmp_path / "hw.tar"), "--target", "cortex-m4"], 1,
         "--target goes with a .tflite"),
        (["analyze", str(tmp_path / "hw.tar"), "--weights", "int16"], 1,
         "--weights goes with a .tflite"),
        (["analyze", model, "--target", "cortex-z9"], 2, "--target 'cortex-z9'"),
        (["analyze", model, "--template", "stm32", "-o", "bord=x"], 2, "did you mean 'board'"),
    ]
    for argv, status, text in cases:
        assert main(argv) == status, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and text in err[0], (argv, err)


def test_text_table_names_every_layer(models_dir: Path, capsys) -> None:
    model = str(_model_path(models_dir, "micro_speech_int8"))
    assert main(["analyze", model, "--target", "cortex-m4", "--no-compile"]) == 0
    out = capsys.readouterr().out
    for op in ("DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX"):
        assert op in out
    assert "cortex-m4 kernels, int8 weights" in out
    assert "planner's lower bound 4,008 B" in out
    assert "estimates: code: not measured (--no-compile)" in out
    assert "336,000 MACs" in out

"""Real TVM archives (tests/tvm_corpus.py) through info, generate, build and run; leniency rules.

Every corpus archive is written as one TVM release wrote it; the host-template round trip checks
its outputs against numpy computing the same network, with no ``--input-spec``. The Cortex-M
archives hold TVM's DSP micro-kernels (<arm_acle.h> and inline Arm assembly): the host template
builds them with its portable <arm_acle.h>; code with other Arm-only headers (CMSIS-NN) is refused
there, naming Arm Cortex-M. Two archives rebuild ones TVM users published (``world-*``).
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO_ROOT, require_tool
from tvm_corpus import CORPUS, CorpusArchive, build_archive, save_param_dict

from project_api.archive.mlf import open_mlf, write_mlf_with_specs
from project_api.archive.model import parse_input_spec
from project_api.archive.params import read_param_names
from project_api.cli import format_error, main
from project_api.errors import MLFError

HOST_KEYS = list(CORPUS)
WORLD_KEYS = [k for k in CORPUS if k.startswith("world-")]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus")


def _archive(key: str, corpus_dir: Path) -> CorpusArchive:
    return build_archive(key, corpus_dir)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    rc = main([*argv, "--json", "-q"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def _feeds(entry: CorpusArchive, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in entry.model.inputs:
        if t.dtype == "int8":
            feeds[t.name] = rng.integers(-128, 128, t.shape).astype(np.int8)
        else:
            feeds[t.name] = rng.uniform(-1, 1, t.shape).astype(np.float32)
    return feeds


def _generate_build_run(entry: CorpusArchive, work: Path, capsys: pytest.CaptureFixture[str],
                        model: Path | None = None, specs: tuple[str, ...] = ()) -> None:
    prj = work / f"{entry.key}-prj"
    spec_args = [a for s in specs for a in ("--input-spec", s)]
    _cli_json(capsys, "generate", "--template", "host", "--model", str(model or entry.path),
              "--out", str(prj), *spec_args)
    _cli_json(capsys, "build", str(prj))
    seed = CORPUS.index(entry.key) + 1
    feeds = _feeds(entry, seed)
    while entry.model.ambiguous(feeds):  # a float rounding tie: take another sample
        seed += 100
        feeds = _feeds(entry, seed)
    args = []
    for i, t in enumerate(entry.model.inputs):
        np.save(work / f"{entry.key}-in{i}.npy", feeds[t.name])
        args += ["--input", f"{t.name}={work / f'{entry.key}-in{i}.npy'}"]
    out = work / f"{entry.key}-out.npz"
    _cli_json(capsys, "run", str(prj), *args, "--output", str(out), "--repeat", "1",
              "--number", "1")
    got = np.load(out)
    want = entry.model.reference(feeds)
    assert len(got.files) == len(want)
    assert all(np.count_nonzero(w) >= 1 for w in want)  # a check that can fail
    with open_mlf(prj / "model.tar") as lib:
        c_names = [t.c_name for t in lib.module().outputs]
    for c, w in zip(c_names, want, strict=True):
        g = got[c].reshape(w.shape)
        assert g.dtype == w.dtype
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)


# --- the archives are what the releases wrote ---------------------------------------------------


@pytest.mark.parametrize("key", CORPUS)
def test_archive_bytes_follow_the_release(key: str, corpus_dir: Path) -> None:
    entry = _archive(key, corpus_dir)
    r = entry.release
    with tarfile.open(entry.path) as tar:
        members = tar.getmembers()
    # Python < 3.8 (TVM 0.8's) wrote GNU tar ("ustar  \\0"), later ones POSIX ("ustar\\x0000").
    magic = entry.path.read_bytes()[257:265]
    assert magic == (b"ustar  \x00" if r.tar_format == tarfile.GNU_FORMAT else b"ustar\x0000")
    names = [m.name for m in members]
    appended = [n for n in names if n.startswith("samples/")]  # added later, by another tool
    assert bool(appended) == r.samples
    assert names[0] == "." and all(n == "." or n.startswith("./") for n in names
                                   if n not in appended)
    core = [m for m in members
            if not m.name.startswith(("./runtime", "./templates")) and m.name not in appended]
    assert all((m.uid, m.gid, m.uname, m.gname) == (0, 0, "root", "root") for m in core)
    # tarfile.add walks each folder in sorted order, depth first.
    assert [m.name for m in core] == sorted((m.name for m in core),
                                             key=lambda n: n.split("/"))
    extra = [m for m in members if m not in core and m.name not in appended]
    assert bool(extra) == r.runtime_dir
    assert all(m.uid == 1000 for m in extra)  # added without the reset filter
    assert ("./templates" in names) is False  # template files come without a folder member
    assert any(n.startswith("./templates/") for n in names) == r.templates_dir

    meta_text = entry.files["metadata.json"].decode()
    meta = json.loads(meta_text)
    assert meta_text == json.dumps(meta, indent=2, sort_keys=True)
    assert meta["version"] == r.mlf_version
    assert ("modules" in meta) == (r.mlf_version == 7)
    if r.mlf_version == 5:
        assert isinstance(meta["target"], dict) and "src/relay.txt" in entry.files
    header = entry.files[f"codegen/host/include/tvmgen_{r.mod}.h"].decode()
    assert header.startswith(f"#ifndef TVMGEN_{r.mod.upper()}_H_\n")
    assert ("_WORKSPACE_SIZE" in header) == r.header_workspace_macro
    assert ("size (in bytes)" in header) == r.header_size_macros
    relay = next(v for k, v in entry.files.items() if k.startswith("src/")).decode()
    assert "%v_param_1:" in relay  # the weights are @main parameters
    assert ("output_tensor_names=[" in relay) == r.output_tensor_names_attr
    assert ("span=" in relay) == r.spans
    names_in_params = read_param_names(_write(corpus_dir / f"{key}.params",
                                              entry.files[f"parameters/{r.mod}.params"]))
    assert names_in_params == (r.param_file_names if r.param_file_names is not None
                               else list(entry.model.params))
    weights_c = "lib0" if r.layout == "single-lib0" else "lib1"
    lib = entry.files[f"codegen/host/src/{r.mod}_{weights_c}.c"].decode()
    assert "static const" in lib and ".rodata.tvm" in lib  # -link-params=0: weights in C too


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- info -------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", CORPUS)
def test_info_reads_every_release(key: str, corpus_dir: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    entry = _archive(key, corpus_dir)
    r, m = entry.release, entry.model
    data = _cli_json(capsys, "info", str(entry.path))
    mod = data["modules"][r.mod]
    assert [(t["name"], t["dtype"], t["shape"]) for t in mod["inputs"]] == [
        (t.name, t.dtype, list(t.shape)) for t in m.inputs]
    out_names = ["output"] if not r.output_tensor_names_attr else m.output_tensor_names
    assert [(t["name"], t["dtype"], t["shape"]) for t in mod["outputs"]] == [
        (n, t.dtype, list(t.shape)) for n, t in zip(out_names, m.outputs, strict=True)]
    assert mod["param_names"] == (r.param_file_names if r.param_file_names is not None
                                  else list(m.params))
    assert mod["run_function"] == (f"tvmgen_{r.mod}_run_model"
                                   if r.flat_run_model or r.layout == "single-lib0"
                                   else f"tvmgen_{r.mod}_run")
    assert data["has_bundled_runtime"] == r.runtime_dir
    assert (mod["internal_workspace_bytes"] > 0) == r.usmp
    if r.usmp:
        assert mod["workspace_size_bytes"] == 0 and mod["internal_workspace_bytes"] == 16
    if r.cortex_m:
        assert (mod["target_cpu"], mod["target_family"]) == ("cortex-m7", "cortex-m")
        assert "-mcpu=cortex-m7" in mod["target_evidence"]
    elif "-mcpu=cortex-m" in r.target:  # portable C generated for a Cortex-M
        cpu = re.search(r"-mcpu=(\S+)", r.target).group(1)
        assert (mod["target_cpu"], mod["target_family"]) == (cpu, "cortex-m")
    else:
        assert mod["target_family"] is None
    # Whatever TVM did not record is inferred, and each such tensor says how in one note.
    for t in mod["inputs"] + mod["outputs"]:
        assert t["shape"] is not None


# --- generate, build, run on the host template ---------------------------------------------------


@pytest.mark.parametrize("key", HOST_KEYS)
def test_generate_build_run_matches_numpy(key: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _generate_build_run(_archive(key, tmp_path), tmp_path, capsys)


def test_other_arm_only_code_is_refused_by_the_host_build(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CMSIS-NN has no portable stand-in: the host build names the CPU family and the
    templates that build it."""
    entry = _archive("tvm-0.13-cortex-m", tmp_path)
    lib1 = entry.files["codegen/host/src/default_lib1.c"].decode()
    cmsis = _rewrite(entry, tmp_path / "cmsis.tar", {"codegen/host/src/default_lib1.c": lib1.replace(
        "#include <arm_acle.h>", "#include <arm_acle.h>\n#include <arm_nnfunctions.h>").encode()})
    prj = tmp_path / "prj"
    _cli_json(capsys, "generate", "--template", "host", "--model", str(cmsis), "--out", str(prj))
    capsys.readouterr()
    assert main(["build", "-q", str(prj)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "targets Arm Cortex-M" in err and "<arm_nnfunctions.h>" in err
    # The templates that can build it are named, from their boards.yaml.
    assert "the host template cannot build; generate it with a template that builds for it: " \
        "stm32" in err


@pytest.mark.parametrize("key", ["tvm-0.13-cortex-m", "world-2023-cortex-m7-int8"])
def test_cortex_m_archives_are_real_arm_code(key: str, tmp_path: Path) -> None:
    """TVM's DSP C compiles for a Cortex-M7 as it is (so the corpus does not fake it), not for
    x86 with the system's headers (no <arm_acle.h>; inline Arm assembly), and for x86 with the
    host template's portable <arm_acle.h>."""
    gcc = require_tool("arm-none-eabi-gcc")
    entry = _archive(key, tmp_path)
    src = tmp_path / "default_lib1.c"
    src.write_bytes(entry.files["codegen/host/src/default_lib1.c"])
    inc = ["-I", str(REPO_ROOT / "crt" / "include"), "-I", str(tmp_path)]
    (tmp_path / "tvmgen_default.h").write_bytes(
        entry.files["codegen/host/include/tvmgen_default.h"])
    arm = subprocess.run([gcc, "-mcpu=cortex-m7", "-mthumb", "-O2", "-c", str(src), "-o",
                          str(tmp_path / "arm.o"), *inc], capture_output=True, text=True)
    assert arm.returncode == 0, arm.stderr
    assert "__pkhbt" in src.read_text() or key == "tvm-0.13-cortex-m"
    host = subprocess.run(["cc", "-c", str(src), "-o", str(tmp_path / "host.o"), *inc],
                          capture_output=True, text=True)
    assert host.returncode != 0 and "arm_acle.h" in host.stderr
    shim = subprocess.run(["cc", "-std=c99", "-c", str(src), "-o", str(tmp_path / "shim.o"), *inc,
                           "-I", str(REPO_ROOT / "templates" / "host" / "include")],
                          capture_output=True, text=True)
    assert shim.returncode == 0, shim.stderr


# --- leniency rules -------------------------------------------------------------------------------


def _rewrite(entry: CorpusArchive, dest: Path, changes: dict[str, bytes | None]) -> Path:
    """The archive with members replaced (bytes) or removed (None)."""
    with tarfile.open(entry.path) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            rel = m.name[2:] if m.name.startswith("./") else m.name
            if rel in changes:
                data = changes[rel]
                if data is None:
                    continue
                m.size = len(data)
                out.addfile(m, io.BytesIO(data))
            elif m.isfile():
                out.addfile(m, src.extractfile(m))
            else:
                out.addfile(m)
    return dest


def test_unreadable_relay_never_rejects_a_described_archive(tmp_path: Path, caplog) -> None:
    entry = _archive("tvm-0.12-int8", tmp_path)
    garbage = b"def @main(%serving_default_input_1:0: Tensor[(1, 6), int8 /* unterminated\n"
    path = _rewrite(entry, tmp_path / "bad-relay.tar", {"src/default.relay": garbage})
    with caplog.at_level(logging.DEBUG, logger="project_api.archive"), open_mlf(path) as lib:
        mod = lib.module()
        # metadata.json gives dtype and size; the shape is then the flat one, and says so.
        assert [(t.name, t.dtype, t.size_bytes, t.shape) for t in mod.inputs] == [
            ("serving_default_input_1:0", "int8", 6, (6,))]
        assert mod.inputs[0].note == ("shape [6] (flat): 6 bytes of int8, from metadata.json's "
                                      "size; the archive records no shape")
        assert [(t.name, t.dtype, t.size_bytes) for t in mod.outputs] == [
            ("StatefulPartitionedCall_0", "int8", 4)]
    assert "default.relay is not Relay text we can read" in caplog.text
    assert "unterminated parameter list" in caplog.text


def test_unknown_relay_syntax_keeps_what_can_be_read(tmp_path: Path) -> None:
    entry = _archive("tvm-0.13-float2", tmp_path)
    relay = entry.files["src/default.relay"].decode()
    relay = relay.replace("%serving_default_x:0: Tensor[(1, 4), float32]",
                          '%"serving_default_x:0" {virtual_device=meta[VirtualDevice][0]}: '
                          "Tensor[(1, 4), float32]")
    relay = relay.replace("%serving_default_y:0: Tensor[(1, 4), float32]",
                          "%serving_default_y:0: Tensor[(?, 4), float32]")
    relay = relay.replace('output_tensor_names=["Identity", "Identity_1"]',
                          'output_tensor_names=["Identity", "Identity_1"], '
                          'some_future_attr={"a": [1, 2]}, weird thing')
    path = _rewrite(entry, tmp_path / "odd.tar", {"src/default.relay": relay.encode()})
    with open_mlf(path) as lib:
        ins = lib.module().inputs
        # y: the dynamic dimension is what the recorded 16 bytes leave; x: read in full.
        assert [(t.name, t.dtype, t.shape) for t in ins] == [
            ("serving_default_y:0", "float32", (1, 4)), ("serving_default_x:0", "float32", (1, 4))]
        assert ins[0].note == "shape [1, 4]: the Relay type (?, 4) with its ? from the 16 bytes"
        assert ins[1].note is None
    # TVM 0.9 records no per-tensor size: io_size_bytes minus the other tensors gives y's.
    old = _archive("tvm-0.9-float2", tmp_path)
    odd = old.files["src/default.relay"].decode().replace(
        "%serving_default_y:0: Tensor[(1, 4), float32]", "%serving_default_y:0: Tensor[(?, 4), float32]")
    path = _rewrite(old, tmp_path / "odd09.tar", {"src/default.relay": odd.encode()})
    with open_mlf(path) as lib:
        y = lib.module().inputs[0]
        assert (y.name, y.size_bytes, y.shape) == ("serving_default_y:0", 16, (1, 4))
        assert y.note == ("16 bytes: what io_size_bytes 64 leaves after the other inputs and "
                          "outputs; shape [1, 4]: the Relay type (?, 4) with its ? from the 16 bytes")
    # Without io_size_bytes nothing gives the size: the error says what was tried.
    meta = json.loads(old.files["metadata.json"])
    del meta["modules"]["default"]["memory"]["functions"]["main"][0]["io_size_bytes"]
    path = _rewrite(old, tmp_path / "odd09-no-io.tar", {
        "src/default.relay": odd.encode(), "metadata.json": json.dumps(meta).encode()})
    with pytest.raises(MLFError, match=r"input 'serving_default_y:0': no size recorded and no "
                                       r"shape to compute it from \(metadata.json has none, the "
                                       r"header has no size macro, no io_size_bytes\); supply it "
                                       r"with --input-spec serving_default_y:0:float32:"):
        open_mlf(path)


def test_weights_dropped_by_params_file_without_header(tmp_path: Path) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _rewrite(entry, tmp_path / "no-header.tar",
                    {"codegen/host/include/tvmgen_default.h": None})
    with open_mlf(path) as lib:
        mod = lib.module()
        assert [t.name for t in mod.inputs] == ["serving_default_input_1:0"]
        assert mod.run_function == "tvmgen_default_run_model"


def test_weights_dropped_by_header_when_params_file_is_corrupt(tmp_path: Path, caplog) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _rewrite(entry, tmp_path / "bad-params.tar",
                    {"parameters/default.params": b"\x00" * 40})
    with caplog.at_level(logging.DEBUG, logger="project_api.archive"), open_mlf(path) as lib:
        mod = lib.module()
        assert mod.param_names is None
        assert [t.name for t in mod.inputs] == ["serving_default_input_1:0"]
    assert "not a readable TVM param dict" in caplog.text


def test_without_params_file_or_header_every_relay_parameter_is_an_input(tmp_path: Path) -> None:
    """Nothing tells weights from inputs then: the rule is documented, not guessed."""
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _rewrite(entry, tmp_path / "bare.tar", {
        "codegen/host/include/tvmgen_default.h": None, "parameters/default.params": None})
    with open_mlf(path) as lib:
        assert len(lib.module().inputs) == 5


def test_output_names_come_from_output_tensor_names(tmp_path: Path) -> None:
    entry = _archive("tvm-v6-int8", tmp_path)
    path = _rewrite(entry, tmp_path / "v6-no-header.tar",
                    {"codegen/host/include/tvmgen_default.h": None})
    with open_mlf(path) as lib:
        (out,) = lib.module().outputs
        assert (out.name, out.dtype, out.shape) == ("StatefulPartitionedCall_0", "int8", (1, 4))


def test_tvm_011_output_names_are_matched_by_position(tmp_path: Path) -> None:
    entry = _archive("tvm-0.11-float", tmp_path)
    meta = json.loads(entry.files["metadata.json"])
    assert list(meta["modules"]["default"]["memory"]["functions"]["main"][0]["outputs"]) == [
        "output"]
    with open_mlf(entry.path) as lib:
        (out,) = lib.module().outputs
        assert (out.name, out.c_name, out.size_bytes) == (
            "StatefulPartitionedCall_0", "StatefulPartitionedCall_0", 12)


def _no_relay_v08(entry: CorpusArchive, tmp_path: Path) -> Path:
    return _rewrite(entry, tmp_path / "no-relay.tar", {"src/relay.txt": b"not relay at all\n"})


def test_missing_facts_name_what_was_tried_and_the_input_spec(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _no_relay_v08(entry, tmp_path)
    # The params file's weights are all float32, so the tensors are float32; but io_size_bytes
    # cannot be split between two tensors of unknown size.
    with pytest.raises(MLFError, match=r"input 'serving_default_input_1_0': no size recorded.*"
                                       r"io_size_bytes 44 leaves it open: 2 tensors lack a size"
                                       r".*--input-spec serving_default_input_1_0:float32:"):
        open_mlf(path)
    capsys.readouterr()
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert "--input-spec" in err and "pass a Model Library Format" not in err
    assert len(err.strip().splitlines()) == 1
    # Without the params file no dtype is recorded anywhere.
    bare = _rewrite(entry, tmp_path / "bare-no-relay.tar", {
        "src/relay.txt": b"not relay at all\n", "parameters/default.params": None})
    with pytest.raises(MLFError, match=r"input 'serving_default_input_1_0': no dtype recorded "
                                       r"\(metadata.json lists none; the interface header declares "
                                       r"only void\*; relay.txt could not be read \(.*\); no other "
                                       r"tensor or weight records a dtype\); supply it with "
                                       r"--input-spec serving_default_input_1_0:DTYPE:SHAPE"):
        open_mlf(bare)


def test_input_spec_supplies_missing_facts_end_to_end(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _no_relay_v08(entry, tmp_path)
    specs = ("serving_default_input_1:0:float32:1x8", "output:float32:1x3")
    data = _cli_json(capsys, "info", str(path), *[a for s in specs for a in ("--input-spec", s)])
    mod = data["modules"]["default"]
    assert [(t["dtype"], t["shape"]) for t in mod["inputs"] + mod["outputs"]] == [
        ("float32", [1, 8]), ("float32", [1, 3])]
    # The server sees the facts too: generate hands it a copy whose metadata.json records them.
    _generate_build_run(entry, tmp_path, capsys, model=path, specs=specs)


def test_write_mlf_with_specs_records_the_facts(tmp_path: Path) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _no_relay_v08(entry, tmp_path)
    out = write_mlf_with_specs(path, ["serving_default_input_1_0:float32:1x8",
                                      "output:float32:1x3"], tmp_path / "fixed.tar")
    with tarfile.open(out) as tar:
        names = tar.getnames()
        meta = json.load(tar.extractfile("./metadata.json"))
    assert names[0] == "." and all(n.startswith("./") for n in names[1:])
    main_entry = meta["memory"]["functions"]["main"][0]
    assert main_entry["inputs"] == {"serving_default_input_1_0": {
        "size": 32, "dtype": "float32", "shape": [1, 8]}}
    with open_mlf(out) as lib:
        assert lib.module().inputs[0].shape == (1, 8)


@pytest.mark.parametrize("spec, message", [
    ("serving_default_input_1:0:int8:1x8", r"--input-spec says int8 but metadata.json records float32"),
    ("serving_default_input_1:0:float32:1x9", r"size 32 from metadata.json disagrees with 36"),
    ("nope:int8:1", r"names 'nope', which is no input or output"),
])
def test_input_spec_must_agree_with_the_authorities(tmp_path: Path, spec: str,
                                                    message: str) -> None:
    entry = _archive("tvm-0.11-float", tmp_path)
    with pytest.raises(MLFError, match=message):
        open_mlf(entry.path, input_specs=[spec])


def test_parse_input_spec() -> None:
    s = parse_input_spec("serving_default_input_1:0:int8:1x49x10x1")
    assert (s.name, s.dtype, s.shape, s.size_bytes) == (
        "serving_default_input_1:0", "int8", (1, 49, 10, 1), 490)
    assert parse_input_spec("scale:float32:").shape == ()
    for bad, msg in [("x:int8", "want NAME:DTYPE:SHAPE"), ("x:int7x:1", "unknown dtype"),
                     ("x:int8:1xa", "not D0xD1x")]:
        with pytest.raises(MLFError, match=msg):
            parse_input_spec(bad)


def test_params_reader_names_and_tolerance(tmp_path: Path) -> None:
    good = _write(tmp_path / "p.params", save_param_dict({"_param_1": np.zeros(3, np.int8)}))
    assert read_param_names(good) == ["_param_1"]
    assert read_param_names(_write(tmp_path / "short.params", good.read_bytes()[:30])) is None
    assert read_param_names(tmp_path / "missing.params") is None


def test_mlf_error_hint_fits_the_error() -> None:
    not_tar = format_error(MLFError("x.tar: not a readable tar archive (bad)"))
    assert "pass a Model Library Format .tar" in not_tar
    other = format_error(MLFError("m.tar: module 'default': something odd"))
    assert "pass a Model Library Format" not in other and other.count(";") == 1


def test_run_one_go_takes_input_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = _archive("tvm-0.8-float", tmp_path)
    path = _no_relay_v08(entry, tmp_path)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    np.save(tmp_path / "x.npy", x)
    data = _cli_json(capsys, "run", "--template", "host", "--model", str(path),
                     "--input-spec", "serving_default_input_1:0:float32:1x8",
                     "--input-spec", "output:float32:1x3",
                     "--input", f"serving_default_input_1:0={tmp_path / 'x.npy'}",
                     "--repeat", "1", "--number", "1")
    (want,) = entry.model.reference({"serving_default_input_1:0": x})
    np.testing.assert_allclose(np.array(data["outputs"]["output"], np.float32).reshape(1, 3),
                               want, rtol=1e-5, atol=1e-6)
    capsys.readouterr()
    assert main(["run", str(tmp_path), "--input-spec", "x:int8:1"]) == 2
    assert "--input-spec goes with --template/--model" in capsys.readouterr().err


def test_generate_notes_an_inferred_shape(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Without the Relay text a TVM 0.11 archive has dtypes and sizes but no shapes: generate
    uses the flat shapes and says so."""
    entry = _archive("tvm-0.11-float", tmp_path)
    path = _rewrite(entry, tmp_path / "no-relay.tar", {"src/default.relay": None})
    capsys.readouterr()
    assert main(["generate", "-t", "host", "-m", str(path), "--out", str(tmp_path / "prj")]) == 0
    err = capsys.readouterr().err
    assert ("note: input 'serving_default_input_1:0': shape [8] (flat): 32 bytes of float32, "
            "from metadata.json's size; the archive records no shape (--input-spec "
            "serving_default_input_1:0:float32:D0xD1x... overrides it)") in err
    # With the shapes supplied the same archive generates.
    _cli_json(capsys, "generate", "-t", "host", "-m", str(path), "--out", str(tmp_path / "prj2"),
              "--input-spec", "serving_default_input_1:0:float32:1x8",
              "--input-spec", "StatefulPartitionedCall_0:float32:1x3")


def test_external_pools_and_devices_are_recorded(tmp_path: Path) -> None:
    """A USMP build with a pool the caller provides (interface_c.cc EmitStruct workspace_pools,
    ..._WORKSPACE_POOL_SIZE) and a device context: _run takes them as extra arguments."""
    entry = _archive("tvm-0.13-float2", tmp_path)
    header = entry.files["codegen/host/include/tvmgen_default.h"].decode()
    extra = ('/*!\n * \\brief Device context pointers for TVM module "default" \n */\n'
             "struct tvmgen_default_devices {\n  void* ethos_u;\n};\n\n"
             '/*!\n * \\brief Workspace pool pointers for TVM module "default" \n */\n'
             "struct tvmgen_default_workspace_pools {\n  void* sram;\n};\n\n")
    header = header.replace("/*!\n * \\brief entrypoint", extra + "/*!\n * \\brief entrypoint")
    header = header.replace("#define TVMGEN_DEFAULT_WORKSPACE_SIZE 0\n",
                            "#define TVMGEN_DEFAULT_WORKSPACE_SIZE 0\n/*!\n * \\brief sram size"
                            ' for TVM module "default" \n */\n'
                            "#define TVMGEN_DEFAULT_SRAM_WORKSPACE_POOL_SIZE 4096\n")
    path = _rewrite(entry, tmp_path / "pools.tar",
                    {"codegen/host/include/tvmgen_default.h": header.encode()})
    with open_mlf(path) as lib:
        mod = lib.module()
        assert (mod.external_pools, mod.devices, mod.io_in_pools) == ({"sram": 4096}, ["ethos_u"],
                                                                       False)
    with open_mlf(entry.path) as lib:
        mod = lib.module()
        assert (mod.external_pools, mod.devices, mod.io_in_pools) == ({}, [], False)


def test_partitioned_relay_with_bound_weights(tmp_path: Path) -> None:
    """partition_for_cmsisnn binds the weights first: @main then has only the real inputs, and
    the partitioned functions (printed before it) carry their own parameters."""
    entry = _archive("tvm-0.12-int8", tmp_path)
    relay = ('#[version = "0.0.5"]\n'
             'def @tvmgen_default_cmsis_nn_main_0(%cmsis_nn_input: Tensor[(1, 6), int8], '
             'Inline=1, Compiler="cmsis-nn", global_symbol="tvmgen_default_cmsis_nn_main_0", '
             'Primitive=1) -> Tensor[(1, 4), int8] {\n  %cmsis_nn_input\n}\n\n'
             'def @main(%serving_default_input_1:0: Tensor[(1, 6), int8] /* ty=Tensor[(1, 6), '
             'int8] span=serving_default_input_1:0:0:0 */, output_tensor_names='
             '["StatefulPartitionedCall_0"]) -> Tensor[(1, 4), int8] {\n'
             '  @tvmgen_default_cmsis_nn_main_0(%serving_default_input_1:0) /* ty=Tensor[(1, 4), '
             'int8] */\n}\n\n#[metadata]\n{"root": 1, "nodes": [{"type_key": ""}]}\n')
    path = _rewrite(entry, tmp_path / "partitioned.tar", {"src/default.relay": relay.encode()})
    with open_mlf(path) as lib:
        mod = lib.module()
        assert [(t.name, t.shape) for t in mod.inputs] == [("serving_default_input_1:0", (1, 6))]
        assert [(t.name, t.shape) for t in mod.outputs] == [("StatefulPartitionedCall_0", (1, 4))]


def test_lowered_param_names_fall_back_to_the_header(tmp_path: Path) -> None:
    """Exports whose params file holds lowered names (p0, p1, ...) still lose the weights."""
    entry = _archive("tvm-0.8-float", tmp_path)
    lowered = {f"p{i}": a for i, a in enumerate(entry.model.params.values())}
    path = _rewrite(entry, tmp_path / "p0.tar", {"parameters/default.params":
                                                  save_param_dict(lowered)})
    with open_mlf(path) as lib:
        mod = lib.module()
        assert mod.param_names == ["p0", "p1", "p2", "p3"]
        assert [t.name for t in mod.inputs] == ["serving_default_input_1:0"]


def test_tflite_names_with_slash_and_colon(tmp_path: Path) -> None:
    from mlf_factory import Module, Tensor, make_mlf

    mod = Module(inputs=[Tensor("model/input_1:0", "int8", (1, 5))],
                 outputs=[Tensor("StatefulPartitionedCall_0", "int8", (1, 2))])
    path = make_mlf(tmp_path / "slash.tar", 6, [mod])
    with open_mlf(path) as lib:
        (t,) = lib.module().inputs
        assert (t.name, t.c_name, t.dtype, t.shape) == (
            "model/input_1:0", "model_input_1_0", "int8", (1, 5))


# --- the archives TVM users published (world-*) ---------------------------------------------------


def _members(entry: CorpusArchive) -> list[str]:
    with tarfile.open(entry.path) as tar:
        return tar.getnames()


def test_world_2021_keras_dense_archive_is_as_published(corpus_dir: Path) -> None:
    """gromero/sine_aot's model.tar (TVM main, 2021-12-14, MLF 5), as that archive holds it:
    metadata.json, the header and relay.txt are byte for byte the published ones (only the
    weights, and so the params file and the C, differ)."""
    entry = _archive("world-2021-keras-dense", corpus_dir)
    with tarfile.open(entry.path) as tar:
        members = tar.getmembers()
    assert [(m.name, m.mode) for m in members] == [
        (".", 0o700), ("./codegen", 0o775), ("./codegen/host", 0o775),
        ("./codegen/host/include", 0o775), ("./codegen/host/include/tvmgen_default.h", 0o664),
        ("./codegen/host/src", 0o775), ("./codegen/host/src/default_lib0.c", 0o664),
        ("./metadata.json", 0o664), ("./parameters", 0o775),
        ("./parameters/default.params", 0o664), ("./src", 0o775), ("./src/relay.txt", 0o664)]
    assert members[0].mtime == 1639499404.7125788  # PAX keeps the fraction
    meta = json.loads(entry.files["metadata.json"])
    assert sorted(meta) == ["executors", "export_datetime", "memory", "model_name", "style",
                            "target", "version"] and meta["version"] == 5
    (main_entry,) = meta["memory"]["functions"]["main"]
    assert main_entry == {"constants_size_bytes": 1284, "device": 1, "io_size_bytes": 8,
                          "workspace_size_bytes": 1184}  # no inputs, no outputs
    assert [(f["function_name"], f["workspace"][0]["workspace_size_bytes"])
            for f in meta["memory"]["functions"]["operator_functions"]] == [
        ("tvmgen_default_fused_reshape_1", 0), ("tvmgen_default_fused_reshape", 0),
        ("tvmgen_default_fused_nn_dense_add_nn_relu", 96),
        ("tvmgen_default_fused_nn_dense_add_nn_relu_1", 1056),
        ("tvmgen_default_fused_nn_dense_add", 80)]
    header = entry.files["codegen/host/include/tvmgen_default.h"].decode()
    assert "struct tvmgen_default_outputs {\n  void* output;\n};" in header
    assert "size (in bytes)" not in header and "int32_t tvmgen_default_run(\n" in header
    lib0 = entry.files["codegen/host/src/default_lib0.c"].decode()
    assert "TVM_DLL int32_t tvmgen_default_run_model(void* input, void* output) {" in lib0
    assert "tvmgen_default_run(" not in lib0 and "__tvm_param__p5" in lib0
    relay = entry.files["src/relay.txt"].decode()
    assert relay.startswith("def @main(%dense_4_input: Tensor[(1, 1), float32], %v_param_1: "
                            "Tensor[(16, 1), float32], ")
    assert "%v_param_6: Tensor[(1), float32]) {\n" in relay and "->" not in relay
    assert "ty=" not in relay and "/*" not in relay
    assert relay.endswith("  %9 = nn.dense(%8, %v_param_5, units=1);\n"
                          "  nn.bias_add(%9, %v_param_6)\n}\n")
    assert read_param_names(_write(corpus_dir / "w21.params",
                                   entry.files["parameters/default.params"])) == [
        "p0", "p1", "p4", "p2", "p3", "p5"]


def test_world_2023_cortex_m7_archive_is_as_published(corpus_dir: Path) -> None:
    """patschmidt2/letscope_demo_stm's model.tar (TVM 0.13.dev0, 2023-09-22, MLF 7)."""
    entry = _archive("world-2023-cortex-m7-int8", corpus_dir)
    names = _members(entry)
    assert names[:13] == [
        ".", "./codegen", "./codegen/host", "./codegen/host/include",
        "./codegen/host/include/tvmgen_default.h", "./codegen/host/src",
        "./codegen/host/src/default_lib0.c", "./codegen/host/src/default_lib1.c",
        "./metadata.json", "./parameters", "./parameters/default.params", "./src",
        "./src/default.relay"]
    assert "./runtime" in names and any(n.startswith("./templates/") for n in names)
    assert names[-2:] == ["samples/dummy_input.h", "samples/expected_output.h"]
    meta = json.loads(entry.files["metadata.json"])
    mod = meta["modules"]["default"]
    assert meta["version"] == 7 and mod["target"] == [
        "c -keys=arm_cpu,cpu -march=armv7e-m -mcpu=cortex-m7 -model=stm32f746xx"]
    assert mod["external_dependencies"][0]["version_spec"] == "0.13.dev0"
    (main_entry,) = mod["memory"]["functions"]["main"]
    assert main_entry["outputs"] == {"StatefulPartitionedCall_0": {"dtype": "int8", "size": 1}}
    assert main_entry["inputs"] == {"serving_default_input_1:0": {"dtype": "int8", "size": 5}}
    assert main_entry["io_size_bytes"] > 6 and main_entry["constants_size_bytes"] == 0
    assert read_param_names(_write(corpus_dir / "w23.params",
                                   entry.files["parameters/default.params"])) == []
    lib0 = entry.files["codegen/host/src/default_lib0.c"].decode()
    assert "tvmgen_default___tvm_main__(void* serving_default_input_1_0,void* output0);" in lib0
    lib1 = entry.files["codegen/host/src/default_lib1.c"].decode()
    assert "#include <arm_acle.h>" in lib1 and "__smlad(" in lib1
    assert re.search(r'#define __pkhbt\(ARG1,ARG2,ARG3\) __extension__ \(\{[^\n]*__asm\("pkhbt',
                     lib1)
    relay = entry.files["src/default.relay"].decode()
    assert relay.startswith("def @main(%serving_default_input_1:0: Tensor[(1, 5), int8] "
                            "/* span=serving_default_input_1:0:0:0 */, ")
    assert 'output_tensor_names=["StatefulPartitionedCall_0"]) {\n' in relay
    assert "span=" in relay and "ty=" not in relay and "->" not in relay
    assert [line.split(" = ")[1].split("(")[0] for line in relay.splitlines()
            if re.match(r"  %\d+ = ", line)] == [
        "reshape", "qnn.dense", "nn.bias_add", "qnn.requantize", "qnn.dequantize", "sigmoid",
        "qnn.quantize"] * 2 + ["reshape", "qnn.dense", "nn.bias_add", "qnn.requantize",
                               "qnn.dequantize", "sigmoid"]
    assert re.search(r"%15 = qnn\.dense\(%14, %v_param_5, .*units=1, out_dtype=\"int32\"\)",
                     relay)
    assert 'rounding="UPWARD", compute_dtype="int64", out_dtype="int8"' in relay
    assert re.search(r"\n  qnn\.quantize\(%19, .*out_dtype=\"int8\"\) /\* span=[^*]*\*/\n}\n$",
                     relay)


def test_world_2023_samples_are_the_networks_pair(corpus_dir: Path) -> None:
    """The appended samples/*.h hold one input and the output numpy computes for it."""
    entry = _archive("world-2023-cortex-m7-int8", corpus_dir)
    with tarfile.open(entry.path) as tar:
        text = {n: tar.extractfile(n).read().decode() for n in
                ("samples/dummy_input.h", "samples/expected_output.h")}
    values = {n: [int(v) for v in re.search(r"\{([^}]*)\}", t).group(1).split(",") if v.strip()]
              for n, t in text.items()}
    x = np.array(values["samples/dummy_input.h"], np.int8).reshape(1, 5)
    (y,) = entry.model.reference({"serving_default_input_1:0": x})
    assert values["samples/expected_output.h"] == y.reshape(-1).tolist()


def test_world_archives_infer_what_they_leave_out(corpus_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """info names the facts it inferred, one note per tensor, and needs no --input-spec."""
    old = _cli_json(capsys, "info", str(_archive("world-2021-keras-dense", corpus_dir).path))
    mod = old["modules"]["default"]
    assert mod["run_function"] == "tvmgen_default_run_model"
    assert [(t["name"], t["dtype"], t["shape"], t["note"]) for t in mod["inputs"]] == [
        ("dense_4_input", "float32", [1, 1], None)]
    assert [(t["name"], t["dtype"], t["shape"], t["size_bytes"], t["note"])
            for t in mod["outputs"]] == [
        ("output", "float32", [1, 1], 4,
         "dtype and shape float32 [1, 1] inferred through the body of @main in relay.txt, whose "
         "result is nn.bias_add (its 4 bytes agree with io_size_bytes 8)")]
    new = _cli_json(capsys, "info", str(_archive("world-2023-cortex-m7-int8", corpus_dir).path))
    mod = new["modules"]["default"]
    assert [(t["name"], t["dtype"], t["shape"], t["note"]) for t in mod["inputs"]] == [
        ("serving_default_input_1:0", "int8", [1, 5], None)]
    assert [(t["name"], t["dtype"], t["shape"], t["size_bytes"], t["note"])
            for t in mod["outputs"]] == [
        ("StatefulPartitionedCall_0", "int8", [1, 1], 1,
         "shape [1, 1] inferred through the body of @main in default.relay, whose result is "
         "qnn.quantize")]


def test_world_2021_without_relay_falls_back_to_the_sizes(corpus_dir: Path, tmp_path: Path) -> None:
    """With its Relay text unreadable the 2021 archive still runs: every weight is float32 (the
    params file), so the tensors are; the input's and output's 4 bytes each are not recorded,
    but the Relay parameter list still gives the input (1, 1), and io_size_bytes 8 leaves 4
    bytes for the output, whose flat shape is then [1]."""
    entry = _archive("world-2021-keras-dense", corpus_dir)
    relay = entry.files["src/relay.txt"].decode()
    broken = relay.replace("  nn.bias_add(%9, %v_param_6)\n}", "  nn.bias_add(%9, %v_param_6")
    path = _rewrite(entry, tmp_path / "no-body.tar", {"src/relay.txt": broken.encode()})
    with open_mlf(path) as lib:
        (x,), (y,) = lib.module().inputs, lib.module().outputs
        assert (x.dtype, x.shape, x.note) == ("float32", (1, 1), None)
        assert (y.dtype, y.size_bytes, y.shape) == ("float32", 4, (1,))
        assert y.note == ("dtype float32: every input and every Relay parameter and every weight "
                          "of the model that records a dtype is float32; 4 bytes: what "
                          "io_size_bytes 8 leaves after the other inputs and outputs; shape [1] "
                          "(flat): 4 bytes of float32, from io_size_bytes; the archive records "
                          "no shape")

"""Model Library Format parsing: versions 5-7, AOT and graph, tar and directory (spec §3)."""

from __future__ import annotations

import json
import tarfile

import pytest
from mlf_factory import Module, Tensor, interface_header, make_mlf, mlf_files, write_dir, write_tar

from project_api.archive.facts import sanitize_c_name, tensor_size_bytes
from project_api.archive.mlf import open_mlf
from project_api.errors import MLFError

QUANT = {"scale": [0.0078125], "zero_point": [-128]}


def _module(executor: str = "aot", name: str = "default") -> Module:
    # Positional order b, a:0 differs from metadata.json's sorted order (a:0, b) on purpose.
    return Module(
        name=name,
        inputs=[Tensor("b", "int8", (1, 3), QUANT), Tensor("a:0", "float32", (2, 2))],
        outputs=[Tensor("output", "int8", (1, 5), QUANT)],
        executor=executor,
        workspace_size_bytes=1024,
        constants_size_bytes=40,
    )


@pytest.mark.parametrize("as_dir", [False, True], ids=["tar", "dir"])
@pytest.mark.parametrize("executor", ["aot", "graph"])
@pytest.mark.parametrize("version", [5, 6, 7])
def test_versions_executors_and_containers(tmp_path, version, executor, as_dir):
    flat = version == 5
    path = make_mlf(tmp_path / ("mlf" if as_dir else "mlf.tar"), version, [_module(executor)],
                    as_dir=as_dir, flat_api=flat, extended=version == 7)
    with open_mlf(path) as lib:
        assert lib.version == version
        assert list(lib.modules) == ["default"]
        mod = lib.module()
        assert mod.executors == [executor]
        assert mod.style == "full-model"
        assert mod.workspace_size_bytes == 1024
        assert mod.constants_size_bytes == 40
        assert mod.io_size_bytes == 3 + 16 + 5
        assert [t.name for t in mod.inputs] == ["b", "a:0"]
        assert [t.c_name for t in mod.inputs] == ["b", "a_0"]
        assert [(t.dtype, t.shape, t.size_bytes) for t in mod.inputs] == [
            ("int8", (1, 3), 3), ("float32", (2, 2), 16)]
        assert [(t.name, t.dtype, t.shape, t.size_bytes) for t in mod.outputs] == [
            ("output", "int8", (1, 5), 5)]
        assert [p.name for p in mod.sources] == ["default_lib0.c", "default_lib1.c"]
        assert mod.params_path is not None and mod.params_path.name == "default.params"
        if flat:
            assert mod.run_function == "tvmgen_default_run_model"
            assert mod.run_api == "flat"
            assert mod.interface_header is None
            assert mod.relay_path.name == "relay.txt"
        else:
            assert mod.run_function == "tvmgen_default_run"
            assert mod.run_api == "struct"
            assert mod.interface_header.name == "tvmgen_default.h"
            assert mod.relay_path.name == "default.relay"
        if executor == "graph":
            assert mod.graph_json_path.name == ("graph.json" if version == 5 else "default.graph")
            json.loads(mod.graph_json_path.read_text())
        else:
            assert mod.graph_json_path is None
        # Quantization is only known from our emitter's extended v7 metadata.
        assert mod.inputs[0].quantization == (QUANT if version == 7 else None)
        assert lib.is_archive is not as_dir
        assert not lib.has_bundled_runtime


def test_v7_metadata_only_no_header_no_relay(tmp_path):
    """TVM v7 without interface header or Relay: metadata order, sizes and dtypes; the shapes
    are flat, from the sizes, and each says so in its note."""
    path = make_mlf(tmp_path / "m.tar", 7, [_module()], header=False, relay=False)
    with open_mlf(path) as lib:
        mod = lib.module()
        # No positional source but metadata.json, whose keys TVM sorted.
        assert [t.name for t in mod.inputs] == ["a:0", "b"]
        assert [(t.dtype, t.size_bytes, t.shape) for t in mod.inputs] == [
            ("float32", 16, (4,)), ("int8", 3, (3,))]
        assert mod.inputs[0].note == ("shape [4] (flat): 16 bytes of float32, from "
                                      "metadata.json's size; the archive records no shape")
        # lib1.c still defines the struct API.
        assert mod.run_function == "tvmgen_default_run"


def test_v7_extended_metadata_gives_shapes_without_relay(tmp_path):
    path = make_mlf(tmp_path / "m.tar", 7, [_module()], relay=False, extended=True)
    with open_mlf(path) as lib:
        mod = lib.module()
        assert [t.shape for t in mod.inputs] == [(1, 3), (2, 2)]
        assert mod.input("a:0").quantization is None
        assert mod.input("b").quantization == QUANT
        assert mod.input(1).c_name == "a_0"
        assert mod.output("output").size_bytes == 5


def test_v6_header_only_gives_names_and_sizes(tmp_path):
    """v6 has no per-tensor metadata; without Relay text the dtype is a missing fact."""
    path = make_mlf(tmp_path / "m.tar", 6, [_module()], relay=False)
    with pytest.raises(MLFError, match=r"input 'b': no dtype recorded"):
        open_mlf(path)


def test_v5_without_relay_names_missing_dtype(tmp_path):
    path = make_mlf(tmp_path / "m.tar", 5, [_module()], flat_api=True, relay=False)
    # Nothing records the tensors at all: that must be an error naming where we looked.
    with pytest.raises(MLFError, match=r"recorded nowhere.*src/relay\.txt"):
        open_mlf(path)


def test_multiple_modules(tmp_path):
    mods = [_module("aot", "mod1"), Module("mod2", executor="graph",
                                           inputs=[Tensor("data", "int8", (1, 4, 4, 3))],
                                           outputs=[Tensor("output", "int32", (1, 8))])]
    path = make_mlf(tmp_path / "m.tar", 7, mods, runtime=True)
    with open_mlf(path) as lib:
        assert list(lib.modules) == ["mod1", "mod2"]
        assert lib.has_bundled_runtime
        m1, m2 = lib.module("mod1"), lib.module("mod2")
        assert [p.name for p in m1.sources] == ["mod1_lib0.c", "mod1_lib1.c"]
        assert [p.name for p in m2.sources] == ["mod2_lib0.c", "mod2_lib1.c"]
        assert m1.interface_header.name == "tvmgen_mod1.h"
        assert m2.run_function == "tvmgen_mod2_run"
        assert m2.inputs[0].size_bytes == 48 and m2.outputs[0].size_bytes == 32
        assert m2.executors == ["graph"]
        with pytest.raises(MLFError, match="holds 2 modules"):
            lib.module()
        with pytest.raises(MLFError, match="no module 'nope'.*mod1, mod2"):
            lib.module("nope")


def test_tuple_outputs_from_relay_are_named_output0_1(tmp_path):
    mod = Module(outputs=[Tensor("output0", "float32", (1, 2)), Tensor("output1", "int8", (3,))])
    path = make_mlf(tmp_path / "m.tar", 5, [mod], flat_api=True)
    with open_mlf(path) as lib:
        outs = lib.module().outputs
        assert [(t.name, t.dtype, t.shape, t.size_bytes) for t in outs] == [
            ("output0", "float32", (1, 2), 8), ("output1", "int8", (3,), 3)]


def test_v5_relay_text_variants(tmp_path):
    """Hand-written TVM 0.8-style relay.txt: scalar, 1-D shapes, names with ':', /* ty */ notes."""
    files = mlf_files(5, [Module(inputs=[Tensor("in", "float32", (1, 1))],
                                  outputs=[Tensor("output", "float32", (1, 1))])], flat_api=True)
    files["src/relay.txt"] = (
        b'#[version = "0.0.5"]\n'
        b"def @main(%serving_default_input:0: Tensor[(1, 10), int8], %scale: float32,\n"
        b"          %bias: Tensor[(10), int32]) -> (Tensor[(1, 10), int8], (Tensor[(4), uint8],)) {\n"
        b"  %0 = qnn.dense(%serving_default_input:0, meta[relay.Constant][0] /* ty=Tensor[(10, 10), int8] */, "
        b"1 /* ty=int32 */);\n"
        b"  (%0, (%1,))\n"
        b"}\n"
    )
    meta = json.loads(files["metadata.json"])
    meta["memory"]["functions"]["main"][0]["io_size_bytes"] = 10 + 4 + 40 + 10 + 4
    files["metadata.json"] = json.dumps(meta).encode()
    with open_mlf(write_tar(tmp_path / "m.tar", files)) as lib:
        mod = lib.module()
        assert [(t.name, t.c_name, t.dtype, t.shape, t.size_bytes) for t in mod.inputs] == [
            ("serving_default_input:0", "serving_default_input_0", "int8", (1, 10), 10),
            ("scale", "scale", "float32", (), 4),
            ("bias", "bias", "int32", (10,), 40),
        ]
        assert [(t.name, t.shape) for t in mod.outputs] == [("output0", (1, 10)), ("output1", (4,))]
        assert mod.run_function == "tvmgen_default_run_model"


def test_header_struct_order_wins_over_metadata_order(tmp_path):
    path = make_mlf(tmp_path / "m.tar", 7, [_module()], relay=False)
    with open_mlf(path) as lib:
        mod = lib.module()
        header = mod.interface_header.read_text()
        assert header.index("void* b;") < header.index("void* a_0;")
        assert [t.c_name for t in mod.inputs] == ["b", "a_0"]
        assert [t.name for t in mod.inputs] == ["b", "a:0"]  # mapped back through metadata


def test_header_macro_size_disagreeing_with_metadata_is_an_error(tmp_path):
    mod = _module()
    files = mlf_files(7, [mod])
    files["codegen/host/include/tvmgen_default.h"] = interface_header(mod).replace(
        "TVMGEN_DEFAULT_B_SIZE 3", "TVMGEN_DEFAULT_B_SIZE 4").encode()
    with pytest.raises(MLFError, match=r"input 'b': size 3 from metadata.json disagrees with 4"):
        open_mlf(write_tar(tmp_path / "m.tar", files))


def test_shape_dtype_size_mismatch_is_an_error(tmp_path):
    files = mlf_files(7, [_module()], extended=True)
    meta = json.loads(files["metadata.json"])
    meta["modules"]["default"]["memory"]["functions"]["main"][0]["inputs"]["b"]["size"] = 6
    files["metadata.json"] = json.dumps(meta).encode()
    files["codegen/host/include/tvmgen_default.h"] = files[
        "codegen/host/include/tvmgen_default.h"].replace(b"B_SIZE 3", b"B_SIZE 6")
    with pytest.raises(MLFError, match=r"disagrees with 3 from shape \[1, 3\] x int8"):
        open_mlf(write_tar(tmp_path / "m.tar", files))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda m: m.update(version=8), "version 8 is not supported"),
        (lambda m: m.update(version=4), "version 4 is not supported"),
        (lambda m: m.pop("version"), "no integer \"version\""),
        (lambda m: m["modules"]["default"].update(executors=["vm"]), "unknown executor"),
        (lambda m: m["modules"]["default"]["memory"]["functions"]["main"][0]["inputs"]["b"]
         .update(dtype="int7x"), "unknown dtype 'int7x'"),
        (lambda m: m["modules"]["default"]["memory"]["functions"]["main"][0]["inputs"]["b"]
         .update(quantization={"scale": [1.0], "zero_point": []}), "zero_point"),
        (lambda m: m["modules"]["default"]["memory"]["functions"]["main"][0]["inputs"]
         .update(extra={"size": 1, "dtype": "int8"}), r"lists input\(s\) \['extra'\]"),
        (lambda m: m.update(modules={}), "non-empty object"),
    ],
)
def test_invalid_metadata_is_rejected(tmp_path, mutate, message):
    files = mlf_files(7, [_module()])
    meta = json.loads(files["metadata.json"])
    mutate(meta)
    files["metadata.json"] = json.dumps(meta).encode()
    with pytest.raises(MLFError, match=message):
        open_mlf(write_tar(tmp_path / "m.tar", files))


def test_operator_style_is_rejected(tmp_path):
    meta = {"version": 7, "model_name": "add", "export_datetime": "2023-01-01 00:00:00Z",
            "memory": {"add": [{"size_bytes": 2, "shape": [2], "dtype": "int8",
                                "input_binding": "a"}]},
            "target": ["c"], "executors": [], "style": "operator"}
    path = write_tar(tmp_path / "op.tar", {"metadata.json": json.dumps(meta).encode(),
                                           "codegen/host/src/lib0.c": b"int x;\n"})
    with pytest.raises(MLFError, match="operator-style"):
        open_mlf(path)


def test_not_an_mlf(tmp_path):
    with pytest.raises(MLFError, match="no such file"):
        open_mlf(tmp_path / "missing.tar")
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"this is not a tar file" * 50)
    with pytest.raises(MLFError, match="not a readable tar"):
        open_mlf(junk)
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    with pytest.raises(MLFError, match="no metadata.json"):
        open_mlf(empty_dir)
    bad_json = write_dir(tmp_path / "badjson", {"metadata.json": b"{not json"})
    with pytest.raises(MLFError, match="not valid JSON"):
        open_mlf(bad_json)


def test_temporary_extraction_is_removed_on_close(tmp_path):
    path = make_mlf(tmp_path / "m.tar", 7, [_module()])
    lib = open_mlf(path)
    root = lib.root
    assert (root / "metadata.json").is_file()
    lib.close()
    assert not root.exists()


def test_extract_dir_keeps_files(tmp_path):
    path = make_mlf(tmp_path / "m.tar", 7, [_module()])
    with open_mlf(path, extract_dir=tmp_path / "x") as lib:
        assert lib.root == tmp_path / "x"
    assert (tmp_path / "x" / "metadata.json").is_file()  # caller's directory is the caller's


def test_tar_written_by_tvm_layout_has_dot_root(tmp_path):
    """The factory writes TVM's layout ('.' then './...'), which must round-trip."""
    path = make_mlf(tmp_path / "m.tar", 7, [_module()])
    with tarfile.open(path) as tar:
        names = tar.getnames()
    assert names[0] == "." and "./metadata.json" in names
    assert all(n == "." or n.startswith("./") for n in names)


def test_size_helpers_match_tvm_rule():
    assert tensor_size_bytes((1, 96, 96, 1), "int8") == 9216
    assert tensor_size_bytes((3,), "float32") == 12
    assert tensor_size_bytes((), "float32") == 4
    assert tensor_size_bytes((5,), "bool") == 5
    assert sanitize_c_name("serving_default_input:0") == "serving_default_input_0"


def test_header_member_case_differences_are_tolerated(tmp_path):
    mod = Module(inputs=[Tensor("Input", "int8", (4,))], outputs=[Tensor("output", "int8", (4,))])
    files = mlf_files(7, [mod], extended=True)
    files["codegen/host/include/tvmgen_default.h"] = files[
        "codegen/host/include/tvmgen_default.h"].replace(b"void* Input;", b"void* input;")
    with open_mlf(write_tar(tmp_path / "m.tar", files)) as lib:
        (t,) = lib.module().inputs
        assert (t.name, t.c_name, t.shape) == ("Input", "input", (4,))


@pytest.mark.parametrize("version", [6, 7])
def test_single_named_output_is_matched_to_relay_by_position(tmp_path, version):
    # TVM names a single output from output_tensor_names (TFLite's "Identity"), but its Relay text
    # only gives the type; the Relay facts must be matched by position, not by name.
    mod = Module(inputs=[Tensor("input_1", "int8", (1, 4))],
                 outputs=[Tensor("Identity", "int8", (1, 3))])
    path = make_mlf(tmp_path / "m.tar", version, [mod])
    with open_mlf(path) as lib:
        (out,) = lib.module().outputs
        assert (out.name, out.c_name, out.dtype, out.shape, out.size_bytes) == (
            "Identity", "Identity", "int8", (1, 3), 3)


def test_relay_output_count_disagreeing_with_header_is_ignored(tmp_path, caplog):
    """metadata.json and the header are the authority: a Relay text that returns a different
    number of outputs only loses its shapes (a debug line), it no longer rejects the archive."""
    mod = Module(outputs=[Tensor("a", "int8", (2,)), Tensor("b", "int8", (2,))])
    files = mlf_files(7, [mod])
    files["src/default.relay"] = files["src/default.relay"].replace(
        b"-> (Tensor[(2), int8], Tensor[(2), int8])", b"-> Tensor[(2), int8]")
    path = write_tar(tmp_path / "m.tar", files)
    with caplog.at_level("DEBUG", logger="project_api.archive"), open_mlf(path) as lib:
        outs = lib.module().outputs
        assert [(t.name, t.dtype, t.size_bytes, t.shape) for t in outs] == [
            ("a", "int8", 2, (2,)), ("b", "int8", 2, (2,))]
        assert all("(flat)" in t.note for t in outs)
    assert "returns 1 output(s) but the module has 2" in caplog.text

"""Graph-executor archives of TVM 0.8-0.15 (tests/tvm_graph_corpus.py): read, lowered to static C
and run on the host template against numpy; what cannot run is refused in one line.

Every fact asserted about an archive comes from the corpus (what TVM wrote), the outputs from
numpy computing the same network, the memory figures from the graph's own storage ids, JSON and
params file.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from tvm_corpus import save_param_dict
from tvm_graph_corpus import GRAPH_CORPUS, GraphArchive, build_graph_archive

from project_api.archive.mlf import open_mlf
from project_api.cli import main
from project_api.errors import MLFError


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("graph-corpus")


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    rc = main([*argv, "--json", "-q"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def _feeds(entry: GraphArchive, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in entry.net.inputs:
        if t.dtype == "int8":
            feeds[t.name] = rng.integers(-128, 128, t.shape).astype(np.int8)
        else:
            feeds[t.name] = rng.uniform(-1.5, 1.5, t.shape).astype(np.float32)
    return feeds


def _rewrite(entry: GraphArchive, dest: Path, changes: dict[str, bytes]) -> Path:
    with tarfile.open(entry.path) as src, tarfile.open(dest, "w") as out:
        for m in src.getmembers():
            rel = m.name[2:] if m.name.startswith("./") else m.name
            if rel in changes:
                m.size = len(changes[rel])
                out.addfile(m, io.BytesIO(changes[rel]))
            elif m.isfile():
                out.addfile(m, src.extractfile(m))
            else:
                out.addfile(m)
    return dest


def _check(got: np.ndarray, want: np.ndarray) -> None:
    g = got.reshape(want.shape)
    assert g.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(g, want)


def _run_cli(entry: GraphArchive, prj: Path, work: Path, capsys, seed: int,
             model: Path | None = None) -> None:
    """generate, build, run: every output equal to numpy's."""
    _cli_json(capsys, "generate", "--template", "host", "--model", str(model or entry.path),
              "--out", str(prj))
    _cli_json(capsys, "build", str(prj))
    feeds = _feeds(entry, seed)
    args = []
    for i, t in enumerate(entry.net.inputs):
        np.save(work / f"in{i}.npy", feeds[t.name])
        args += ["--input", f"{t.name}={work / f'in{i}.npy'}"]
    out = work / "out.npz"
    _cli_json(capsys, "run", str(prj), *args, "--output", str(out), "--force", "--repeat", "1",
              "--number", "1")
    got = np.load(out)
    want = entry.net.reference(feeds)
    assert len(got.files) == len(want) and all(np.count_nonzero(w) for w in want)
    with open_mlf(prj / "model.tar") as lib:
        c_names = [t.c_name for t in lib.module(entry.release.mod).outputs]
    for c, w in zip(c_names, want, strict=True):
        _check(got[c], w)


# --- what TVM wrote ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", GRAPH_CORPUS)
def test_archive_is_what_the_release_wrote(key: str, corpus_dir: Path) -> None:
    entry = build_graph_archive(key, corpus_dir)
    r = entry.release
    with tarfile.open(entry.path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    # _make_tar: the temp folder added as ".", sorted depth first, root owner; no ./runtime.
    assert names[0] == "." and names == sorted(names, key=lambda n: n.split("/"))
    assert all((m.uid, m.uname) == (0, "root") for m in members)
    assert not any(n.startswith(("./runtime", "./templates", "./codegen/host/include"))
                   for n in names)
    graph_member = ("./executor-config/graph/graph.json" if r.mlf_version == 5
                    else f"./executor-config/graph/{r.mod}.graph")
    assert graph_member in names
    assert (f"./src/{r.mod}.relay" if r.mlf_version == 7 else "./src/relay.txt") in names
    meta = json.loads(entry.files["metadata.json"])
    assert entry.files["metadata.json"].decode() == json.dumps(meta, indent=2, sort_keys=True)
    mod_meta = meta if r.mlf_version == 5 else meta["modules"][r.mod]
    assert mod_meta["executors"] == ["graph"] and meta["version"] == r.mlf_version
    text = entry.files[entry.graph_member].decode()
    graph = json.loads(text)
    # dmlc::JSONWriter: ", " before each line break, two spaces per level, no final newline;
    # node attrs and graph attrs in libstdc++'s unordered_map order.
    assert text.startswith('{\n  "nodes": [\n    {\n      "op": "null", \n')
    assert text.endswith("\n}") and not text.endswith("\n\n}")
    assert list(graph) == ["nodes", "arg_nodes", "heads", "attrs", "node_row_ptr"]
    assert list(graph["attrs"]) == ["dltype", "device_index", "storage_id", "shape"]
    assert set(graph["attrs"]["device_index"][1]) == {1}
    for node in graph["nodes"]:
        if node["op"] == "tvm_op":
            assert list(node["attrs"]) == ["num_outputs", "num_inputs", "flatten_data",
                                           "func_name", "hash"]
            assert node["attrs"]["flatten_data"] == "0"
            assert re.fullmatch(r"[0-9a-f]{16}", node["attrs"]["hash"])
        else:
            assert node == {"op": "null", "name": node["name"], "inputs": []}
    n_entries = graph["node_row_ptr"][-1]
    row = "[" + ", ".join(map(str, graph["attrs"]["storage_id"][1])) + "]"
    assert (row in text) == (n_entries <= 10)  # numbers on one line up to 10 of them
    # _build_sid_map: one entry per storage id, first seen first.
    sids = graph["attrs"]["storage_id"][1]
    assert [e["storage_id"] for e in mod_meta["memory"]["sids"]] == list(dict.fromkeys(sids))
    lib0 = entry.files[f"codegen/host/src/{r.mod}_lib0.c"].decode()
    assert lib0.startswith("#include <tvm/runtime/crt/module.h>\n") and lib0.endswith("}\n;")
    assert ("void* resource_handle);" in lib0) == (r.tvm != "0.8")
    count = re.search(r'_tvm_func_registry = \{\n    "(\\[0-7]{3})+', lib0).group(0)
    assert count.count("\\") == (1 if r.tvm == "0.8" else 2)  # 1-byte count in 0.8, then 2
    lib1 = entry.files[entry.ops_member].decode()
    assert lib1.startswith(f"// tvm target: {r.target}\n#define TVM_EXPORTS\n")
    assert ("tvmgen_" + r.mod + "_get_c_metadata\\000" in lib0) == (r.tvm in ("0.9", "0.10", "0.11"))
    assert ("void* arg_type_ids" in lib1) == (r.tvm == "0.8")
    assert ("_lookup_linked_param" in lib1) == (r.params == "lookup")
    params = entry.files[f"parameters/{r.mod}.params"]
    assert (len(params) == 32) == (r.params == "fused")  # the empty dict: magics and counts


@pytest.mark.parametrize("key", GRAPH_CORPUS)
def test_info_takes_types_and_shapes_from_the_graph(key: str, corpus_dir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    entry = build_graph_archive(key, corpus_dir)
    r, net = entry.release, entry.net
    data = _cli_json(capsys, "info", str(entry.path))
    mod = data["modules"][r.mod]
    assert [(t["name"], t["dtype"], t["shape"]) for t in mod["inputs"]] == [
        (t.name, t.dtype, list(t.shape)) for t in net.inputs]
    # Outputs: Relay's output_tensor_names from 0.9; TVM 0.8 names them output / output<i>.
    want_names = (net.output_tensor_names if r.output_tensor_names_attr else
                  ["output"] if len(net.outputs) == 1
                  else [f"output{i}" for i in range(len(net.outputs))])
    assert [(t["name"], t["dtype"], t["shape"]) for t in mod["outputs"]] == [
        (n, t.dtype, list(t.shape)) for n, t in zip(want_names, net.outputs, strict=True)]
    assert all(t["note"] is None for t in mod["inputs"] + mod["outputs"])
    graph = mod["graph"]
    assert graph["func_names"] == list(dict.fromkeys(
        f"tvmgen_{r.mod}_{op.func}" for op in net.ops if op.func != "__nop"))
    assert graph["params"] == ([] if r.params == "fused" else list(net.params))
    assert graph["linked_params"] == ({str(net.sids["p0"]): "__tvm_param__p0"}
                                      if r.params == "lookup" else {})
    assert set(graph["func_names"]) <= set(graph["registry"])


#: The lowered pool of each network (bytes): its storage ids not bound to an input, output or
#: parameter, each at 64-byte alignment (worked out by hand from the networks' storage ids).
POOL_BYTES = {"sine": 64 + 64, "multi": 64, "int8": 64, "two": 0, "fused": 64}


@pytest.mark.parametrize("key", GRAPH_CORPUS)
def test_memory_beside_tvms_graph_executor(key: str, corpus_dir: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    entry = build_graph_archive(key, corpus_dir)
    r, net = entry.release, entry.net
    # TVM's executor: one buffer per storage id (the largest entry, 4-byte rounded), the JSON
    # it parses, the params blob it loads (linked parameters need none).
    sizes: dict[int, int] = {}
    for name, sid in net.sids.items():
        t = net.values[name]
        sizes[sid] = max(sizes.get(sid, 0), int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize)
    storage = sum((n + 3) // 4 * 4 for n in sizes.values())
    json_bytes = len(entry.files[entry.graph_member])
    params = 0 if r.params == "lookup" else len(entry.files[f"parameters/{r.mod}.params"])
    capsys.readouterr()
    assert main(["info", str(entry.path)]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "TVM's graph executor" in x)
    assert f"pool {POOL_BYTES[net.kind]} +" in line
    assert (f"vs TVM's graph executor {storage + json_bytes + params} B (storage {storage} + "
            f"JSON {json_bytes} + params {params})") in line


@pytest.mark.parametrize("key", GRAPH_CORPUS)
def test_generate_build_run_matches_numpy(key: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    entry = build_graph_archive(key, tmp_path)
    _run_cli(entry, tmp_path / "prj", tmp_path, capsys, seed=GRAPH_CORPUS.index(key) + 1)
    src = (tmp_path / "prj" / "src" / "graph_model.c").read_text()
    # Called directly, never looked up by name: no registry, no TVMFuncGetGlobal.
    assert "TVMFuncGetGlobal" not in src and "_tvm_func_registry" not in src
    if entry.release.params == "lookup":
        assert "_lookup_linked_param(&arg" in src and "graph_default_param" not in src


def test_flatten_data_gives_one_dimensional_views(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """TVM always writes flatten_data "0"; a graph that asks for flat arguments still runs,
    the function seeing one-dimensional tensors (the kernels index flat, so the result is
    the same)."""
    entry = build_graph_archive("graph-0.9-multi-output", tmp_path)
    text = entry.files[entry.graph_member].decode().replace('"flatten_data": "0"',
                                                            '"flatten_data": "1"')
    path = _rewrite(entry, tmp_path / "flat.tar", {entry.graph_member: text.encode()})
    _run_cli(entry, tmp_path / "prj", tmp_path, capsys, seed=5, model=path)
    src = (tmp_path / "prj" / "src" / "graph_model.c").read_text()
    assert ".ndim = 1;" in src


def test_standalone_host_project_runs_a_graph_model_on_files(tmp_path: Path) -> None:
    from mlf_kernels import generate_host_project

    entry = build_graph_archive("graph-0.11-int8", tmp_path)
    prj = tmp_path / "prj"
    generate_host_project(entry.path, prj, project_type="standalone",
                          warning_as_error=False).close()
    feeds = _feeds(entry, 9)
    (x,) = feeds.values()
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    out = subprocess.run([str(prj / "build/main"), "-r", "3", "-o", str(tmp_path),
                          str(tmp_path / "x.bin")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (want,) = entry.net.reference(feeds)
    _check(np.frombuffer((tmp_path / "output0.bin").read_bytes(), np.int8), want)


# --- refusals ------------------------------------------------------------------------------------


def _graph_edit(entry: GraphArchive, tmp_path: Path, edit) -> Path:
    doc = json.loads(entry.files[entry.graph_member])
    edit(doc)
    return _rewrite(entry, tmp_path / "edited.tar",
                    {entry.graph_member: json.dumps(doc, indent=2).encode()})


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["attrs"]["device_index"][1].__setitem__(3, 2),
     r"default.graph: entry 3 \(output 0 of node 3, 'tvmgen_default_fused_multiply_add'\) is "
     r"placed on device type 2 \(CUDA\); only the CPU \(device type 1\) is lowered"),
    (lambda d: d["attrs"]["shape"][1].__setitem__(0, [-1, 8]),
     r"entry 0 \(output 0 of node 0, 'serving_default_x:0'\) has the dynamic shape \[-1, 8\]; "
     r"only static shapes are lowered"),
    (lambda d: d["attrs"].__setitem__("storage_scope", ["list_str", ["global.texture"] * 7]),
     r"lives in memory scope 'global.texture'"),
    (lambda d: d["nodes"][3]["attrs"].__setitem__("func_name", "__copy"),
     r"copies between devices \(__copy\); only one CPU is lowered"),
    (lambda d: d["nodes"][3].__setitem__("op", "bass_op"),
     r"has op 'bass_op'; only tvm_op and null nodes are lowered"),
    (lambda d: d["nodes"][3].__setitem__("inputs", [[9, 0, 0]]),
     r"reference \[9, 0, 0\] names no output of an existing node or comes later"),
])
def test_what_cannot_run_is_refused_in_one_line(tmp_path: Path, edit, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    entry = build_graph_archive("graph-0.9-multi-output", tmp_path)
    path = _graph_edit(entry, tmp_path, edit)
    with pytest.raises(MLFError, match=message):
        open_mlf(path)
    capsys.readouterr()
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err)


def _params_bytes(entry: GraphArchive) -> bytearray:
    return bytearray(entry.files[f"parameters/{entry.release.mod}.params"])


@pytest.mark.parametrize("damage, message", [
    (lambda b: b.__setitem__(slice(8, 16), (7).to_bytes(8, "little")),
     r"reserved field 0x7: a param dict version this reader does not know"),
    (lambda b: b.__setitem__(slice(0, 8), (1).to_bytes(8, "little")),
     r"is not TVM's param dict magic"),
    (lambda b: b.__delitem__(slice(len(b) - 3, len(b))),
     r"its data runs past the end; the file is truncated"),
])
def test_params_of_another_version_or_size_are_refused(tmp_path: Path, damage,
                                                       message: str) -> None:
    entry = build_graph_archive("graph-0.10-int8", tmp_path)
    data = _params_bytes(entry)
    damage(data)
    path = _rewrite(entry, tmp_path / "bad.tar", {"parameters/default.params": bytes(data)})
    with pytest.raises(MLFError, match=message):
        open_mlf(path)


def test_a_param_whose_byte_count_disagrees_with_its_shape_is_refused(tmp_path: Path) -> None:
    entry = build_graph_archive("graph-0.10-int8", tmp_path)
    good = save_param_dict(dict(entry.net.params))
    # p0 is int8 (4, 6): 24 bytes; say 25 (the data then runs one byte into p1's header).
    at = good.index((24).to_bytes(8, "little") + entry.net.params["p0"].tobytes())
    bad = good[:at] + (25).to_bytes(8, "little") + good[at + 8:]
    path = _rewrite(entry, tmp_path / "size.tar", {"parameters/default.params": bad})
    with pytest.raises(MLFError, match=r"array 'p0': 25 bytes of data for shape \[4, 6\] x int8 "
                                       r"\(24 bytes\)"):
        open_mlf(path)


def test_params_that_do_not_fit_the_graph_are_refused(tmp_path: Path) -> None:
    entry = build_graph_archive("graph-0.10-int8", tmp_path)
    wrong = dict(entry.net.params, p0=np.zeros((4, 7), np.int8))
    path = _rewrite(entry, tmp_path / "shape.tar",
                    {"parameters/default.params": save_param_dict(wrong)})
    with pytest.raises(MLFError, match=r"parameter 'p0' is int8\[4, 7\] in the params file but "
                                       r"int8\[4, 6\] in default.graph"):
        open_mlf(path)
    other = dict(entry.net.params, p9=np.zeros(2, np.int8))
    path = _rewrite(entry, tmp_path / "extra.tar",
                    {"parameters/default.params": save_param_dict(other)})
    with pytest.raises(MLFError, match=r"parameter 'p9' is no input node of default.graph"):
        open_mlf(path)


def test_a_function_the_c_lacks_is_refused_at_generate(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    entry = build_graph_archive("graph-0.10-int8", tmp_path)
    lib1 = entry.files[entry.ops_member].decode()
    gone = lib1.replace("tvmgen_default_fused_qnn_requantize(void*", "tvmgen_default_other(void*")
    path = _rewrite(entry, tmp_path / "nofunc.tar", {entry.ops_member: gone.encode()})
    capsys.readouterr()
    assert main(["generate", "-q", "-t", "host", "-m", str(path), "--out", str(tmp_path / "p")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert ("the graph calls tvmgen_default_fused_qnn_requantize, which its generated C does "
            "not define") in err
    assert not (tmp_path / "p").exists()
    lib0 = entry.files["codegen/host/src/default_lib0.c"].decode()
    unlisted = lib0.replace("tvmgen_default_fused_qnn_requantize\\000", "tvmgen_default_other\\000")
    path = _rewrite(entry, tmp_path / "noreg.tar", {"codegen/host/src/default_lib0.c":
                                                    unlisted.encode()})
    assert main(["generate", "-q", "-t", "host", "-m", str(path), "--out", str(tmp_path / "q")]) == 1
    assert "which the system-library registry of its C does not list" in capsys.readouterr().err


# --- the lowered C itself --------------------------------------------------------------------


@pytest.mark.parametrize("key", ["graph-0.8-link-params", "graph-0.9-multi-output",
                                 "graph-0.14-float"])
def test_lowered_model_is_clean_under_sanitizers(key: str, tmp_path: Path) -> None:
    """graph_model.c builds warning-free for the host and a Cortex-M4 (-std=c99 -Wall -Wextra
    -Werror), and runs under ASan and UBSan equal to numpy (linked parameters, views of the
    glue's buffers, storage shared with an output, a workspace from the backend)."""
    from conftest import REPO_ROOT, require_tool
    from mlf_kernels import generate_host_project

    entry = build_graph_archive(key, tmp_path)
    project = generate_host_project(entry.path, tmp_path / "prj", warning_as_error=False,
                                    sanitize=True)
    try:
        src = tmp_path / "prj" / "src" / "graph_model.c"
        flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-c", str(src), "-I",
                 str(REPO_ROOT / "crt" / "include")]
        for cc in ([require_tool("cc")], [require_tool("arm-none-eabi-gcc"), "-mcpu=cortex-m4",
                                          "-mthumb", "-Os"]):
            out = subprocess.run([*cc, *flags, "-o", str(tmp_path / "g.o")], capture_output=True,
                                 text=True)
            assert out.returncode == 0, out.stderr
        rng = np.random.default_rng(11)
        with project.session() as session:
            model = session.model(entry.release.mod)
            for _ in range(3):
                feeds = {t.name: rng.uniform(-2, 2, t.shape).astype(np.float32)
                         for t in entry.net.inputs}
                for t in entry.net.inputs:
                    model.set_input(t.name, feeds[t.name])
                model.run()
                for i, want in enumerate(entry.net.reference(feeds)):
                    _check(model.get_output(i), want)
    finally:
        project.close()


def test_mangled_graph_and_params_fail_only_with_mlf_errors(tmp_path: Path) -> None:
    """Seeded truncations and byte flips of a graph JSON and a params file: each either reads
    or is an MLFError (never another exception, never a hang)."""
    from project_api.archive import tvm_graph

    entry = build_graph_archive("graph-0.9-multi-output", tmp_path)
    rng = np.random.default_rng(2024)
    sources = {"graph": entry.files[entry.graph_member],
               "params": entry.files["parameters/default.params"]}
    outcomes = {"read": 0, "refused": 0}
    for i in range(400):
        kind = ("graph", "params")[i % 2]
        data = bytearray(sources[kind])
        if rng.random() < 0.3:
            del data[int(rng.integers(0, len(data))):]
        for _ in range(int(rng.integers(1, 4))):
            if data:
                data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        path = tmp_path / f"m{i}"
        path.write_bytes(bytes(data))
        try:
            (tvm_graph.read_graph if kind == "graph" else tvm_graph.read_params)(path, "fuzz")
            outcomes["read"] += 1
        except MLFError as err:
            assert len(str(err).splitlines()) == 1
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100 and outcomes["read"] > 10, outcomes

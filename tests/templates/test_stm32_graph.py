"""A graph-executor archive (tests/tvm_graph_corpus.py, TVM 0.15, module ``kws``) lowered to
static C and run on QEMU's STM32F405: host-driven (our client, and TVM's graph_executor.create
replayed over the UART) and standalone (the ai_ API on its known input). Every output is
checked against numpy computing the same network. No QEMU is left running."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ai_api_helpers import hex_of, parse_lines
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    stm32_tools_and_no_qemu_left,
)
from tvm_graph_corpus import build_graph_archive

from project_api.micro.rpc import NDArray
from project_api.template import ai_api

KEY = "graph-0.15-int8"


@pytest.fixture(scope="module")
def flashed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    root = tmp_path_factory.mktemp("stm32-graph")
    entry = build_graph_archive(KEY, root)
    # TVM's registry C casts its functions to TVMBackendPackedCFunc: not warning-free.
    project = build_project(entry.path, root / "prj", warning_as_error=False)
    try:
        project.flash()
        yield entry, project
    finally:
        project.close()


def test_graph_model_runs_host_driven_on_qemu(flashed: tuple) -> None:
    entry, project = flashed
    net = entry.net
    rng = np.random.default_rng(15)
    seen = set()
    with project.session() as session:
        model = session.model("kws")
        assert model.input_names == [net.inputs[0].name]
        for _ in range(16):
            x = rng.integers(-128, 128, net.inputs[0].shape).astype(np.int8)
            model.set_input(0, x)
            model.run()
            got = model.get_output(0)
            (want,) = net.reference({net.inputs[0].name: x})
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.reshape(want.shape), want)
            seen.add(got.tobytes())
        assert len(seen) > 4  # the outputs follow the inputs

        # TVM's graph_executor.create(json, session.get_system_lib(), session.device) over the
        # UART: the JSON fits the default 2048-byte packet.
        rpc = session.rpc
        model.close()
        syslib = rpc.call(rpc.get_global_func("runtime.SystemLib"))
        module = rpc.call(rpc.get_global_func("tvm.graph_executor.create"),
                          entry.files[entry.graph_member].decode(), syslib, 1, 0)
        get = rpc.get_global_func("tvm.rpc.server.ModuleGetFunction")
        x = rng.integers(-128, 128, net.inputs[0].shape).astype(np.int8)
        view = rpc.call(rpc.call(get, module, "get_input", 1), net.inputs[0].name)
        assert isinstance(view, NDArray)
        rpc.copy_to_remote(view.tensor, x.tobytes())
        rpc.call(rpc.call(get, module, "run", 1))
        out = rpc.call(rpc.call(get, module, "get_output", 1), 0)
        (want,) = net.reference({net.inputs[0].name: x})
        np.testing.assert_array_equal(
            np.frombuffer(rpc.copy_from_remote(out.tensor), np.int8).reshape(want.shape), want)


def test_graph_model_runs_standalone_on_qemu(tmp_path: Path) -> None:
    from project_api.api.project import generate_project

    entry = build_graph_archive(KEY, tmp_path)
    prj = tmp_path / "prj"
    with generate_project("stm32", entry.path, prj, {"project_type": "standalone",
                                                     "warning_as_error": False,
                                                     "sample_seed": 5}) as project:
        project.build()
    assert (prj / "src" / "graph_model.c").is_file()
    run = subprocess.run(
        ["qemu-system-arm", "-M", "netduinoplus2", "-display", "none", "-monitor", "none",
         "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
         "-kernel", str(prj / "build/firmware.elf"), "-serial", "stdio"],
        capture_output=True, text=True, timeout=120, cwd=prj)
    lines = parse_lines(run.stdout)
    assert run.returncode == 0 and lines["done"] == ["0"], run.stdout
    t = entry.net.inputs[0]
    x = np.frombuffer(hex_of(lines["input"], "kws"), np.int8).reshape(t.shape)
    np.testing.assert_array_equal(x, ai_api.sample_input(5, 0, 0, "int8", t.shape))
    (want,) = entry.net.reference({t.name: x})
    np.testing.assert_array_equal(np.frombuffer(hex_of(lines["output"], "kws"), np.int8),
                                  want.reshape(-1))

"""TVM's own client driving a lowered graph model: its RPC calls, as TVM v0.15's Python makes
them, replayed on our wire against a host-template device built from a graph archive.

* ``tvm.contrib.graph_executor.create(graph_json, session.get_system_lib(), session.device)``
  (python/tvm/contrib/graph_executor.py ``create``: an RPC device, so the remote global
  ``tvm.graph_executor.create`` is called with the JSON, the module and the device type and
  id; ``GraphModule.__init__`` then fetches its functions from the returned module, the zero-copy
  ones optionally; ``set_input(key, value)`` is ``get_input(key)`` and ``copyfrom``; ``run``;
  ``get_output(i).numpy()``) is answered on the device by the lowered model whose JSON it is.
* ``tvm.micro.create_local_graph_executor(graph_json, session.get_system_lib(),
  session.device)`` (python/tvm/micro/session.py) runs TVM's executor on the host: its first
  device call looks up ``_lookup_linked_param`` in the system library
  (``lookup_remote_linked_param``; src/runtime/rpc/rpc_module.cc ``GetFunction`` asks
  ``tvm.rpc.server.ModuleGetFunction(mod, name, 1)``). The device refuses it in one RPC error
  naming the two ways that work, and the session stays usable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mlf_kernels import generate_host_project
from tvm_graph_corpus import build_graph_archive

from project_api.errors import RPCError
from project_api.micro.rpc import NDArray

#: What GraphModule.__init__ fetches from the executor module (graph_executor.py, v0.15), and
#: whether it may be missing (set_*_zero_copy are wrapped in try/except AttributeError).
GRAPH_MODULE_FUNCTIONS = [
    ("set_input", False), ("set_input_zero_copy", True), ("set_output_zero_copy", True),
    ("run", False), ("get_output", False), ("get_input", False), ("get_num_outputs", False),
    ("get_input_index", False), ("get_input_info", False), ("get_num_inputs", False),
    ("load_params", False), ("share_params", False),
]


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    root = tmp_path_factory.mktemp("graph-client")
    entry = build_graph_archive("graph-0.9-multi-output", root)
    # The JSON travels in one RPC packet: a packet limit above its 2258 bytes.
    project = generate_host_project(entry.path, root / "prj", warning_as_error=False,
                                    max_packet_size_bytes=8192)
    try:
        with project.session() as session:
            yield entry, session
    finally:
        project.close()


def _get_function(rpc, module, name: str):
    return rpc.call(rpc.get_global_func("tvm.rpc.server.ModuleGetFunction"), module, name, 1)


def test_graph_executor_create_runs_the_lowered_model(device: tuple) -> None:
    entry, session = device
    rpc = session.rpc
    graph_json = entry.files[entry.graph_member].decode()
    syslib = rpc.call(rpc.get_global_func("runtime.SystemLib"))  # session.get_system_lib()
    fcreate = rpc.get_global_func("tvm.graph_executor.create")
    assert fcreate is not None
    module = rpc.call(fcreate, graph_json, syslib, 1, 0)  # *device_type_id of a CPU device
    functions = {}
    for name, optional in GRAPH_MODULE_FUNCTIONS:
        handle = _get_function(rpc, module, name)
        assert (handle is None) == optional, name
        functions[name] = handle
    assert rpc.call(functions["get_num_inputs"]) == len(entry.net.inputs)
    assert rpc.call(functions["get_input_index"], "serving_default_x:0") == 0
    rng = np.random.default_rng(3)
    for _ in range(3):
        feeds = {t.name: rng.uniform(-2, 2, t.shape).astype(np.float32) for t in entry.net.inputs}
        for name, value in feeds.items():  # GraphModule.set_input: get_input(key).copyfrom
            view = rpc.call(functions["get_input"], name)
            assert isinstance(view, NDArray) and tuple(view.tensor.shape) == value.shape
            rpc.copy_to_remote(view.tensor, value.tobytes())
        rpc.call(functions["run"])
        n = rpc.call(functions["get_num_outputs"])
        want = entry.net.reference(feeds)
        assert n == len(want) == 3
        for i, w in enumerate(want):  # get_output(i).numpy()
            out = rpc.call(functions["get_output"], i)
            got = np.frombuffer(rpc.copy_from_remote(out.tensor), np.float32)
            np.testing.assert_allclose(got.reshape(out.tensor.shape), w, rtol=1e-6, atol=1e-6)
    # A JSON of another build is refused, by name of the call.
    with pytest.raises(RPCError, match=r"tvm.graph_executor.create: the graph JSON received "
                                       r"\(\d+ bytes\) is not the graph of a model of this "
                                       r"firmware"):
        rpc.call(fcreate, graph_json.replace('"flatten_data": "0"', '"flatten_data": "1"'),
                 syslib, 1, 0)


def test_create_local_graph_executor_is_refused_in_one_rpc_error(device: tuple) -> None:
    entry, session = device
    rpc = session.rpc
    syslib = rpc.call(rpc.get_global_func("runtime.SystemLib"))
    with pytest.raises(RPCError) as err:
        _get_function(rpc, syslib, "_lookup_linked_param")
    # The device's exception reply: TVM's "Error caught from RPC call:" line, then ours.
    header, message = str(err.value).splitlines()
    assert header == "Error caught from RPC call:"
    assert ("_lookup_linked_param is not in this firmware's system library: project-api lowered "
            "its graph models to static C") in message
    assert "tvm.contrib.graph_executor.create(" in message and "project-api's client" in message
    # The fused functions are refused the same way; the session goes on.
    with pytest.raises(RPCError, match="tvmgen_default_fused_split is not in this firmware"):
        _get_function(rpc, syslib, "tvmgen_default_fused_split")
    assert _get_function(rpc, syslib, "runtime.SystemLib") is not None  # a global: found
    model = session.model()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    model.set_input(0, x)
    model.run()
    np.testing.assert_allclose(model.get_output(2), entry.net.reference({entry.net.inputs[0].name:
                                                                          x})[2], rtol=1e-6)


def test_an_aot_only_firmware_keeps_answering_null(tmp_path: Path) -> None:
    """Without graph models nothing changes: a missing function is a null handle."""
    from mlf_kernels import add_mlf

    project = generate_host_project(add_mlf(tmp_path / "add.tar"), tmp_path / "prj")
    try:
        with project.session() as session:
            rpc = session.rpc
            syslib = rpc.call(rpc.get_global_func("runtime.SystemLib"))
            assert _get_function(rpc, syslib, "_lookup_linked_param") is None
            assert rpc.get_global_func("tvm.graph_executor.create") is None
    finally:
        project.close()

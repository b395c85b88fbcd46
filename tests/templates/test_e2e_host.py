"""End to end on the host template: generate, build, open an RPC session, run, compare with numpy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import add_mlf, dense_mlf, device_pids, generate_host_project, v5_add_mlf

from project_api.api.transport import ProjectTransport
from project_api.micro import Session
from project_api.tools.demo import run_demo


@pytest.fixture(autouse=True)
def _toolchain() -> None:
    require_tool("make")
    require_tool("cc")


def _random(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "int8":
        return rng.integers(-128, 127, shape, dtype=np.int8, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_add(tmp_path: Path, dtype: str) -> None:
    shape = (2, 5)
    mlf = add_mlf(tmp_path / "add.tar", dtype=dtype, shape=shape)
    rng = np.random.default_rng(1)
    with generate_host_project(mlf, tmp_path / "prj") as project, project.session() as session:
        model = session.model()
        assert model.num_inputs == 2 and model.num_outputs == 1
        assert model.input_names == ["a", "b"]
        for _ in range(3):  # the executor is reused across runs
            a, b = _random(rng, dtype, shape), _random(rng, dtype, shape)
            model.set_input("a", a)
            model.set_input(1, b)
            model.run()
            out = model.get_output(0)
            assert out.dtype == np.dtype(dtype) and out.shape == shape
            np.testing.assert_array_equal(out, a + b)  # int8 wraps in numpy and in the C cast
        np.testing.assert_array_equal(model.get_input("a"), a)


def test_dense_with_workspace(tmp_path: Path) -> None:
    mlf, weight, bias = dense_mlf(tmp_path / "dense.tar", in_features=32, out_features=12)
    x = np.random.default_rng(2).standard_normal((1, 32)).astype(np.float32)
    with generate_host_project(mlf, tmp_path / "prj") as project, project.session() as session:
        model = session.model("default")
        model.set_input("input_1", x)
        model.run()
        out = model.get_output(0)
        timing = session.time(model, number=20, repeat=3)
    ref = np.maximum(x @ weight.T + bias, 0.0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert len(timing.results) == 3 and all(t > 0 for t in timing.results)


def _check_add_on_device(mlf: Path, project_dir: Path, a: np.ndarray, b: np.ndarray) -> None:
    """Run the add model of ``mlf`` in a host project; its output must be ``a + b`` exactly."""
    with generate_host_project(mlf, project_dir) as project, project.session() as session:
        model = session.model()
        model.set_input("a", a)
        model.set_input("b", b)
        model.run()
        np.testing.assert_array_equal(model.get_output(0), a + b)


def test_v5_archive(tmp_path: Path) -> None:
    mlf = v5_add_mlf(tmp_path / "v5.tar", shape=(1, 6))
    a = np.arange(-3, 3, dtype=np.int8).reshape(1, 6)
    b = np.full((1, 6), 120, dtype=np.int8)
    _check_add_on_device(mlf, tmp_path / "prj", a, b)


def test_large_tensors_cross_many_packets(tmp_path: Path) -> None:
    shape = (64, 257)  # 16448 floats = 64 KiB per tensor, ~33 packets of 2 KiB each way
    mlf = add_mlf(tmp_path / "add.tar", dtype="float32", shape=shape)
    rng = np.random.default_rng(3)
    a, b = _random(rng, "float32", shape), _random(rng, "float32", shape)
    _check_add_on_device(mlf, tmp_path / "prj", a, b)


def test_second_session_after_close(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    a = np.array([[1, 2, 3, 4]], dtype=np.int8)
    with generate_host_project(mlf, tmp_path / "prj") as project:
        for k in range(2):
            with project.session() as session:
                model = session.model()
                model.set_input("a", a)
                model.set_input("b", a * k)
                model.run()
                np.testing.assert_array_equal(model.get_output(0), a + a * k)


def test_reference_jsonrpc_path_and_reaping(tmp_path: Path) -> None:
    """Every byte through read_transport/write_transport (what a microTVM client does)."""
    mlf = add_mlf(tmp_path / "add.tar", dtype="float32", shape=(3, 700))  # > 1 packet each way
    rng = np.random.default_rng(4)
    a, b = _random(rng, "float32", (3, 700)), _random(rng, "float32", (3, 700))
    binary = tmp_path / "prj/build/main"
    with generate_host_project(mlf, tmp_path / "prj") as project:
        transport = ProjectTransport(project.client, project.options, use_endpoint=False,
                                     shutdown_client=False)
        with Session(transport) as session:
            assert transport.endpoint is None
            model = session.model()
            model.set_input("a", a)
            model.set_input("b", b)
            model.run()
            np.testing.assert_array_equal(model.get_output(0), a + b)
            assert len(device_pids(binary)) == 1
        assert device_pids(binary) == []  # close_transport terminated and reaped the device


def test_cli_run_with_inputs_and_output(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar", dtype="float32", shape=(1, 3))
    generate_host_project(mlf, tmp_path / "prj").close()
    a = np.array([[1.5, -2.0, 3.25]], dtype=np.float32)
    b = np.array([[0.5, 2.0, -1.0]], dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    b.tofile(tmp_path / "b.bin")
    out = subprocess.run(
        [sys.executable, "-m", "project_api", "run", str(tmp_path / "prj"), "--input",
         f"a={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'b.bin'}", "--output",
         str(tmp_path / "y.npz"), "--repeat", "2", "--number", "5"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "device time per run" in out.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "y.npz")["output"], a + b)


def test_cli_run_one_go_with_random_inputs(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar", dtype="int8", shape=(1, 4))
    cmd = [sys.executable, "-m", "project_api", "run", "--template", "host", "--model", str(mlf),
           "--out", str(tmp_path / "work"), "--seed", "5", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "seeded random inputs (seed 5)" in out.stderr
    data = json.loads(out.stdout)
    a = np.array(data["inputs"]["a"], dtype=np.int8)
    b = np.array(data["inputs"]["b"], dtype=np.int8)
    np.testing.assert_array_equal(np.array(data["outputs"]["output"], dtype=np.int8), a + b)
    # The same seed gives the same inputs; the rebuilt project is replaced only with --force.
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "--force" in again.stderr
    again = subprocess.run(cmd + ["--force"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["inputs"] == data["inputs"]


def test_demo_int8_matches_tflm(tmp_path: Path) -> None:
    from project_api.emit.reference import run_tflm

    result = run_demo(tmp_path / "demo", number=5, repeat=2)
    assert result.ok, result.max_abs_error
    assert result.reference_name == "TFLite Micro"
    # Recompute the reference here rather than trusting the demo's own comparison.
    tflite = (tmp_path / "demo" / "model.tflite").read_bytes()
    ref = run_tflm(tflite, list(result.inputs.values()))
    assert result.outputs[0].dtype == np.int8
    np.testing.assert_array_equal(result.outputs[0].reshape(ref[0].shape), ref[0])


def test_demo_mlp(tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo", model="mlp", number=5, repeat=2)
    assert result.ok, result.max_abs_error
    # Recompute the reference here rather than trusting the demo's own comparison.
    from project_api.tools.demo import _demo_weights

    (w1, b1), (w2, b2) = _demo_weights(0)
    ref = np.maximum(result.inputs["input"] @ w1.T + b1, 0.0) @ w2.T + b2
    np.testing.assert_allclose(result.outputs[0].reshape(ref.shape), ref, rtol=1e-5, atol=1e-6)


def test_cli_run_tflite_one_go_checked(tmp_path: Path) -> None:
    from project_api.tflite.builder import single_op_model

    model = tmp_path / "models" / "fc.tflite"
    model.parent.mkdir()
    model.write_bytes(single_op_model("FULLY_CONNECTED", "int8"))
    work = tmp_path / "cwd"
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "project_api", "run", "--template", "host", "--model", str(model),
         "--check", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, cwd=work,
    )
    assert out.returncode == 0, out.stderr
    assert "check output 0 against TFLite Micro: OK" in out.stdout
    assert list(work.iterdir()) == []  # without --out the work directory is temporary


def test_cli_demo(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "project_api", "demo", "--out", str(tmp_path / "d"), "--json"]
    for _ in range(2):  # the second run replaces the first run's folder by itself
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["ok"] is True and data["max_abs_error"] <= 1e-4
    (tmp_path / "d" / "notes.txt").write_text("mine")
    out = subprocess.run(cmd + ["--force"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "did not write" in out.stderr
    assert (tmp_path / "d" / "notes.txt").read_text() == "mine"


def test_two_modules_in_one_archive(tmp_path: Path) -> None:
    from mlf_kernels import add_module, dense_module, write_mlf

    dense, weight, bias = dense_module("mod2", in_features=8, out_features=4)
    mlf = write_mlf(tmp_path / "two.tar", [add_module("mod1", "int8", (1, 4)), dense])
    a = np.array([[1, -2, 3, 127]], dtype=np.int8)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    with generate_host_project(mlf, tmp_path / "prj") as project:
        with project.session() as session:
            add = session.model("mod1")
            add.set_input("a", a)
            add.set_input("b", a)
            add.run()
            np.testing.assert_array_equal(add.get_output(0), a + a)
        # The device runs one executor at a time (as microTVM's did); a new session starts
        # a fresh device process.
        with project.session() as session:
            mlp = session.model("mod2")
            mlp.set_input("input_1", x)
            mlp.run()
            np.testing.assert_allclose(mlp.get_output(0), np.maximum(x @ weight.T + bias, 0),
                                       rtol=1e-5)


def test_std_math_and_remote_arrays(tmp_path: Path) -> None:
    """The reference's test_std_math_functions and test_compile_runtime, on our stack."""
    from mlf_kernels import exp_module, write_mlf

    from project_api.micro.rpc import DataType

    mlf = write_mlf(tmp_path / "exp.tar", [exp_module(shape=(2,))])
    with generate_host_project(mlf, tmp_path / "prj") as project, project.session() as session:
        model = session.model()
        assert model.get_input_index("a") == 0
        model.set_input("a", np.array([2.0, 3.0], dtype=np.float32))
        model.run()
        np.testing.assert_allclose(model.get_output(0), [7.389056, 20.085537], rtol=1e-6)
        # Device arrays of several shapes round-trip (alloc, copy to, copy from, free).
        rpc = session.rpc
        for value in (np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int8),
                      np.array([4, -7, 9, 127], dtype=np.int8), np.zeros((0,), dtype=np.int8)):
            tensor = rpc.alloc(value.shape, DataType.from_numpy(value.dtype))
            try:
                if value.size:
                    rpc.copy_to_remote(tensor, value.tobytes())
                    back = rpc.copy_from_remote(tensor)
                    assert np.frombuffer(back, np.int8).reshape(value.shape).tolist() == value.tolist()
            finally:
                rpc.free_data(tensor)

"""Issue #8, the command line: hostile input gives a one-line error (never "internal error"),
Ctrl-C during ``run`` exits 130 and leaves nothing behind, and the small surprises are gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import missing, require_tool
from helpers.signals import default_sigint
from mlf_kernels import device_pids

from project_api.cli import main


def _single_op_tflite(path: Path) -> Path:
    from project_api.tflite.builder import single_op_model

    path.write_bytes(single_op_model("FULLY_CONNECTED", "int8"))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A built host project of a one-operator int8 model, and the model."""
    require_tool("make")
    require_tool("cc")
    tmp = tmp_path_factory.mktemp("cli_failures")
    tflite = _single_op_tflite(tmp / "fc.tflite")
    assert main(["emit", str(tflite), "--out", str(tmp / "fc.tar"), "-q"]) == 0
    project = tmp / "prj"
    assert main(["generate", "--template", "host", "--model", str(tmp / "fc.tar"),
                 "--out", str(project), "-q"]) == 0
    assert main(["build", str(project), "-q"]) == 0
    return {"project": project, "tflite": tflite, "mlf": tmp / "fc.tar"}


def _input_shape(built: dict[str, Path]) -> tuple[list[int], str]:
    from project_api.archive import mlf

    with mlf.open_mlf(built["mlf"]) as lib:
        t = lib.module(None).inputs[0]
    return list(t.require_shape()), t.dtype


def _run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    assert "internal error" not in lines[0] and "please report it" not in lines[0]
    return lines[0]


# --- hostile input -------------------------------------------------------------------------------


def test_bad_npy_inputs_are_one_line_errors(built, tmp_path, capsys) -> None:
    shape, dtype = _input_shape(built)
    good = tmp_path / "good.npy"
    np.save(good, np.zeros(shape, dtype))
    data = good.read_bytes()
    (tmp_path / "truncated.npy").write_bytes(data[:-1])
    (tmp_path / "header.npy").write_bytes(data[:20])
    np.save(tmp_path / "objects.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    with open(tmp_path / "huge.npy", "wb") as f:  # a header promising 1 TB: refused unread
        np.lib.format.write_array_header_1_0(
            f, {"descr": "|i1", "fortran_order": False, "shape": (10**12,)})
        f.write(b"x")
    (tmp_path / "nomagic.npy").write_bytes(b"hello world")
    cases = {"truncated.npy": "is truncated", "header.npy": "not a readable .npy file",
             "objects.npy": "holds Python objects", "huge.npy": "is truncated",
             "nomagic.npy": "not a readable .npy file"}
    for name, expected in cases.items():
        status, _, err = _run(capsys, "run", str(built["project"]), "--input",
                              f"0={tmp_path / name}")
        assert status == 1
        assert expected in _one_line_error(err)


def test_repeat_and_number_beyond_the_device_limits_are_usage_errors(built, capsys) -> None:
    for argv, expected in ((["--repeat", "65537"], "1..65536"),
                           (["--repeat", "99999999999999999999999"], "1..65536"),
                           (["--number", "1000000001"], "1..1000000000"),
                           (["--seed", "-1"], "--seed wants an integer >= 0"),
                           (["--timeout", "-3"], "--timeout wants seconds")):
        status, _, err = _run(capsys, "run", str(built["project"]), *argv)
        assert status == 2
        assert expected in _one_line_error(err)


def test_limits_are_in_the_help(capsys) -> None:
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "1..65536" in text and "1..1000000000" in text and "--timeout SECONDS" in text


def test_hybrid_model_under_check_is_a_clear_error(models_dir, tmp_path, capsys) -> None:
    require_tool("make")
    require_tool("cc")
    model = models_dir / "kws_ref_model_float32.tflite"
    if not model.is_file():
        missing(f"{model} is missing from the shared models folder")
    status, _, err = _run(capsys, "run", "--template", "host", "--model", str(model), "--check",
                          "--repeat", "1", "--number", "1", "-q")
    assert status == 1
    line = _one_line_error(err)
    assert "TFLite Micro cannot run this model" in line and "Hybrid" in line


def test_reference_failure_is_a_clear_error(built, tmp_path, capsys, monkeypatch) -> None:
    # A model the emitter accepts but TFLite Micro cannot run (here: TFLM's own refusal).
    from project_api.emit import reference

    def refuse(model, inputs, arena_size_bytes=None):
        os.write(2, b"tensorflow/lite/micro/kernels/x.cc Operator FOO is not supported.\n")
        raise RuntimeError("TFLM failed to allocate tensors")

    def refuse_too(model, inputs, reference_kernels=False):  # LiteRT, which stands in, too
        raise RuntimeError("Encountered unresolved custom op: FOO.")

    monkeypatch.setattr(reference, "run_tflm", refuse)
    monkeypatch.setattr(reference, "run_litert", refuse_too)
    status, _, err = _run(capsys, "run", "--template", "host", "--model", str(built["tflite"]),
                          "--check", "--repeat", "1", "-q")
    assert status == 1
    line = _one_line_error(err)
    assert "TFLite Micro cannot run this model" in line
    assert "Operator FOO is not supported" in line and "x.cc" not in line
    assert "nor LiteRT's reference kernels (Encountered unresolved custom op: FOO" in line


# --- small surprises -----------------------------------------------------------------------------


def test_output_is_written_to_exactly_the_named_file_and_never_overwritten(built, tmp_path,
                                                                          capsys) -> None:
    out = tmp_path / "y.txt"
    status, _, err = _run(capsys, "run", str(built["project"]), "--output", str(out), "-q")
    assert status == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.txt"]
    assert list(np.load(out).keys())
    before = out.read_bytes()
    status, _, err = _run(capsys, "run", str(built["project"]), "--output", str(out), "-q")
    assert status == 1 and "pass --force" in _one_line_error(err)
    assert out.read_bytes() == before
    assert _run(capsys, "run", str(built["project"]), "--output", str(out), "--force", "-q")[0] == 0


def test_same_size_input_of_another_shape_needs_reshape(built, tmp_path, capsys) -> None:
    shape, dtype = _input_shape(built)
    flat = tmp_path / "flat.npy"
    np.save(flat, np.arange(int(np.prod(shape))).astype(dtype).reshape(-1, 1))
    status, _, err = _run(capsys, "run", str(built["project"]), "--input", f"0={flat}", "-q")
    assert status == 1
    line = _one_line_error(err)
    assert str(shape) in line and f"[{int(np.prod(shape))}, 1]" in line and "--reshape" in line
    status, _, err = _run(capsys, "run", str(built["project"]), "--input", f"0={flat}",
                          "--reshape", "-q")
    assert status == 0, err


def test_info_accepts_builtin_template_names(capsys) -> None:
    status, out, err = _run(capsys, "info", "host")
    assert status == 0, err
    assert "template project, platform host" in out


def test_info_and_generate_on_a_tflite_suggest_emit(tmp_path, capsys) -> None:
    tflite = _single_op_tflite(tmp_path / "m.tflite")
    for argv in (["info", str(tflite)],
                 ["generate", "--template", "host", "--model", str(tflite), "--out",
                  str(tmp_path / "prj")]):
        status, _, err = _run(capsys, *argv)
        assert status == 2
        line = _one_line_error(err)
        assert "is a TFLite model" in line and "project-api emit" in line
        assert "run --template host --model" in line and "ReadError" not in line
    assert not (tmp_path / "prj").exists()


def test_emit_output_flag(tmp_path, capsys) -> None:
    tflite = _single_op_tflite(tmp_path / "m.tflite")
    status, _, err = _run(capsys, "emit", str(tflite), "-o", "foo=bar")
    assert status == 2 and "--out FILE.tar" in _one_line_error(err)
    assert not Path("foo=bar").exists() and not (tmp_path / "foo=bar").exists()
    assert _run(capsys, "emit", str(tflite), "--out", str(tmp_path / "a.tar"), "-q")[0] == 0
    assert _run(capsys, "emit", str(tflite), "--output", str(tmp_path / "b.tar"), "-q")[0] == 0
    assert _run(capsys, "emit", str(tflite), "-o", str(tmp_path / "c.tar"), "-q")[0] == 0
    assert _run(capsys, "emit", str(tflite))[0] == 2


def test_json_usage_errors_are_json(capsys) -> None:
    for argv in (["run", "--json", "--bogus"], ["run", "--json", "--repeat", "x"],
                 ["emit", "--json"], ["run", "--json", "--repeat", "0"]):
        status, out, err = _run(capsys, *argv)
        assert status == 2
        assert "error" in json.loads(out)
        _one_line_error(err)


# --- Ctrl-C --------------------------------------------------------------------------------------


def _start_long_run(project: Path, tmp: Path, **popen) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmp))
    return subprocess.Popen(
        [sys.executable, "-m", "project_api", "run", str(project), "--number", "1000000000",
         "--repeat", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=default_sigint, **popen,
    )


def _wait_for_device(binary: Path, proc: subprocess.Popen) -> None:
    while not device_pids(binary):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(1.0)  # let it reach the timing call


@pytest.mark.parametrize("group", [False, True], ids=["cli-only", "process-group"])
def test_ctrl_c_during_run_exits_130_and_leaves_nothing(built, tmp_path, group) -> None:
    binary = built["project"] / "build" / "main"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = _start_long_run(built["project"], tmp, start_new_session=True)
    try:
        _wait_for_device(binary, proc)
        if group:  # what a terminal's Ctrl-C does: the CLI, its server and the device get it
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)  # a hang guard, not a speed check
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "crashed" not in err and "timed out" not in err and "no reply" not in err
    assert device_pids(binary) == []
    assert list(tmp.iterdir()) == []


def test_hung_real_device_gets_the_clear_message_first(built) -> None:
    from project_api.api.project import GeneratedProject
    from project_api.errors import SessionError, SessionTimeoutError

    binary = built["project"] / "build" / "main"
    with GeneratedProject.from_directory(built["project"]) as project:
        with project.session(timeout_sec=1.0) as session:
            model = session.model()
            model.run()
            (pid,) = device_pids(binary)
            os.kill(pid, signal.SIGSTOP)  # hung: alive, but never answers
            with pytest.raises(SessionTimeoutError) as info:
                model.run()
            message = str(info.value)
            assert "within 1s" in message and "run of model 'default'" in message
            assert "Session(timeout_sec=SECONDS)" in message and "earlier" not in message
            with pytest.raises(SessionError, match="out of step"):
                model.run()
    assert device_pids(binary) == []

"""stm32 template, project type ``standalone``: several MLFs in one firmware behind the ai_ API,
run on QEMU netduinoplus2. Each firmware runs every model once on its known input and prints
the results over the UART, then exits through semihosting (status 0 = every model ran); the
outputs equal TFLite Micro's on the same inputs. Also: two archives whose modules are both
``default`` link (one is renamed), per-channel quantization reported by the API, one shared
pool sized to the largest model versus one pool per model, one-line errors. No QEMU is left."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ai_api_helpers import (
    PER_CHANNEL,
    check_against_tflm,
    hex_of,
    parse_lines,
    scale_bits,
    with_per_channel_output,
)
from stm32_support import qemu_pids, stm32_tools_and_no_qemu_left  # noqa: F401

from project_api.api.project import generate_project
from project_api.emit import emit
from project_api.errors import ProjectAPIError
from project_api.template import ai_api


@pytest.fixture(scope="module")
def archives(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("standalone_models")
    hw, ms = models_dir / "hello_world_int8.tflite", models_dir / "micro_speech_int8.tflite"
    default_ms = emit(ms, out / "speech_default.tar", name="default").path
    return {
        "hello": emit(hw, out / "hello.tar", name="hello").path,
        "speech": emit(ms, out / "speech.tar", name="speech").path,
        "hello_default": emit(hw, out / "hello_default.tar", name="default").path,
        "speech_default_pc": with_per_channel_output(default_ms, out / "speech_pc.tar"),
    }


def _build(where: Path, main: Path, extra: list[Path], **options) -> Path:
    opts = {"project_type": "standalone", "warning_as_error": True,
            "extra_models": ",".join(str(p) for p in extra), **options}
    with generate_project("stm32", main, where, opts) as project:
        project.build()
    return where


def _run_on_qemu(prj: Path) -> tuple[int, dict[str, list[str]]]:
    """Run the firmware to its semihosting exit; (exit status, parsed UART lines)."""
    run = subprocess.run(
        ["qemu-system-arm", "-M", "netduinoplus2", "-display", "none", "-monitor", "none",
         "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
         "-kernel", str(prj / "build/firmware.elf"), "-serial", "stdio"],
        capture_output=True, text=True, timeout=120, cwd=prj)
    return run.returncode, parse_lines(run.stdout)


@pytest.fixture(scope="module")
def shared(archives, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("sa_shared") / "prj", archives["hello"],
                  [archives["speech"]], shared_pool=True, sample_seed=11)


@pytest.fixture(scope="module")
def same_name(archives, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("sa_same") / "prj", archives["hello_default"],
                  [archives["speech_default_pc"]])


def _check_outputs(lines: dict[str, list[str]], models_dir: Path, names: list[str],
                   seed: int) -> None:
    for k, (name, tflite) in enumerate(zip(names, ("hello_world_int8", "micro_speech_int8"),
                                           strict=True)):
        shape = (1, 1) if k == 0 else (1, 1960)
        want_in = ai_api.sample_input(seed, k, 0, "int8", shape).tobytes()
        got_in = hex_of(lines["input"], name)
        assert got_in == want_in
        check_against_tflm(models_dir / f"{tflite}.tflite", "int8", shape, got_in,
                           hex_of(lines["output"], name))


def test_two_models_shared_pool_equal_tflm(shared: Path, models_dir: Path) -> None:
    status, lines = _run_on_qemu(shared)
    assert status == 0 and lines["done"] == ["0"], lines
    assert lines["models"] == ["2 seed 11 shared_pool 1"]
    assert [m.split()[0] for m in lines["model"]] == ["hello", "speech"]
    assert "error" not in lines
    _check_outputs(lines, models_dir, ["hello", "speech"], seed=11)


def test_same_module_name_links_and_per_channel_is_reported(same_name: Path,
                                                            models_dir: Path) -> None:
    status, lines = _run_on_qemu(same_name)
    assert status == 0 and lines["done"] == ["0"], lines
    assert lines["model"][0].startswith("default source default archive model.tar version mlf-7")
    assert lines["model"][1].startswith("default_1 source default archive speech_pc.tar")
    _check_outputs(lines, models_dir, ["default", "default_1"], seed=0)
    want = " ".join(f"{scale_bits(s)}/{z}" for s, z in zip(PER_CHANNEL["scale"],
                                                           PER_CHANNEL["zero_point"], strict=True))
    assert f"default_1 output 0 axis 1 count 4 {want}" in lines["quant"]
    assert any(q.startswith("default input 0 axis -1 count 1 ") for q in lines["quant"])
    nm = subprocess.run(["arm-none-eabi-nm", str(same_name / "build/firmware.elf")],
                        capture_output=True, text=True, check=True).stdout
    assert " T tvmgen_default_run" in nm and " T tvmgen_default_1_run" in nm


def _activation_sizes(prj: Path) -> list[int]:
    header = (prj / "src/ai/ai_models.h").read_text()
    return [int(line.split()[-1]) for line in header.splitlines()
            if line.startswith("#define AI_") and line.endswith(tuple("0123456789"))
            and "_ACTIVATIONS_SIZE " in line and "MAX_" not in line]


def test_pool_sizing_shared_versus_separate(shared: Path, same_name: Path) -> None:
    shared_sizes, separate_sizes = _activation_sizes(shared), _activation_sizes(same_name)
    assert len(shared_sizes) == len(separate_sizes) == 2
    assert shared_sizes == separate_sizes  # the same two models
    used_shared = json.loads((shared / "build/memory.json").read_text())["ram"]["activations"]
    used_separate = json.loads((same_name / "build/memory.json").read_text())["ram"]["activations"]
    assert used_shared == max(shared_sizes)
    assert used_separate == sum(separate_sizes)
    assert "activations" in (shared / "build/memory.txt").read_text()


def test_host_driven_refuses_extra_models(archives, tmp_path: Path) -> None:
    with pytest.raises(ProjectAPIError, match="need project_type=standalone"):
        generate_project("stm32", archives["hello"], tmp_path / "prj",
                         {"extra_models": str(archives["speech"])})
    assert not (tmp_path / "prj").exists()


def test_missing_extra_archive_is_one_line(archives, tmp_path: Path) -> None:
    with pytest.raises(ProjectAPIError, match="missing.tar does not exist; pass MLF .tar archives"):
        generate_project("stm32", archives["hello"], tmp_path / "prj",
                         {"project_type": "standalone",
                          "extra_models": str(tmp_path / "missing.tar")})


def test_float_model_alone(models_dir: Path, tmp_path: Path) -> None:
    """A float32 model (no quantization: no quant line) as the only model of a firmware."""
    import numpy as np

    from project_api.emit.reference import run_tflm

    tflite = models_dir / "hello_world_float.tflite"
    prj = _build(tmp_path / "prj", emit(tflite, tmp_path / "f.tar", name="sine").path, [])
    status, lines = _run_on_qemu(prj)
    assert status == 0 and lines["done"] == ["0"] and "quant" not in lines, lines
    x = np.frombuffer(hex_of(lines["input"], "sine"), dtype=np.float32).reshape(1, 1)
    np.testing.assert_array_equal(x, ai_api.sample_input(0, 0, 0, "float32", (1, 1)))
    got = np.frombuffer(hex_of(lines["output"], "sine"), dtype=np.float32)
    want = run_tflm(tflite.read_bytes(), [x])[0].reshape(-1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- generated without building: what the template library decides from the project type -------


def test_a_standalone_project_has_no_link_and_open_transport_says_so_at_once(
        archives, tmp_path: Path) -> None:
    """The stm32 server used to go on to the emulator (or the board's UART) for a standalone
    firmware, which has no RPC server; the base class refuses it in one line from the project
    type's data, before anything starts."""
    with generate_project("stm32", archives["hello"], tmp_path / "prj",
                          {"project_type": "standalone"}) as project:
        with pytest.raises(ProjectAPIError, match=r"prj is a standalone project "
                                                  r"\(project_type=standalone\): its firmware "
                                                  r"has no link to the host; generate the "
                                                  r"project again with -o "
                                                  r"project_type=host_driven"):
            project.client.open_transport({})


def test_the_model_glue_has_one_writer_and_reports_the_build_hash(archives,
                                                                   tmp_path: Path) -> None:
    """A standalone firmware's model_glue.c comes from the same writer as every other's, with
    the build hash of build_hash.txt (the ai_ API used to write it without)."""
    hashes = []
    for k, extra in enumerate((archives["speech"], archives["hello_default"])):
        prj = tmp_path / f"prj{k}"
        generate_project("stm32", archives["hello"], prj,
                         {"project_type": "standalone", "extra_models": str(extra)}).close()
        digest = (prj / "build_hash.txt").read_text().strip()
        assert f"return INT64_C(0x{digest});" in (prj / "src/model_glue.c").read_text()
        hashes.append(digest)
    assert hashes[0] != hashes[1]  # the extra model is part of what the firmware is made of


def test_receive_ring_follows_the_one_rule(archives, tmp_path: Path) -> None:
    """mlperftiny's UART ring is a short line's (1 KiB, as on zephyr; it was 8 KiB here), an
    RPC firmware's holds one whole packet of max_packet_size_bytes."""
    rings = {}
    for kind in ("mlperftiny", "host_driven", "standalone"):
        generate_project("stm32", archives["hello"], tmp_path / kind,
                         {"project_type": kind}).close()
        header = (tmp_path / kind / "src/board.h").read_text()
        rings[kind] = int(header.split("#define BOARD_UART_RX_RING_BYTES ")[1].split("u")[0])
    assert rings == {"mlperftiny": 1024, "host_driven": 8192, "standalone": 1024}

"""zephyr template without Zephyr: generation for every board against golden files, golden argv
of ``west build`` / ``west flash`` (a stand-in ``west`` on PATH records them), the options and
one-line errors, the reference's known bugs (one test each), the devicetree baud-rate reader.

The tests that need a Zephyr tree and west are in test_zephyr_qemu.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from project_api.api.project import GeneratedProject, generate_project
from project_api.archive.crt_manifest import read_manifest
from project_api.emit import emit
from project_api.errors import ProjectAPIError, ServerError
from project_api.system import paths
from project_api.template import serial_ports
from project_api.template import zephyr as zephyr_tree
from project_api.template.qemu import emulator_argv

TEMPLATE = paths.template_dir("zephyr")
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "zephyr"
BOARDS = yaml.safe_load((TEMPLATE / "boards.yaml").read_text())["boards"]
REQUIRED_BOARDS = ["nucleo_f746zg", "nucleo_l4r5zi", "stm32f746g_disco", "b_u585i_iot02a",
                   "nrf5340dk_nrf5340_cpuapp", "mimxrt1050_evk", "mps2_an521", "qemu_cortex_m3",
                   "qemu_x86"]


def _server_module():
    spec = importlib.util.spec_from_file_location("zephyr_server", TEMPLATE / "microtvm_api_server.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["zephyr_server"] = module  # inspect.getfile finds the handler's script
    spec.loader.exec_module(module)
    return module


Z = _server_module()

STAND_IN_WEST = """#!{python}
import json, os, sys
with open(os.environ["WEST_ARGV_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "zephyr_base": os.environ.get("ZEPHYR_BASE"),
                          "cwd": os.getcwd()}}) + "\\n")
status = int(os.environ.get("WEST_STATUS", "0"))
if sys.argv[1:2] == ["build"] and status == 0 and not os.environ.get("WEST_BUILDS_NOTHING"):
    # As west does: the image in <-d>/zephyr/ (a stand-in's bytes; nothing runs it).
    out = os.path.join(sys.argv[sys.argv.index("-d") + 1], "zephyr")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "zephyr.elf"), "wb") as elf:
        elf.write(b"\\x7fELF stand-in")
sys.exit(status)
"""


@pytest.fixture(scope="module")
def mlf(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zephyr_mlf")
    return emit(models_dir / "hello_world_int8.tflite", out / "hello.tar", name="default").path


@pytest.fixture(autouse=True)
def no_zephyr_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test says which Zephyr tree it sees."""
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)


@pytest.fixture
def west(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stand-in ``west`` first on PATH; returns a function giving the calls it recorded."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "west"
    program.write_text(STAND_IN_WEST.format(python=sys.executable))
    program.chmod(0o755)
    log = tmp_path / "west.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WEST_ARGV_LOG", str(log))

    def calls() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    calls.program = str(program)  # type: ignore[attr-defined]
    return calls


def fake_zephyr(root: Path, version: tuple[int, int, int] = (3, 5, 0),
                boards: dict[str, tuple[str, int]] | None = None) -> Path:
    """A Zephyr tree as far as the template reads one: VERSION and board yamls
    (``{"name": ("boards/<folder>", ram_kib)}``)."""
    root.mkdir(parents=True)
    major, minor, patch = version
    (root / "VERSION").write_text(f"VERSION_MAJOR = {major}\nVERSION_MINOR = {minor}\n"
                                  f"PATCHLEVEL = {patch}\nVERSION_TWEAK = 0\nEXTRAVERSION =\n")
    for name, (folder, ram) in (boards or {}).items():
        path = root / folder / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"identifier: {name}\narch: arm\nram: {ram}\nflash: 256\n")
    return root


def _generate(mlf: Path, where: Path, **options) -> Path:
    generate_project("zephyr", mlf, where, options).close()
    return where


def _project_files(prj: Path) -> list[str]:
    return sorted(str(p.relative_to(prj)) for p in prj.rglob("*") if p.is_file()
                  and not str(p.relative_to(prj)).startswith(("crt/", "model/")))


def _summary(prj: Path) -> str:
    cmake = [line for line in (prj / "CMakeLists.txt").read_text().splitlines()
             if not line.strip().startswith("crt/src/")]  # the crt list: test_crt_sources_*
    return ("## files\n" + "\n".join(_project_files(prj)) + "\n## CMakeLists.txt (without the "
            "crt sources)\n" + "\n".join(cmake) + "\n## prj.conf\n" + (prj / "prj.conf").read_text())


# --- boards.yaml ---------------------------------------------------------------------------


def test_boards_yaml_is_data_with_every_field() -> None:
    assert set(REQUIRED_BOARDS) <= set(BOARDS)
    for name, board in BOARDS.items():
        assert {"zephyr_board", "cpu", "qemu", "fpu", "usb", "recommended_heap_bytes",
                "ram_bytes", "flash_runner"} <= set(board), name
        assert board["recommended_heap_bytes"] < board["ram_bytes"], name
        if board["qemu"]:
            assert board["usb"] is None and board["flash_runner"] is None
            assert board["emulator"]["binary"].startswith("qemu-system-")
        else:
            assert set(board["usb"]) == {"vid", "pid"}
            assert board["flash_runner"] in (
                "openocd", "jlink", "nrfjprog", "pyocd", "stm32cubeprogrammer")
    assert BOARDS["nrf5340dk_nrf5340_cpuapp"]["usb"] == {"vid": 0x1366, "pid": 0x1055}
    assert BOARDS["b_u585i_iot02a"]["usb"] == {"vid": 0x0483, "pid": 0x374E}


def test_targets_see_the_zephyr_boards() -> None:
    from project_api.template import targets

    assert "zephyr" in targets.templates_building_for("cortex-m")
    assert targets.templates_building_for("x86") == ["zephyr"]


# --- generation ------------------------------------------------------------------------------


@pytest.mark.parametrize("board", REQUIRED_BOARDS)
def test_generate_every_board_matches_golden(mlf: Path, tmp_path: Path, board: str) -> None:
    prj = _generate(mlf, tmp_path / "prj", board=board)
    text = _summary(prj)
    golden = GOLDEN / f"{board}.txt"
    if os.environ.get("PROJECT_API_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    spec = BOARDS[board]
    conf = (prj / "prj.conf").read_text()
    assert f"CONFIG_HEAP_MEM_POOL_SIZE={spec['recommended_heap_bytes']}" in conf
    assert ("CONFIG_FPU=y" in conf) == spec["fpu"]
    assert "CONFIG_UART_INTERRUPT_DRIVEN=y" in conf and "CONFIG_UART_CONSOLE=n" in conf
    cmake = (prj / "CMakeLists.txt").read_text()
    assert f"set(BOARD {spec['zephyr_board']})" in cmake
    assert "find_package(Zephyr REQUIRED HINTS $ENV{ZEPHYR_BASE})" in cmake
    # The heap is derived from the board, not written back into the checked options: what is
    # saved is what was checked (issue 19).
    saved = json.loads((prj / "project_options.json").read_text())
    assert saved["workspace_size_bytes"] is None


def test_crt_sources_come_from_the_manifest(mlf: Path, tmp_path: Path) -> None:
    prj = _generate(mlf, tmp_path / "prj")
    listed = [line.strip() for line in (prj / "CMakeLists.txt").read_text().splitlines()
              if line.strip().startswith("crt/src/")]
    want = [f"crt/{p}" for p in read_manifest(paths.crt_dir()).project_sources("host_driven")
            if str(p) not in Z.REPLACED_BY_ZEPHYR]
    assert listed == want and all((prj / p).is_file() for p in listed)
    assert (prj / "crt/include/tvm/runtime/crt/platform.h").is_file()
    # Self-contained: nothing refers back to the template or this checkout.
    for path in prj.rglob("*"):
        if path.is_file() and path.suffix in (".txt", ".conf", ".c", ".h", ".overlay"):
            text = path.read_text(errors="replace")
            assert str(TEMPLATE) not in text and str(paths.crt_dir()) not in text, path


def test_options_reach_cmake_and_kconfig(mlf: Path, tmp_path: Path) -> None:
    prj = _generate(mlf, tmp_path / "prj", board="nucleo_f746zg", config_main_stack_size=8192,
                    workspace_size_bytes=65536, warning_as_error=True,
                    compile_definitions="-DFOO=1 -UBAR", cmsis_path=str(tmp_path))
    conf = (prj / "prj.conf").read_text()
    assert "CONFIG_MAIN_STACK_SIZE=8192\n" in conf and "CONFIG_HEAP_MEM_POOL_SIZE=65536\n" in conf
    assert "CONFIG_COMPILER_WARNINGS_AS_ERRORS=y" in conf and "CONFIG_ENTROPY_GENERATOR=y" in conf
    cmake = (prj / "CMakeLists.txt").read_text()
    assert "target_compile_options(app PRIVATE -DFOO=1)" in cmake
    assert "target_compile_options(app PRIVATE -UBAR)" in cmake
    assert "TVM_WORKSPACE_SIZE_BYTES=65536" in cmake and f"set(CMSIS_PATH {tmp_path})" in cmake


def test_overlay_only_where_needed(mlf: Path, tmp_path: Path) -> None:
    l4 = _generate(mlf, tmp_path / "l4", board="nucleo_l4r5zi")
    overlay = (l4 / "boards/nucleo_l4r5zi.overlay").read_text()
    assert "DT_FREQ_M(120)" in overlay and "mul-n = <15>" in overlay
    assert not (_generate(mlf, tmp_path / "f7", board="nucleo_f746zg") / "boards").exists()


def test_standalone_uses_the_shared_ai_api(mlf: Path, tmp_path: Path) -> None:
    prj = _generate(mlf, tmp_path / "prj", project_type="standalone", sample_seed=3)
    cmake = (prj / "CMakeLists.txt").read_text()
    for src in ("src/standalone_main.c", "src/ai/ai_runtime.c", "src/ai/ai_models.c",
                "src/ai/ai_sample.c", "src/model_glue.c"):
        assert f"  {src}\n" in cmake and (prj / src).is_file()
    assert "src/main.c" not in cmake and "rpc_server" not in cmake
    # The very files the stm32 template renders (project_api/template/jinja/ai_*.j2): the
    # zephyr template has no ai_ templates of its own.
    from project_api.template import quoting

    assert not list((TEMPLATE / "templates").glob("ai_*"))
    rendered = quoting.environment(TEMPLATE / "templates").get_template("ai_runtime.h.j2")
    assert Path(rendered.filename).parent == quoting.JINJA_DIR
    assert "ai_create" in (prj / "src/ai/ai_runtime.h").read_text()


MLPERFTINY_BOARDS = ["qemu_cortex_m3", "nucleo_f746zg"]


@pytest.mark.parametrize("board", MLPERFTINY_BOARDS)
def test_generate_mlperftiny_matches_golden(mlf: Path, tmp_path: Path, board: str) -> None:
    """project_type=mlperftiny: the shared protocol (crt library mlperftiny) behind our port
    file, no RPC, heap or random-number Kconfig, the console UART interrupt-driven."""
    prj = _generate(mlf, tmp_path / "prj", board=board, project_type="mlperftiny",
                    mlperftiny_model="kws01")
    text = _summary(prj)
    golden = GOLDEN / "mlperftiny" / f"{board}.txt"
    if os.environ.get("PROJECT_API_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    cmake = (prj / "CMakeLists.txt").read_text()
    for src in ("src/mlperftiny_main.c", "src/model_glue.c", "src/mlperftiny_model.c"):
        assert f"  {src}\n" in cmake and (prj / src).is_file()
    assert "src/main.c" not in cmake and "src/platform.c" not in cmake
    listed = [line.strip() for line in cmake.splitlines() if line.strip().startswith("crt/src/")]
    want = [f"crt/{p}" for p in read_manifest(paths.crt_dir()).project_sources("mlperftiny")
            if str(p) not in Z.REPLACED_BY_ZEPHYR]
    assert listed == want and all((prj / p).is_file() for p in listed)
    assert "crt/src/mlperftiny/protocol.c" in listed and "rpc_server" not in cmake
    conf = (prj / "prj.conf").read_text()
    assert "CONFIG_UART_INTERRUPT_DRIVEN=y" in conf and "CONFIG_UART_CONSOLE=n" in conf
    assert "CONFIG_HEAP_MEM_POOL_SIZE" not in conf and "RANDOM" not in conf
    assert f"CONFIG_MAIN_STACK_SIZE={Z.MAIN_STACK_BYTES['mlperftiny']}\n" in conf
    # What is saved is what was checked: the stack derived from the project type is not.
    saved = json.loads((prj / "project_options.json").read_text())
    assert saved["config_main_stack_size"] is None and saved["workspace_size_bytes"] is None
    assert '"kws01"' in (prj / "src/mlperftiny_model.c").read_text()
    assert (prj / "crt_config/crt_config.h").is_file()


def test_mlperftiny_ready_line_is_the_banner_open_transport_waits_for() -> None:
    """open_transport reads up to the end of the line holding BANNER and leaves the benchmark's
    start-up lines, sent after it, to the client."""
    text = (TEMPLATE / "src/mlperftiny_main.c").read_text()
    assert f'#define READY_BANNER "{Z.BANNER.decode()}: " PROJECT_API_BOARD " mlperftiny\\r\\n"' \
        in text
    assert text.index("TVMCrtMlperfTinyPort_Write(banner") < text.index("TVMCrtMlperfTiny_Start(&bench")


def test_mlperftiny_model_option_is_the_shared_one() -> None:
    from project_api.template import mlperftiny_model

    assert mlperftiny_model.MLPERFTINY_MODEL_OPTION in Z.Handler.OPTIONS


def test_mlperftiny_model_guessed_without_the_option(mlf: Path, tmp_path: Path) -> None:
    """Without -o mlperftiny_model the shared guess applies: hello world's output is as large as
    its input, so it is scored like the anomaly-detection model."""
    prj = _generate(mlf, tmp_path / "prj", project_type="mlperftiny")
    model = (prj / "src/mlperftiny_model.c").read_text()
    assert '"ad01"' in model and "kTvmMlperfTinyScoreReconstruction" in model


def test_extra_files_tar(mlf: Path, tmp_path: Path) -> None:
    import tarfile

    extra = tmp_path / "extra"
    (extra / "docs").mkdir(parents=True)
    (extra / "docs/NOTE.txt").write_text("hello\n")
    archive = tmp_path / "extra.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(extra / "docs", arcname="docs")
    prj = _generate(mlf, tmp_path / "prj", extra_files_tar=str(archive))
    assert (prj / "docs/NOTE.txt").read_text() == "hello\n"


# --- the Zephyr tree: version, RAM, errors ------------------------------------------------------


def test_version_is_compared_as_numbers(tmp_path: Path) -> None:
    """Reference bug: VERSION read as a float, so 3.10 < 3.2. As numbers 3.10 is inside 3.2..4.2."""
    assert Z.zephyr_version(fake_zephyr(tmp_path / "z", (3, 10, 1))) == (3, 10, 1)
    Z.check_version((3, 10, 1), warning_as_error=True)  # no error
    assert float("3.10") < float("3.2")  # what the reference compared
    with pytest.raises(ServerError, match=r"Zephyr 3\.1\.0 has not been tested .*tested 3\.2 "
                                          r"to 4\.2"):
        Z.check_version((3, 1, 0), warning_as_error=True)
    Z.check_version((3, 1, 0), warning_as_error=False)  # a warning only


def test_untested_version_is_an_error_with_warning_as_error(mlf: Path, tmp_path: Path) -> None:
    base = fake_zephyr(tmp_path / "z", (3, 1, 0))
    with pytest.raises(ProjectAPIError, match="Zephyr 3.1.0 has not been tested"):
        _generate(mlf, tmp_path / "prj", zephyr_base=str(base), warning_as_error=True)
    assert not (tmp_path / "prj").exists()
    _generate(mlf, tmp_path / "prj2", zephyr_base=str(base))  # a warning only


def test_zephyr_base_that_is_no_tree(mlf: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("ZEPHYR_BASE", str(tmp_path / "empty"))
    with pytest.raises(ProjectAPIError, match=r"is not a Zephyr tree \(no VERSION file\); pass -o "
                                              "zephyr_base="):
        _generate(mlf, tmp_path / "prj")


@pytest.mark.parametrize("folder", ["boards/arm/qemu_cortex_m3", "boards/qemu/cortex_m3"])
def test_heap_larger_than_ram(mlf: Path, tmp_path: Path, folder: str) -> None:
    """Reference bug: RAM looked up only under boards/arm/. Both layouts are read (the tree's 32
    KiB wins over boards.yaml's 64 KiB), and the error is one line naming both numbers."""
    base = fake_zephyr(tmp_path / "z", (3, 7, 0), {"qemu_cortex_m3": (folder, 32)})
    assert zephyr_tree.board_ram_bytes(base, "qemu_cortex_m3", BOARDS["qemu_cortex_m3"]) == (
        32768, str(base / folder / "qemu_cortex_m3.yaml"))
    with pytest.raises(ProjectAPIError, match=r"workspace_size_bytes=40000 does not fit "
                                              r"qemu_cortex_m3's RAM of 32768 bytes .*pass a "
                                              r"smaller -o workspace_size_bytes=N"):
        _generate(mlf, tmp_path / "prj", zephyr_base=str(base), workspace_size_bytes=40000)
    # Without a tree, boards.yaml's RAM decides.
    with pytest.raises(ProjectAPIError, match=r"RAM of 65536 bytes \(boards.yaml\)"):
        _generate(mlf, tmp_path / "prj", workspace_size_bytes=70000)


def test_board_ram_of_a_hardware_model_v2_target(tmp_path: Path) -> None:
    base = fake_zephyr(tmp_path / "z", (4, 0, 0), {"mps2_an521_cpu0": ("boards/arm/mps2", 4096)})
    assert zephyr_tree.board_ram_bytes(base, "mps2_an521", BOARDS["mps2_an521"]) == (4096 * 1024,
                                                     str(base / "boards/arm/mps2/mps2_an521_cpu0.yaml"))
    assert zephyr_tree.board_ram_bytes(base, "qemu_x86", BOARDS["qemu_x86"]) == (BOARDS["qemu_x86"]["ram_bytes"], "boards.yaml")


def test_unknown_board(mlf: Path, tmp_path: Path) -> None:
    with pytest.raises(ProjectAPIError, match=r"board.*'nope'.*qemu_cortex_m3"):
        _generate(mlf, tmp_path / "prj", board="nope")


# --- build and flash: golden argv ---------------------------------------------------------------


@pytest.mark.parametrize("version, board, name", [
    ((3, 5, 0), "qemu_cortex_m3", "qemu_cortex_m3"),
    ((3, 5, 0), "nrf5340dk_nrf5340_cpuapp", "nrf5340dk_nrf5340_cpuapp"),
    ((3, 7, 0), "nrf5340dk_nrf5340_cpuapp", "nrf5340dk/nrf5340/cpuapp"),
    ((4, 1, 0), "mps2_an521", "mps2/an521/cpu0"),
])
def test_build_golden_argv(mlf: Path, tmp_path: Path, west, version, board, name) -> None:
    base = fake_zephyr(tmp_path / "z", version)
    prj = _generate(mlf, tmp_path / "prj", board=board, zephyr_base=str(base), west_cmd="west")
    with GeneratedProject.from_directory(prj) as project:
        project.build()
    assert west() == [{"argv": ["build", "-b", name, "-d", str(prj / "build"), "-p", "auto",
                                str(prj)], "zephyr_base": str(base), "cwd": str(prj)}]
    assert (prj / "build.log").read_text().startswith(f"$ {west.program} build -b ")
    assert f"set(BOARD {name})" in (prj / "CMakeLists.txt").read_text()


def test_build_failure_names_the_log(mlf: Path, tmp_path: Path, west,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _generate(mlf, tmp_path / "prj", zephyr_base=str(base), west_cmd="west")
    monkeypatch.setenv("WEST_STATUS", "1")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match=rf"build failed: .*full log: {prj}/build.log"):
            project.build()


def test_arm_only_model_on_qemu_x86(mlf: Path, tmp_path: Path, west) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _generate(mlf, tmp_path / "prj", board="qemu_x86", zephyr_base=str(base),
                    west_cmd="west")
    source = sorted((prj / "model/codegen/host/src").glob("*.c"))[0]
    source.write_text("#include <arm_acle.h>\n" + source.read_text())
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match=r"targets Arm .*<arm_acle.h>.*board qemu_x86 "
                                                  r"\(x86\) cannot run; regenerate"):
            project.build()
    assert west() == []


@pytest.mark.parametrize("board, serial_number, extra", [
    ("nucleo_f746zg", "066DFF495351", ["--cmd-pre-init", "adapter serial 066DFF495351"]),
    ("nucleo_f746zg", None, []),
    ("mimxrt1050_evk", "000621000000", ["--dev-id", "000621000000"]),
    ("b_u585i_iot02a", "0021002B", ["--conn-modifiers", "sn=0021002B"]),
    ("nrf5340dk_nrf5340_cpuapp", "001050012345", ["--dev-id", "1050012345"]),
    # Reference bug: None.lstrip when an nRF board has no serial number.
    ("nrf5340dk_nrf5340_cpuapp", None, []),
])
def test_flash_golden_argv(mlf: Path, tmp_path: Path, west, board, serial_number, extra) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _generate(mlf, tmp_path / "prj", board=board, zephyr_base=str(base), west_cmd="west")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.elf").write_bytes(b"\x7fELF")
    options = {"serial_number": serial_number} if serial_number else {}
    with GeneratedProject.from_directory(prj, options) as project:
        project.flash()
    assert west() == [{"argv": ["flash", "-d", str(prj / "build"), "-r",
                                BOARDS[board]["flash_runner"], *extra],
                       "zephyr_base": str(base), "cwd": str(prj)}]


def test_flash_qemu_board_runs_nothing(mlf: Path, tmp_path: Path, west) -> None:
    prj = _generate(mlf, tmp_path / "prj", west_cmd="west")
    with GeneratedProject.from_directory(prj) as project:
        project.flash()
    assert west() == []


def test_flash_before_build(mlf: Path, tmp_path: Path, west) -> None:
    prj = _generate(mlf, tmp_path / "prj", board="nucleo_f746zg", west_cmd="west")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match="nothing to flash: build/zephyr/zephyr.elf is "
                                                  "not built; run 'project-api build'"):
            project.flash()


def test_west_missing(mlf: Path, tmp_path: Path) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _generate(mlf, tmp_path / "prj", zephyr_base=str(base),
                    west_cmd="no-such-west-program --flag")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match=r"west not found: 'no-such-west-program' is not "
                                                  r"on PATH; install it with 'pip install west', "
                                                  r"or pass -o west_cmd="):
            project.build()
    if importlib.util.find_spec("west") is None:  # the default: this Python's -m west
        with pytest.raises(ProjectAPIError, match="west not found: .* has no west module"):
            zephyr_tree.west_argv(None)


def test_zephyr_base_unset_at_build(mlf: Path, tmp_path: Path, west) -> None:
    prj = _generate(mlf, tmp_path / "prj", west_cmd="west")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match=r"build needs west and a Zephyr tree: "
                                                  r"ZEPHYR_BASE is unset; set it to your "
                                                  r"Zephyr checkout .* or pass -o zephyr_base="):
            project.build()
    assert west() == []


def test_west_cmd_is_split_like_a_shell() -> None:
    assert zephyr_tree.west_argv(f"{sys.executable} -c 'pass'")[:2] == [sys.executable, "-c"]
    assert Z.DEFAULT_WEST == f"{sys.executable} -m west"


def test_build_names_every_missing_part_at_once(mlf: Path, tmp_path: Path) -> None:
    """Issue #17, item 12: no west and no ZEPHYR_BASE are one line naming both."""
    prj = _generate(mlf, tmp_path / "prj", west_cmd="no-such-west-program")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError) as info:
            project.build()
    message = str(info.value)
    assert "build needs west and a Zephyr tree: west not found: 'no-such-west-program' is not " \
           "on PATH" in message
    assert "ZEPHYR_BASE is unset; set it to your Zephyr checkout" in message
    assert "\n" not in message
    # A tree without VERSION is named beside the missing west too.
    (tmp_path / "empty").mkdir()
    with GeneratedProject.from_directory(prj, {"zephyr_base": str(tmp_path / "empty")}) as project:
        with pytest.raises(ProjectAPIError, match=r"west not found: .*; zephyr_base .*empty is not "
                                                  r"a Zephyr tree \(no VERSION file\)"):
            project.build()


def test_build_opens_the_archive_once(mlf: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The target check and the board's CPU check read one opened archive (build opened it
    twice)."""
    from project_api.archive import mlf as mlf_mod

    prj = _generate(mlf, tmp_path / "prj", west_cmd="no-such-west-program")
    opened = []
    real_open = mlf_mod.open_mlf
    monkeypatch.setattr(mlf_mod, "open_mlf", lambda path, *a, **k: opened.append(path) or
                        real_open(path, *a, **k))
    with pytest.raises(ProjectAPIError, match="build needs west and a Zephyr tree"):
        Z.Handler(project_dir=prj).build({})  # both checks ran; then west is missing
    assert opened == [prj / "model"]


def test_a_build_that_writes_no_image_fails(mlf: Path, tmp_path: Path, west,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #17, item 12: west_cmd=/bin/true on a bare VERSION file built nothing; it is not
    "built"."""
    base = fake_zephyr(tmp_path / "z")
    prj = _generate(mlf, tmp_path / "prj", zephyr_base=str(base), west_cmd="west")
    monkeypatch.setenv("WEST_BUILDS_NOTHING", "1")
    with GeneratedProject.from_directory(prj) as project:
        with pytest.raises(ProjectAPIError, match=r"build failed: '.*west build' succeeded but "
                                                  r"wrote no build/zephyr/zephyr.elf; check that "
                                                  r"west_cmd runs west .*full log: .*build.log"):
            project.build()
    true = _generate(mlf, tmp_path / "true", zephyr_base=str(base), west_cmd="/bin/true")
    out = subprocess.run([sys.executable, "-m", "project_api", "build", str(true)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "built" not in out.stdout, out
    assert "wrote no build/zephyr/zephyr.elf" in out.stderr


@pytest.fixture(scope="module")
def float_mlf(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zephyr_float")
    return emit(models_dir / "hello_world_float.tflite", out / "float.tar", name="default").path


@pytest.mark.parametrize("board", [b for b, e in BOARDS.items() if e["fpu"] is False])
def test_float_model_on_a_board_without_fpu(float_mlf: Path, mlf: Path, tmp_path: Path,
                                            board: str) -> None:
    """Issue #17, item 12: generate says the float arithmetic runs in software there; with
    warning_as_error it refuses. An int8 model, or a board with an FPU, gets no word."""
    def cli(model: Path, out: str, *options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "project_api", "generate", "--template",
                               "zephyr", "--model", str(model), "--out", str(tmp_path / out),
                               "-o", f"board={board}", *options, "-q"],
                              capture_output=True, text=True, timeout=120)

    warned = cli(float_mlf, "float")
    assert warned.returncode == 0, warned.stderr
    assert "has no FPU: the float arithmetic runs in software" in warned.stderr
    assert board in warned.stderr
    refused = cli(float_mlf, "strict", "-o", "warning_as_error=true")
    assert refused.returncode == 1 and not (tmp_path / "strict").exists()
    assert "no FPU" in refused.stderr and "(warning_as_error)" in refused.stderr
    quiet = cli(mlf, "int8")
    assert quiet.returncode == 0 and "FPU" not in quiet.stderr
    with_fpu = subprocess.run([sys.executable, "-m", "project_api", "generate", "--template",
                               "zephyr", "--model", str(float_mlf), "--out",
                               str(tmp_path / "fpu"), "-o", "board=nucleo_f746zg", "-q"],
                              capture_output=True, text=True, timeout=120)
    assert with_fpu.returncode == 0 and "FPU" not in with_fpu.stderr


# --- the serial line and QEMU command line ----------------------------------------------------


def _port(device: str, serial: str | None, location: str = "1-1:1.0", vid: int = 0x0483,
          pid: int = 0x374B):
    return SimpleNamespace(device=device, vid=vid, pid=pid, serial_number=serial,
                           description="probe", location=location)


def test_serial_port_errors_name_what_was_asked() -> None:
    """Reference bugs: NameError when a serial number is given and no port matches; the
    several-ports message lost its f-string."""
    with pytest.raises(ServerError, match=r"no serial port of nucleo \(USB ID 0483:374b and "
                                          r"serial number 066D\); ports present: none"):
        serial_ports.find_port(0x0483, 0x374B, "066D", "nucleo", ports=[])
    two = [_port("/dev/ttyACM0", "A1"), _port("/dev/ttyACM1", "A2")]
    with pytest.raises(ServerError, match=r"2 serial ports match nucleo \(USB ID 0483:374b\): "
                                          r"/dev/ttyACM0 .*; pass -o serial_number="):
        serial_ports.find_port(0x0483, 0x374B, None, "nucleo", ports=two)


def test_probe_with_several_ports_picks_by_index() -> None:
    jlink = [_port(f"/dev/ttyACM{i}", "001050012345", f"1-2:1.{2 * i}", 0x1366, 0x1055)
             for i in (2, 0, 1)]
    assert serial_ports.find_port(0x1366, 0x1055, "1050012345", "nrf", ports=jlink,
                                  index=2) == "/dev/ttyACM2"
    with pytest.raises(ServerError, match="3 serial ports match"):
        serial_ports.find_port(0x1366, 0x1055, None, "nrf", ports=jlink)


def test_gdbserver_port_is_passed_as_text(tmp_path: Path) -> None:
    """Reference bug: the port went into the environment as an int (TypeError). Here it is a
    QEMU argument, every item a str."""
    line = SimpleNamespace(qemu_args=lambda cid: ["-chardev", f"socket,id={cid},path=x"])
    emulator = BOARDS["qemu_cortex_m3"]["emulator"]
    argv = emulator_argv(emulator["binary"], emulator["args"], tmp_path / "zephyr.elf", line, 1234)
    assert all(isinstance(a, str) for a in argv)
    assert argv[-3:] == ["-gdb", "tcp::1234", "-S"]
    assert argv[:5] == ["qemu-system-arm", "-cpu", "cortex-m3", "-machine", "lm3s6965evb"]
    assert "chardev:uart" in argv and "mux=on" not in " ".join(argv)
    assert "-gdb" not in emulator_argv(emulator["binary"], emulator["args"], tmp_path / "e", line)


def test_a_missing_emulator_names_the_boards_package(mlf: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """qemu_x86 runs under qemu-system-i386, which Debian's qemu-system-x86 installs: the
    one-line error says so (it named qemu-system-arm for every board)."""
    from project_api.template import elf, qemu

    assert BOARDS["qemu_x86"]["emulator"]["package"] == "qemu-system-x86"
    prj = _generate(mlf, tmp_path / "prj", board="qemu_x86")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.elf").write_bytes(b"\x7fELF")
    monkeypatch.setattr(elf, "check_image", lambda path, *a, **k: path.read_bytes())
    monkeypatch.setattr(qemu.shutil, "which", lambda name: None)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(qemu.tempfile, "tempdir", str(tmp_path / "tmp"))
    with pytest.raises(ServerError, match=r"'qemu-system-i386' is not installed \(not found on "
                                          r"PATH\); install QEMU, e.g. 'apt-get install "
                                          r"qemu-system-x86'"):
        Z.Handler(project_dir=prj).open_transport({})
    assert not list((tmp_path / "tmp").iterdir())  # the serial line's folder is gone


DTS = """/dts-v1/;
/ {
	#address-cells = < 0x1 >;
	chosen {
		zephyr,shell-uart = &uart1;
		zephyr,console = &usart3; /* the ST-LINK VCP */
	};
	soc {
		uart1: serial@40011000 {
			current-speed = < 0x2580 >;
		};
		usart3: arduino_serial: serial@40004800 {
			compatible = "st,stm32-usart";
			pinctrl-0 = < &usart3_tx_pd8 >;
			sub { current-speed = < 0x9600 >; };
			current-speed = < 0x1c200 >;
		};
	};
};
"""


def test_console_baud_rate_from_the_devicetree() -> None:
    assert zephyr_tree.console_baud_rate(DTS) == 115200
    by_path = DTS.replace("&usart3;", '"/soc/serial@40011000";')
    assert zephyr_tree.console_baud_rate(by_path) == 9600
    with pytest.raises(ValueError, match="no current-speed"):
        zephyr_tree.console_baud_rate(DTS.replace("current-speed = < 0x1c200 >;", ""))
    with pytest.raises(ValueError, match="no zephyr,console"):
        zephyr_tree.console_baud_rate(DTS.replace("zephyr,console", "zephyr,other"))


def test_open_transport_real_board_uses_the_dts_baud(mlf: Path, tmp_path: Path) -> None:
    prj = _generate(mlf, tmp_path / "prj", board="nucleo_f746zg")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.dts").write_text(DTS)
    handler = Z.Handler(project_dir=prj)
    try:
        reply = handler.open_transport({"serial_port": "loop://"})
        assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
        handler.write_transport(b"\x01\x01x", 1.0)
        assert handler.read_transport(3, 1.0) == b"\x01\x01x"
    finally:
        handler.close_transport()
    (prj / "build/zephyr/zephyr.dts").unlink()
    with pytest.raises(ServerError, match="zephyr.dts does not exist; run 'project-api build'"):
        handler.open_transport({"serial_port": "loop://"})


def test_open_transport_mlperftiny_real_board_and_standalone_refused(mlf: Path,
                                                                    tmp_path: Path) -> None:
    """mlperftiny opens the console UART as host_driven does; standalone has nothing to open."""
    prj = _generate(mlf, tmp_path / "prj", board="nucleo_f746zg", project_type="mlperftiny",
                    mlperftiny_model="kws01")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.dts").write_text(DTS)
    handler = Z.Handler(project_dir=prj)
    try:
        reply = handler.open_transport({"serial_port": "loop://"})
        assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
        handler.write_transport(b"name%", 1.0)
        assert handler.read_transport(5, 1.0) == b"name%"
    finally:
        handler.close_transport()
    alone = _generate(mlf, tmp_path / "alone", board="nucleo_f746zg", project_type="standalone")
    with pytest.raises(ServerError, match=r"open_transport: .*alone is a standalone project "
                       r"\(project_type=standalone\): its firmware has no link to the host; "
                       r"generate the project again with -o project_type=host_driven$"):
        Z.Handler(project_dir=alone).open_transport({"serial_port": "loop://"})


def test_open_transport_finds_the_nrf_console_port(mlf: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The J-Link OB of the nRF5340 DK shows three ports with one serial number (zero-padded
    over USB); usb_port_index picks the console by USB location, and a serial number given as
    nrfjprog shows it (no leading zeros) matches."""
    prj = _generate(mlf, tmp_path / "prj", board="nrf5340dk_nrf5340_cpuapp")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.dts").write_text(DTS)
    ports = [_port(device, "001050012345", location, 0x1366, 0x1055) for device, location in
             [("/dev/ttyACM1", "1-2:1.2"), ("loop://", "1-2:1.4"), ("/dev/ttyACM0", "1-2:1.0")]]
    ports.append(_port("/dev/ttyACM9", "000683000000", "1-3:1.0"))
    monkeypatch.setattr(serial_ports, "list_ports", lambda: ports)
    handler = Z.Handler(project_dir=prj)
    try:
        reply = handler.open_transport({"serial_number": "1050012345"})
        assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
    finally:
        handler.close_transport()
    with pytest.raises(ServerError, match=r"no serial port of nrf5340dk_nrf5340_cpuapp's debug "
                                          r"probe \(USB ID 1366:1055 and serial number 77\)"):
        handler.open_transport({"serial_number": "77"})


# --- reset before a reopen ---------------------------------------------------------------------


def test_every_flash_runner_says_whether_west_resets_through_it() -> None:
    runners = yaml.safe_load((TEMPLATE / "boards.yaml").read_text())["runners"]
    for name, board in BOARDS.items():
        if board["flash_runner"] is not None:
            assert isinstance(runners[board["flash_runner"]]["reset"], bool), name
    assert Z.RUNNERS["jlink"]["reset"] is True and Z.RUNNERS["openocd"]["reset"] is False


def _reopened(prj: Path, options: dict) -> None:
    """open_transport, then the reopen the client's recovery makes after a fault on the link
    (a second open_transport to the same server); each link carries bytes."""
    handler = Z.Handler(project_dir=prj)
    try:
        for _ in range(2):
            handler.open_transport(options)
            handler.write_transport(b"\x01\x02", 1.0)
            assert handler.read_transport(2, 1.0) == b"\x01\x02"
    finally:
        handler.close_transport()


def _real_board_project(mlf: Path, where: Path, board: str, base: Path) -> Path:
    prj = _generate(mlf, where, board=board, zephyr_base=str(base), west_cmd="west")
    (prj / "build/zephyr").mkdir(parents=True)
    (prj / "build/zephyr/zephyr.dts").write_text(DTS)
    return prj


def test_reopen_resets_a_board_whose_runner_has_west_reset(mlf: Path, tmp_path: Path,
                                                           west) -> None:
    """mimxrt1050_evk flashes with jlink, which implements ``west reset``: the first open resets
    nothing, the reopen runs ``west reset`` once, with the probe's serial number as the runner
    takes it, given to west as an argv list (the stand-in records it word for word)."""
    base = fake_zephyr(tmp_path / "z")
    prj = _real_board_project(mlf, tmp_path / "prj", "mimxrt1050_evk", base)
    serial = "000621000000"
    _reopened(prj, {"serial_port": "loop://", "serial_number": serial})
    assert west() == [{"argv": ["reset", "-d", str(prj / "build"), "-r", "jlink",
                                "--dev-id", serial],
                       "zephyr_base": str(base), "cwd": str(prj)}]
    assert "$ " in (prj / "build/reset.log").read_text()


@pytest.mark.parametrize("board, options", [
    ("nucleo_f746zg", {"serial_port": "loop://"}),  # openocd: no west reset
    ("b_u585i_iot02a", {"serial_port": "loop://"}),  # stm32cubeprogrammer: none either
    ("mimxrt1050_evk", {"serial_url": "loop://"}),  # a remote link: no local probe
])
def test_reopen_resets_nothing_without_west_reset_or_a_local_probe(
        mlf: Path, tmp_path: Path, west, board: str, options: dict) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _real_board_project(mlf, tmp_path / "prj", board, base)
    _reopened(prj, options)
    assert west() == []


def test_reopen_after_a_failed_west_reset_warns_once_and_opens(
        mlf: Path, tmp_path: Path, west, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    base = fake_zephyr(tmp_path / "z")
    prj = _real_board_project(mlf, tmp_path / "prj", "mimxrt1050_evk", base)
    monkeypatch.setenv("WEST_STATUS", "3")
    with caplog.at_level("WARNING"):
        _reopened(prj, {"serial_port": "loop://"})
    assert [c["argv"][0] for c in west()] == ["reset"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "could not reset the board" in warnings[0], warnings

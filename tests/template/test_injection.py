"""Hostile values against every consumer of a generated file or a command line (issue 17).

Each value of :data:`HOSTILE` (``;``, ``$()``, backticks, ``$$``, a newline, ``"``, ``\\``,
``#``, NUL, ``*/``) is tried on every consumer: the Makefile, CMake, ``prj.conf``, the linker
script, C strings, comments and identifiers, and tools' command lines. Each is either refused
in one line naming the offending character, or escaped, and then shown to arrive intact in the
program built from it (a ``-D`` value printed by the compiled program, a CMake variable written
back by CMake itself), never only that nothing ran. The canary ``-DX=1;touch$${IFS}CANARY;true``
of the issue is run end to end through ``project-api generate`` and ``make``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from conftest import require_tool
from mlf_kernels import add_mlf, add_module, write_mlf

from project_api.api.project import generate_project
from project_api.archive.model import ModuleInfo, TensorInfo
from project_api.errors import ProjectAPIError, ServerError
from project_api.system import paths
from project_api.template import flash, glue, labgrid_place, quoting, remote
from project_api.template import zephyr as zephyr_tree
from project_api.template.options import compile_definitions
from project_api.template.qemu import QemuSerialLine, QemuSocketLine

HOSTILE = {
    "semicolon": "a;b",
    "dollar_paren": "$(touch CANARY)",
    "backtick": "`touch CANARY`",
    "dollar_dollar": "$$HOME",
    "newline": "a\nb",
    "quote": 'a"b',
    "backslash": "a\\b",
    "hash": "a#b",
    "nul": "a\0b",
    "comment_end": "a*/b",
}
#: The character of each value a grammar names when it refuses it.
OFFENDING = {"semicolon": ";", "dollar_paren": "$", "backtick": "`", "dollar_dollar": "$",
             "newline": "\n", "quote": '"', "backslash": "\\", "hash": "#", "nul": "\0",
             "comment_end": "*"}
CANARY_FLAGS = "-DX=1;touch$${IFS}CANARY;true"
#: A project folder name holding a space, '$', ';' and a newline: make and the host tools must
#: take it as it is.
ODD_DIR = "odd dir $x;y\nz"
#: -D flags real projects use, and what the program sees for each (the macro's text).
DEFINITIONS = '-DVERSION="1.2" -DMSG="a b, c:/d=+-" -DN=0x1F -DNEG=-3 -DF=1.5e-3f -DE= -DFLAG'
EXPECTED_MACROS = {"VERSION": "1.2", "MSG": "a b, c:/d=+-", "N": "0x1F", "NEG": "-3",
                   "F": "1.5e-3f", "E": "", "FLAG": "1"}
#: Compiled by a generated Makefile's rule: the macros' text in a section of its own.
PROBE_C = r"""
#define S_(x) #x
#define S(x) S_(x)
__attribute__((used, section(".probe"))) const char probe_text[] = "VERSION=" VERSION "\nMSG="
    MSG "\nN=" S(N) "\nNEG=" S(NEG) "\nF=" S(F) "\nE=" S(E) "\nFLAG=" S(FLAG) "\n";
"""


def _one_line(exc: BaseException) -> str:
    """The error's message (without the server's traceback, which -vv shows), one line."""
    text = getattr(exc, "detail", "") or str(getattr(exc, "message", exc))
    assert "\n" not in text, text
    return text


def _macros(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def _no_canary(root: Path) -> None:
    assert not list(root.rglob("CANARY")), "a hostile value ran a command"


# --- the grammar of compile_definitions ------------------------------------------------------


@pytest.mark.parametrize("key", HOSTILE)
def test_compile_definitions_refuse_every_hostile_value(key: str) -> None:
    value = HOSTILE[key]
    with pytest.raises(ServerError) as info:
        compile_definitions(f"-DX={value}")
    assert f"has {OFFENDING[key]!r} in its VALUE" in _one_line(info.value)
    with pytest.raises(ServerError) as info:
        compile_definitions(f'-DX="{value}"')
    _one_line(info.value)


def test_compile_definitions_take_real_uses() -> None:
    assert compile_definitions(DEFINITIONS + " -UBAR") == [
        '-DVERSION="1.2"', '-DMSG="a b, c:/d=+-"', "-DN=0x1F", "-DNEG=-3", "-DF=1.5e-3f", "-DE=",
        "-DFLAG", "-UBAR"]
    for bad, why in (("-D1X", "no C identifier"), ("-UX=1", "-U takes a NAME only"),
                     ('-DX="abc', "no closing"), ("-O3", "is not a -DNAME")):
        with pytest.raises(ServerError, match=re.escape(why)):
            compile_definitions(bad)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "project_api", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("template", ["host", "stm32"])
def test_canary_is_refused_end_to_end(tmp_path: Path, template: str) -> None:
    """The issue's canary: generate (then make, were there anything to make) creates nothing,
    and the error is one line."""
    require_tool("make")
    mlf = add_mlf(tmp_path / "add.tar")
    proc = _cli("generate", "--template", template, "--model", str(mlf), "--out", "prj",
                "-o", f"compile_definitions={CANARY_FLAGS}", cwd=tmp_path)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "compile_definitions: '-DX=1;touch" in errors[0], proc.stderr
    assert "has ';' in its VALUE" in errors[0]
    assert not (tmp_path / "prj").exists()
    if (tmp_path / "prj" / "Makefile").exists():  # pragma: no cover - the refusal above failed
        subprocess.run(["make", "-C", str(tmp_path / "prj")], capture_output=True)
    _no_canary(tmp_path)


# --- the Makefile ------------------------------------------------------------------------------


def _make_env() -> quoting.Environments:
    return quoting.environment()


def test_make_word_carries_every_hostile_value(tmp_path: Path) -> None:
    """Each value as a make word: through make and /bin/sh to printf, byte for byte; and as a
    -D C string to the compiler, back out of the compiled program."""
    cc = require_tool("cc")
    require_tool("make")
    keys = [k for k in HOSTILE if k not in ("newline", "nul")]
    env = _make_env().by_kind["make"]
    lines = [f"W{i} := {{{{ v{i} | make_word }}}}" for i in range(len(keys))]
    lines.append("CPPFLAGS := {{ flags | make_words }}")
    lines.append("all:")
    lines += [f"\t@printf '%s' $(W{i}) > out{i}" for i in range(len(keys))]
    lines.append(f"\t@{cc} $(CPPFLAGS) -o probe probe.c")
    text = env.from_string("\n".join(lines) + "\n").render(
        flags=[f"-DV{i}={quoting.c_string(HOSTILE[k])}" for i, k in enumerate(keys)],
        **{f"v{i}": HOSTILE[k] for i, k in enumerate(keys)})
    (tmp_path / "Makefile").write_text(text)
    (tmp_path / "probe.c").write_text(
        "#include <stdio.h>\nint main(void) {\n" + "".join(
            f'  fputs(V{i}, stdout); fputs("\\n--\\n", stdout);\n' for i in range(len(keys)))
        + "  return 0;\n}\n")
    proc = subprocess.run(["make", "-C", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for i, key in enumerate(keys):
        assert (tmp_path / f"out{i}").read_bytes() == HOSTILE[key].encode(), key
    printed = subprocess.run([str(tmp_path / "probe")], capture_output=True).stdout
    assert printed.split(b"\n--\n")[:-1] == [HOSTILE[k].encode() for k in keys]
    _no_canary(tmp_path)


@pytest.mark.parametrize("key", ["newline", "nul"])
def test_make_word_refuses_what_make_cannot_carry(key: str) -> None:
    with pytest.raises(ServerError) as info:
        quoting.make_word(HOSTILE[key])
    assert f"holds {OFFENDING[key]!r}, which a Makefile cannot carry" in _one_line(info.value)


@pytest.mark.parametrize("key", HOSTILE)
def test_archive_file_names_the_build_globs_are_checked(tmp_path: Path, key: str) -> None:
    """A generated Makefile compiles every codegen/host/src/*.c of the archive: a file named
    x`touch${IFS}CANARY`.c ran the shell at make time."""
    if key == "nul":
        name = "x\x01.c"  # a tar member name cannot hold NUL; a control character stands in
    else:
        name = "x" + HOSTILE[key].replace("/", "") + ".c"
    mlf = write_mlf(tmp_path / "m.tar", [add_module()],
                    extra_files={f"codegen/host/src/{name}": b"int extra_unit = 1;\n"})
    with pytest.raises(ProjectAPIError) as info:
        generate_project("host", mlf, tmp_path / "prj", {}, build=True)
    member = f"codegen/host/src/{name}"
    assert f"model.tar: archive member {member!r} has " in _one_line(info.value)
    assert not (tmp_path / "prj").exists()
    _no_canary(tmp_path)


def test_host_project_in_an_odd_folder_with_definitions(tmp_path: Path) -> None:
    """A project folder with a space, '$', ';' and a newline builds; the -D values reach the
    compiler of the generated Makefile's own rule intact."""
    require_tool("cc")
    require_tool("make")
    objcopy = require_tool("objcopy")
    mlf = add_mlf(tmp_path / "add.tar")
    prj = tmp_path / ODD_DIR / "prj"
    prj.parent.mkdir()
    with generate_project("host", mlf, prj, {"compile_definitions": DEFINITIONS}, build=True):
        pass
    assert (prj / "build" / "main").is_file()
    (prj / "probe.c").write_text(PROBE_C)
    # Compiled by the generated Makefile's own rule (its CPPFLAGS), then read back.
    subprocess.run(["make", "-C", str(prj), "build/obj/probe.o"], check=True,
                   capture_output=True)
    out = subprocess.run([objcopy, "-O", "binary", "--only-section=.probe",
                          str(prj / "build/obj/probe.o"), str(prj / "probe.bin")],
                         capture_output=True)
    assert out.returncode == 0, out.stderr
    assert _macros((prj / "probe.bin").read_bytes().rstrip(b"\0").decode()) == EXPECTED_MACROS
    _no_canary(tmp_path)


def test_stm32_project_in_an_odd_folder_with_definitions(tmp_path: Path) -> None:
    """stm32 (arm-none-eabi-gcc): the same folder and flags, plus a standalone firmware whose
    second archive has a hostile file name (a C string and a comment of ai_models.c)."""
    require_tool("make")
    require_tool("arm-none-eabi-gcc")
    mlf = add_mlf(tmp_path / "add.tar")
    odd_archive = tmp_path / ODD_DIR / 'x"y$(touch CANARY)`z`#\\*.tar'
    odd_archive.parent.mkdir()
    # Another model (the same archive twice is refused, issue 17), under a hostile name.
    odd_archive.write_bytes(add_mlf(tmp_path / "add8.tar", shape=(1, 8)).read_bytes())
    prj = tmp_path / ODD_DIR / "prj"
    options = {"compile_definitions": DEFINITIONS, "project_type": "standalone",
               "extra_models": str(odd_archive)}
    with generate_project("stm32", mlf, prj, options, build=True):
        pass
    elf = (prj / "build" / "firmware.elf").read_bytes()
    assert odd_archive.name.encode() in elf  # the archive's name, intact in ai_model_info
    (prj / "probe.c").write_text(PROBE_C)
    subprocess.run(["make", "-C", str(prj), "build/obj/probe.o"], check=True, capture_output=True)
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "--only-section=.probe",
                    str(prj / "build/obj/probe.o"), str(prj / "probe.bin")], check=True)
    assert _macros((prj / "probe.bin").read_bytes().rstrip(b"\0").decode()) == EXPECTED_MACROS
    _no_canary(tmp_path)


# --- CMake -------------------------------------------------------------------------------------


def test_cmake_argument_carries_every_hostile_value(tmp_path: Path) -> None:
    """Each value CMake can hold, set by a rendered command and written back by CMake itself;
    and as a -D C string in COMPILE_OPTIONS, back out of the program CMake and Ninja build."""
    cmake = require_tool("cmake")
    require_tool("ninja")
    require_tool("cc")
    keys = [k for k in HOSTILE if k not in ("semicolon", "newline", "nul")]
    env = quoting.environment().by_kind["cmake"]
    script = env.from_string(
        "{% for v in values %}set(V{{ loop.index0 }} {{ v | cmake_argument }})\n"
        'file(WRITE "${OUT}/v{{ loop.index0 }}" "${V{{ loop.index0 }}}")\n{% endfor %}'
    ).render(values=[HOSTILE[k] for k in keys])
    (tmp_path / "set.cmake").write_text(script)
    subprocess.run([cmake, f"-DOUT={tmp_path}", "-P", str(tmp_path / "set.cmake")], check=True,
                   capture_output=True)
    for i, key in enumerate(keys):
        assert (tmp_path / f"v{i}").read_bytes() == HOSTILE[key].encode(), key

    src = tmp_path / "src"
    src.mkdir()
    all_keys = [k for k in HOSTILE if k not in ("semicolon", "nul")]  # a newline is \012 in C
    (src / "CMakeLists.txt").write_text(env.from_string(
        "cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES C)\n"
        "add_executable(probe probe.c)\n"
        "{% for f in flags %}target_compile_options(probe PRIVATE {{ f | cmake_argument }})\n"
        "{% endfor %}").render(
        flags=[f"-DV{i}={quoting.c_string(HOSTILE[k])}" for i, k in enumerate(all_keys)]))
    (src / "probe.c").write_text(
        "#include <stdio.h>\nint main(void) {\n" + "".join(
            f'  fputs(V{i}, stdout); fputs("\\n--\\n", stdout);\n' for i in range(len(all_keys)))
        + "  return 0;\n}\n")
    build = tmp_path / "build"
    for step in ([cmake, "-G", "Ninja", "-S", str(src), "-B", str(build)],
                 [cmake, "--build", str(build)]):
        proc = subprocess.run(step, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = subprocess.run([str(build / "probe")], capture_output=True).stdout
    assert printed.split(b"\n--\n")[:-1] == [HOSTILE[k].encode() for k in all_keys]
    _no_canary(tmp_path)


@pytest.mark.parametrize("value, bad", [("a;b", ";"), ("a\nb", "\n"), ("a\0b", "\0"),
                                        ("$<TARGET_FILE:x>", "$<")])
def test_cmake_refuses_what_it_cannot_carry(value: str, bad: str) -> None:
    with pytest.raises(ServerError) as info:
        quoting.cmake_argument(value)
    assert f"holds {bad!r}" in _one_line(info.value)
    with pytest.raises(ServerError, match="which CMake cannot carry in a path"):
        quoting.check_cmake_path(value, "cmsis_path")


#: A stand-in for Zephyr's CMake package: enough of its functions for our CMakeLists.txt to be
#: configured by real CMake, and a dump of what the application's targets received.
FAKE_ZEPHYR_CONFIG = r"""
add_library(app STATIC)
set(ZEPHYR_CURRENT_LIBRARY "" CACHE INTERNAL "")
function(zephyr_library_named name)
  add_library(${name} STATIC)
  set(ZEPHYR_CURRENT_LIBRARY ${name} CACHE INTERNAL "")
endfunction()
function(zephyr_library_sources)
  target_sources(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_include_directories)
  target_include_directories(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_options)
  target_compile_options(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_compile_definitions)
  target_compile_definitions(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(zephyr_library_link_libraries)
  target_link_libraries(${ZEPHYR_CURRENT_LIBRARY} PRIVATE ${ARGN})
endfunction()
function(fake_zephyr_dump)
  get_target_property(options app COMPILE_OPTIONS)
  get_target_property(includes tvm_model INCLUDE_DIRECTORIES)
  file(WRITE "$ENV{DUMP}" "${CMSIS_PATH}\n")
  foreach(item IN LISTS options includes)
    file(APPEND "$ENV{DUMP}" "${item}\n")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL fake_zephyr_dump)
"""


def test_zephyr_cmakelists_carries_paths_and_definitions(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A cmsis_path folder named with every hostile character a folder name can hold and C
    string -D values: real CMake configures the rendered CMakeLists.txt (Zephyr's functions
    stood in for) and hands each value to the targets intact."""
    cmake = require_tool("cmake")
    require_tool("ninja")
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)
    mlf = add_mlf(tmp_path / "add.tar")
    cmsis = tmp_path / 'cm"sis $(touch CANARY) `touch CANARY` $$HOME a\\b #c *x'
    (cmsis / "CMSIS").mkdir(parents=True)
    prj = tmp_path / "prj"
    generate_project("zephyr", mlf, prj, {"cmsis_path": str(cmsis),
                                          "compile_definitions": DEFINITIONS}).close()
    fake = tmp_path / "fake_zephyr"
    fake.mkdir()
    (fake / "ZephyrConfig.cmake").write_text(FAKE_ZEPHYR_CONFIG)
    dump = tmp_path / "dump.txt"
    env = {**os.environ, "ZEPHYR_BASE": str(fake), "DUMP": str(dump)}
    proc = subprocess.run([cmake, "-G", "Ninja", "-S", str(prj), "-B", str(tmp_path / "b")],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dump.read_text().splitlines()
    assert lines[0] == str(cmsis)
    assert set(compile_definitions(DEFINITIONS)) <= set(lines)
    assert f"{cmsis}/CMSIS/NN/Include" in lines
    _no_canary(tmp_path)


def test_zephyr_refuses_paths_cmake_cannot_carry(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)
    mlf = add_mlf(tmp_path / "add.tar")
    semi = tmp_path / "a;b"
    semi.mkdir()
    cases = [({"cmsis_path": str(semi)}, tmp_path / "p1", "cmsis_path"),
             ({"zephyr_base": str(semi)}, tmp_path / "p2", "zephyr_base"),
             ({}, semi / "prj", "the project directory")]
    for options, prj, what in cases:
        with pytest.raises(ProjectAPIError) as info:
            generate_project("zephyr", mlf, prj, options).close()
        assert f"{what} '" in _one_line(info.value) and "holds ';'" in str(info.value)
        assert not prj.exists()


def test_zephyr_extra_files_tar_from_an_odd_path(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """extra_files_tar is read by Python only: a path with a space, '$', ';' and a newline
    works."""
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)
    mlf = add_mlf(tmp_path / "add.tar")
    extra = tmp_path / ODD_DIR / "extra $(x).tar"
    extra.parent.mkdir()
    (tmp_path / "notes.txt").write_text("kept\n")
    with tarfile.open(extra, "w") as tar:
        tar.add(tmp_path / "notes.txt", arcname="notes.txt")
    prj = tmp_path / "prj"
    generate_project("zephyr", mlf, prj, {"extra_files_tar": str(extra)}).close()
    assert (prj / "notes.txt").read_text() == "kept\n"


# --- prj.conf (Kconfig) ------------------------------------------------------------------------


@pytest.mark.parametrize("key", HOSTILE)
def test_kconfig_value_quotes_or_refuses(key: str) -> None:
    value = HOSTILE[key]
    expected = {"semicolon": '"a;b"', "dollar_paren": '"$(touch CANARY)"',
                "backtick": '"`touch CANARY`"', "dollar_dollar": '"$$HOME"', "quote": '"a\\"b"',
                "backslash": '"a\\\\b"', "hash": '"a#b"', "comment_end": '"a*/b"'}
    if key in ("newline", "nul"):
        with pytest.raises(ServerError) as info:
            quoting.kconfig_value(value)
        assert f"holds {OFFENDING[key]!r}" in _one_line(info.value)
    else:
        assert quoting.kconfig_value(value) == expected[key]
    assert (quoting.kconfig_value(True), quoting.kconfig_value(False)) == ("y", "n")
    assert quoting.kconfig_value(4096) == "4096"


def _render_zephyr(name: str, **values: object) -> str:
    env = quoting.environment(paths.template_dir("zephyr") / "templates")
    board = yaml.safe_load((paths.template_dir("zephyr") / "boards.yaml").read_text())["boards"]
    context = dict(board_name="qemu_cortex_m3", board=board["qemu_cortex_m3"],
                   project_type="host_driven", workspace_size_bytes=16384,
                   config_main_stack_size=None, warning_as_error=False)
    context.update(values)
    return env.get_template(name).render(context)


@pytest.mark.parametrize("key", HOSTILE)
def test_prj_conf_gets_no_line_from_a_value(key: str) -> None:
    """A value that is not a number cannot add a Kconfig line: refused, or one quoted value."""
    hostile = f"1{HOSTILE[key]}\nCONFIG_INJECTED=y"
    with pytest.raises(ServerError) as info:
        _render_zephyr("prj.conf.j2", config_main_stack_size=hostile)
    _one_line(info.value)
    with pytest.raises(ServerError, match="cannot be written into a kconfig file"):
        _render_zephyr("prj.conf.j2", project_type=f"x{HOSTILE[key]}")
    conf = _render_zephyr("prj.conf.j2", config_main_stack_size=f"1{HOSTILE[key]}".replace(
        "\n", "").replace("\0", ""))
    stack = [line for line in conf.splitlines() if line.startswith("CONFIG_MAIN_STACK_SIZE")]
    assert len(stack) == 1 and stack[0].startswith('CONFIG_MAIN_STACK_SIZE="1')


# --- the linker script -------------------------------------------------------------------------


@pytest.mark.parametrize("key", HOSTILE)
def test_linker_script_comment_and_numbers(tmp_path: Path, key: str) -> None:
    """Only numbers and the board's text reach firmware.ld: a description with the hostile value
    stays in its comment (the script links, _stack_size is ours), a non-number is refused."""
    gcc = require_tool("arm-none-eabi-gcc")
    nm = require_tool("arm-none-eabi-nm")
    boards = yaml.safe_load((paths.template_dir("stm32") / "boards.yaml").read_text())["boards"]
    board = dict(boards["qemu_netduinoplus2"], description=f"d {HOSTILE[key]} _stack_size = 7;")
    env = quoting.environment(paths.template_dir("stm32") / "templates")
    script = env.get_template("firmware.ld.j2").render(board_name="qemu_netduinoplus2",
                                                       board=board, stack_size_bytes=4096)
    (tmp_path / "firmware.ld").write_text(script)
    (tmp_path / "x.c").write_text("void Reset_Handler(void) { for (;;) {} }\n")
    subprocess.run([gcc, "-mcpu=cortex-m4", "-mthumb", "-nostdlib", "-T",
                    str(tmp_path / "firmware.ld"), str(tmp_path / "x.c"), "-o",
                    str(tmp_path / "x.elf")], check=True, capture_output=True)
    symbols = subprocess.run([nm, str(tmp_path / "x.elf")], capture_output=True, text=True).stdout
    assert re.search(r"^00001000 \w _stack_size$", symbols, re.M), symbols
    with pytest.raises(ServerError, match="cannot be written into a ld file"):
        env.get_template("firmware.ld.j2").render(board_name="qemu_netduinoplus2", board=board,
                                                  stack_size_bytes=f"1{HOSTILE[key]}")


# --- C: strings, comments, identifiers ---------------------------------------------------------


#: Names that break a C comment or string on main: every hostile value, '/*' (a -Wcomment error
#: under -Werror) and '*', backslash, newline, '/' (a line splice that closes the comment).
C_NAMES = [v for k, v in HOSTILE.items() if k != "nul"] + ["x /* y", "z*\\\n/ int evil;"]


def _flat_module(name: str, inputs: list[str], outputs: list[str]) -> ModuleInfo:
    run = f"tvmgen_{quoting.c_identifier(name)}_run_model"
    return ModuleInfo(
        name=name, executors=["aot"], style="full-model",
        inputs=[TensorInfo(n, f"in{i}", "int8", 1, (1,)) for i, n in enumerate(inputs)],
        outputs=[TensorInfo(n, f"out{i}", "int8", 1, (1,)) for i, n in enumerate(outputs)],
        workspace_size_bytes=0, constants_size_bytes=0, io_size_bytes=None,
        interface_header=None, sources=[], run_function=run)


def test_names_reach_c_strings_and_comments_intact(tmp_path: Path) -> None:
    """Module and tensor names with every hostile value (and '/*', and a backslash-newline
    that would close a comment): the glue compiles under -Werror and the program, looking each
    module up by its name, prints back exactly the names it was generated from."""
    cc = require_tool("cc")
    mods = [_flat_module(f"m{i} {name}", [name], [f"o{name}"]) for i, name in enumerate(C_NAMES)]
    contexts = [glue.module_context(m, "host") for m in mods]
    text = glue.render_model_glue(quoting.environment(), contexts)
    (tmp_path / "model_glue.c").write_text(text)
    stubs = "".join(f"int32_t {c['run_function']}(void* a, void* b) "
                    "{ (void)a; (void)b; return 0; }\n" for c in contexts)
    (tmp_path / "main.c").write_text(
        "#include <stdint.h>\n#include <stdio.h>\n#include <tvm/runtime/crt/aot_model.h>\n"
        + stubs + "int main(int argc, char** argv) {\n  int i;\n"
        "  for (i = 1; i < argc; i++) {\n"
        "    const TVMCrtAotModel* m = TVMCrtAotModel_Lookup(argv[i]);\n"
        "    if (m == NULL) return 1;\n"
        "    printf(\"%s\\x1f%s\\x1f%s\\x1e\", m->name, m->inputs[0].name, m->outputs[0].name);\n"
        "  }\n  return 0;\n}\n")
    include = paths.crt_dir() / "include"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{include}", "-o",
                    str(tmp_path / "probe"), str(tmp_path / "model_glue.c"),
                    str(tmp_path / "main.c")], check=True, capture_output=True, text=True)
    symbols = subprocess.run(["nm", str(tmp_path / "probe")], capture_output=True, text=True)
    assert not re.search(r"\sevil$", symbols.stdout, re.M)  # no declaration escaped a comment
    out = subprocess.run([str(tmp_path / "probe"), *(m.name for m in mods)],
                         capture_output=True).stdout
    assert out.split(b"\x1e")[:-1] == [
        f"{m.name}\x1f{m.inputs[0].name}\x1f{m.outputs[0].name}".encode() for m in mods]


def test_nul_in_a_name_is_refused() -> None:
    with pytest.raises(ServerError) as info:
        glue.module_context(_flat_module("a\0b", ["x"], ["y"]), "host")
    assert "its name holds a NUL character" in _one_line(info.value)
    with pytest.raises(ServerError, match=r"input 'x\\x00y': its name holds a NUL"):
        glue.module_context(_flat_module("m", ["x\0y"], ["y"]), "host")
    with pytest.raises(ServerError, match="a C string cannot carry"):
        quoting.c_string("a\0b")


@pytest.mark.parametrize("key", HOSTILE)
def test_archive_names_for_c_identifiers_are_checked(key: str) -> None:
    """The interface header's struct member names are pasted as C identifiers (in.<member>):
    anything but an identifier is refused, naming the header."""
    mod = _flat_module("default", ["x"], ["y"])
    mod.run_function = "tvmgen_default_run"
    mod.interface_header = Path("/p/model/codegen/host/include/tvmgen_default.h")
    mod.inputs[0] = TensorInfo("x", "in" + HOSTILE[key], "int8", 1, (1,))
    with pytest.raises(ServerError) as info:
        glue.module_context(mod, "host")
    assert ("the member of struct tvmgen_default_inputs in codegen/host/include/"
            "tvmgen_default.h" in _one_line(info.value))
    assert "is not a C identifier" in str(info.value)
    for bad in ("int", "9a", "é", ""):
        with pytest.raises(ServerError, match="is not a C identifier"):
            quoting.check_c_identifier(bad, "x")
    assert quoting.c_identifier(HOSTILE[key]) == re.sub(r"\W", "_", HOSTILE[key], flags=re.A)


def test_c_comment_and_c_string_render_every_value_as_data() -> None:
    """No value ends a comment or string early, or leaves the line (a newline, or a backslash
    before one, would splice lines)."""
    for value in [*HOSTILE.values(), "x /* y", "z*\\\n/"]:
        comment = quoting.c_comment(value)
        assert "*/" not in comment and "/*" not in comment and "\n" not in comment, value
        if "\0" not in value:
            literal = quoting.c_string(value)
            assert "\n" not in literal and re.fullmatch(r'"([^"\\?]|\\.)*"', literal), value


def test_emitted_header_keeps_tflite_names_in_comments(tmp_path: Path) -> None:
    """A .tflite is data: tensor names that close a comment or start a directive stay text in
    the emitted interface header, which compiles under -Werror."""
    cc = require_tool("cc")
    from project_api.emit import emit
    from project_api.tflite.builder import ModelBuilder

    mb = ModelBuilder(seed=1)
    x = mb.input((1, 4), "int8", quant=(1 / 128, 0), name="in */ int injected = 1; /*")
    y = mb.reshape(x, (1, 4))
    mb.output(y)
    mb._tensors[y.index].name = "out\n#error injected"  # the builder names outputs itself
    (tmp_path / "m.tflite").write_bytes(mb.build())
    emit(tmp_path / "m.tflite", tmp_path / "m.tar", name="default")
    with tarfile.open(tmp_path / "m.tar") as tar:
        tar.extractall(tmp_path / "m", filter="data")
    codegen = tmp_path / "m" / "codegen" / "host"
    obj = tmp_path / "lib0.o"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-c",
                    f"-I{codegen / 'include'}", f"-I{paths.crt_dir() / 'include'}", "-o", str(obj),
                    str(codegen / "src" / "default_lib0.c")], check=True, capture_output=True)
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    assert "injected" not in symbols
    meta = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert "in */ int injected = 1; /*" in json.dumps(meta)


# --- the Jinja environments --------------------------------------------------------------------


def _all_templates() -> list[Path]:
    roots = [paths.template_dir(t) / "templates" for t in ("host", "stm32", "zephyr", "riscv")]
    return sorted(p for root in [*roots, quoting.JINJA_DIR] for p in root.glob("*.j2"))


def test_every_template_has_a_file_kind() -> None:
    kinds = {p.name: quoting.kind_of(p.name) for p in _all_templates()}
    assert kinds["Makefile.j2"] == "make" and kinds["CMakeLists.txt.j2"] == "cmake"
    assert kinds["prj.conf.j2"] == "kconfig" and kinds["firmware.ld.j2"] == "ld"
    assert {kinds[n] for n in kinds if n.endswith((".c.j2", ".h.j2"))} == {"c"}
    with pytest.raises(ServerError, match="no file kind"):
        quoting.kind_of("notes.txt.j2")


@pytest.mark.parametrize("kind", sorted(quoting.INERT))
@pytest.mark.parametrize("key", HOSTILE)
def test_an_unescaped_value_is_refused_in_every_file_kind(kind: str, key: str) -> None:
    env = quoting.environment().by_kind[kind]
    with pytest.raises(ServerError) as info:
        env.from_string("x {{ v }} y").render(v=f"v{HOSTILE[key]}")
    assert f"cannot be written into a {kind} file as it is" in _one_line(info.value)
    other = "make" if kind != "make" else "c"
    with pytest.raises(ServerError):  # text escaped for another kind is not escaped for this one
        env.from_string("{{ v }}").render(v=quoting._TEXT[other]("a"))
    assert env.from_string("{{ n }} {{ s }}").render(n=42, s="plain_1.0") == "42 plain_1.0"


# --- command lines -----------------------------------------------------------------------------


def _serial_number_options() -> list:
    out = []
    for name in ("stm32", "zephyr", "riscv"):
        sys.path.insert(0, str(paths.template_dir(name)))
        try:
            spec_path = paths.template_dir(name) / "microtvm_api_server.py"
            import importlib.util

            spec = importlib.util.spec_from_file_location(f"{name}_server_injection", spec_path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        finally:
            sys.path.pop(0)
        out += [o for o in module.Handler.OPTIONS if o.name == "serial_number"]
    return out


@pytest.mark.parametrize("key", HOSTILE)
def test_serial_number_keeps_to_its_grammar(key: str) -> None:
    """It reaches OpenOCD's Tcl (-c "adapter serial ...", west's --cmd-pre-init) and flash tools'
    own parsers: refused unless letters, digits and ._:-."""
    options = _serial_number_options()
    assert len(options) == 3
    for opt in options:
        with pytest.raises(ServerError) as info:
            opt.check(f"066D{HOSTILE[key]}")
        assert "option serial_number='066D" in _one_line(info.value)
        assert opt.check("066DFF495351") == "066DFF495351"
    with pytest.raises(ServerError, match="OpenOCD takes only"):
        zephyr_tree.flash_serial_args("openocd", f"066D{HOSTILE[key]}")


def test_nul_in_any_option_is_refused() -> None:
    opt = remote.REMOTE_OPTIONS[0]  # serial_url: free text otherwise
    with pytest.raises(ServerError) as info:
        opt.check("socket://a\0b:1")
    assert "holds a NUL character" in _one_line(info.value)


def test_openocd_never_sees_the_project_path(tmp_path: Path) -> None:
    """OpenOCD's program procedure evals its file name again: it gets the bare image name and
    runs in the image's folder, whatever the folder is called."""
    folder = tmp_path / "a b $(touch CANARY) [exit] {x} ;\"\\#"
    folder.mkdir()
    image = folder / "firmware.elf"
    image.write_bytes(b"\x7fELF")
    board = {"name": "b", "openocd_interface": "interface/stlink.cfg",
             "openocd_target": "target/stm32f4x.cfg"}
    with mock.patch("shutil.which", return_value="/usr/bin/openocd"), \
            mock.patch.object(flash.OpenOcdRunner, "output", return_value="Open On-Chip "
                              "Debugger 0.12.0\n"), \
            mock.patch.object(flash.OpenOcdRunner, "check_call") as call:
        flash.OpenOcdRunner().flash(image, board, "066DFF", lambda f: None)
    argv, log = call.call_args.args
    assert call.call_args.kwargs == {"cwd": folder}
    assert argv[-1] == "program {firmware.elf} verify reset exit"
    assert not any(str(folder) in a or "CANARY" in a for a in argv)
    with pytest.raises(ServerError, match="OpenOCD takes only"):
        flash.OpenOcdRunner().argv("/usr/bin/openocd", image, board, "0 [exit]", (0, 12))


def test_labgrid_keeper_takes_place_and_coordinator_as_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A place named like an option stays the value of --place (one NAME=VALUE word)."""
    seen: list[list[str]] = []

    class Stop(Exception):
        pass

    def popen(argv: list[str], **kwargs: object) -> None:
        seen.append(argv)
        raise Stop

    monkeypatch.setattr(labgrid_place, "require_labgrid", lambda: None)
    monkeypatch.setattr(labgrid_place.subprocess, "Popen", popen)
    with pytest.raises(Stop):
        labgrid_place.acquire_place("--coordinator=evil:1", "-h:1")
    assert seen[0][-3:] == ["--coordinator=-h:1", "--place=--coordinator=evil:1", "--wait=0.0"]


@pytest.mark.parametrize("line_class", [QemuSerialLine, QemuSocketLine])
def test_qemu_chardev_paths_double_commas(tmp_path: Path, line_class: type) -> None:
    """QEMU splits -chardev on commas: a temporary folder with one must not add an option."""
    folder = tmp_path / "a,server=off,b"
    folder.mkdir()
    line = line_class(directory=folder)
    try:
        (arg,) = [a for a in line.qemu_args("uart") if a.startswith(("pipe,", "socket,"))]
        path = re.search(r"path=((?:[^,]|,,)*)", arg).group(1)
        assert path.replace(",,", ",").startswith(str(folder))
    finally:
        line.close()


def test_west_cmd_is_a_command_split_into_argv(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """west_cmd is a command by design; it is split like a shell would but never run by one:
    hostile characters are only parts of words, and a missing program or an unbalanced quote
    (main: "internal error: ValueError") is one line."""
    monkeypatch.chdir(tmp_path)
    for value in HOSTILE.values():
        try:
            argv = zephyr_tree.west_argv(f"west{value.replace(chr(0), '')} build")
        except ProjectAPIError as exc:
            assert re.search(r"west not found|No closing quotation", _one_line(exc))
        else:
            assert argv[-1] == "build"
    _no_canary(tmp_path)


def test_no_shell_anywhere() -> None:
    """Every program we run is an argv list: no shell=True, os.system or os.popen in the package
    or the templates. (A guard: main had none either.)"""
    roots = [Path(paths.__file__).resolve().parent, paths.template_dir("host").parent]
    found = [f"{p}:{n}" for root in roots for p in root.rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"shell\s*=\s*True|os\.system\(|os\.popen\(", line)]
    assert found == []


def test_generate_hint_is_shell_quoted(tmp_path: Path) -> None:
    """The 'next:' command the CLI prints is pasted into a shell: the folder is quoted."""
    mlf = add_mlf(tmp_path / "add.tar")
    proc = _cli("generate", "--template", "host", "--model", str(mlf), "--out",
                "p $(touch CANARY);x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "next: project-api build 'p $(touch CANARY);x'" in proc.stdout
    _no_canary(tmp_path)

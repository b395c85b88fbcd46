"""project_api.template: declared options, the command runner, and the layering rules."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from project_api.errors import BuildError, JSONRPCError, MissingProgramError, ServerError
from project_api.system import paths
from project_api.template import (
    OPTIONS_FILE,
    Link,
    ProjectType,
    TemplateHandler,
    check_declared,
    compile_definitions,
    first_error,
    load_options,
    option,
    project_type_option,
    require,
    run_logged,
    save_options,
)
from project_api.template.common_options import COMMON, common
from project_api.template.targets import family_of, templates_building_for

OPTIONS = [
    option("size", "int", default=2048, minimum=256, maximum=65536, optional=["generate_project"],
           help="A size."),
    option("kind", "str", choices=["a", "b"], default="a", optional=["generate_project"],
           help="A kind."),
    option("name", "str", required=["generate_project"], help="A name."),
    option("loud", "bool", default=False, optional=["build"], help="Be loud."),
]


def test_bounds_reach_the_help_and_the_wire_keeps_seven_keys() -> None:
    wire = OPTIONS[0].wire
    assert wire.help == "A size. (range 256..65536)"
    assert list(wire._asdict()) == ["name", "choices", "default", "type", "required", "optional",
                                    "help"]
    with pytest.raises(TypeError, match="bounds apply to int options only"):
        option("x", "str", minimum=1, help="x")


def test_check_declared_fills_defaults_and_checks() -> None:
    values = check_declared(OPTIONS, {"name": "n"}, "generate_project")
    assert values == {"size": 2048, "kind": "a", "name": "n", "loud": False}
    cases = [
        ({"name": "n", "sise": 1}, "unknown option 'sise' for the t template; did you mean "
                                   "'size'? valid options: kind, loud, name, size"),
        ({"name": "n", "size": 99999999999}, "option size=99999999999 is above its maximum 65536; "
                                             "pass -o size=N with N in 256..65536"),
        ({"name": "n", "size": 1}, "option size=1 is below its minimum 256"),
        ({"name": "n", "size": True}, "option size must be an integer; got True"),
        ({"name": "n", "kind": "c"}, "option kind='c' is not one of a, b"),
        ({}, "option name is required by generate_project; pass -o name=<value>"),
    ]
    for given, message in cases:
        with pytest.raises(ServerError, match=re.escape(message)):
            check_declared(OPTIONS, given, "generate_project", "the t template")
    # Without the method, a missing required option is not an error (build need not repeat it).
    assert check_declared(OPTIONS, {})["name"] is None


def test_compile_definitions() -> None:
    assert compile_definitions("-DFOO=1 -UBAR", {"FOO": 2, "FAST": 8}) == ["-DFAST=8", "-DFOO=1",
                                                                          "-UBAR"]
    assert compile_definitions(None) == []
    with pytest.raises(ServerError, match="'-O3' is not a -DNAME"):
        compile_definitions("-O3")


def test_options_file_round_trip_and_corrupt_file(tmp_path: Path) -> None:
    assert load_options(tmp_path) == {}
    save_options(tmp_path, {"b": 1, "a": "x"})
    assert load_options(tmp_path) == {"a": "x", "b": 1}
    (tmp_path / OPTIONS_FILE).write_text("{not json")
    with pytest.raises(ServerError, match=rf"{OPTIONS_FILE} is corrupt .*regenerate the project"):
        load_options(tmp_path)
    (tmp_path / OPTIONS_FILE).write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        load_options(tmp_path, error=ValueError)


GCC_LOG = """\
  CC      src/main.c
In file included from src/main.c:3:
src/model_glue.c: In function 'f':
src/model_glue.c:12:5: warning: unused variable 'x' [-Wunused-variable]
model/codegen/host/src/default_lib1.c:40:10: fatal error: arm_acle.h: No such file or directory
src/other.c:3:1: error: expected ';' before '}' token
make: *** [Makefile:40: build/obj/src/main.o] Error 1
"""


def test_first_error_prefers_the_first_compiler_error() -> None:
    assert first_error(GCC_LOG.splitlines()) == (
        "model/codegen/host/src/default_lib1.c:40:10: arm_acle.h: No such file or directory")
    link = ["/usr/bin/ld: build/obj/src/main.o: in function `main':",
            "main.c:(.text+0x1c): undefined reference to `tvmgen_default_run'",
            "collect2: error: ld returned 1 exit status", "make: *** [Makefile:3: x] Error 1"]
    assert first_error(link) == "main.c:(.text+0x1c): undefined reference to `tvmgen_default_run'"
    assert first_error(["make: *** No rule to make target 'x'.  Stop."]) == (
        "make: *** No rule to make target 'x'.  Stop.")
    assert first_error(["all good"]) is None


def test_run_logged_keeps_the_log_and_names_the_first_error(tmp_path: Path) -> None:
    script = tmp_path / "fake_make.py"
    script.write_text("import sys\nsys.stdout.write(" + repr(GCC_LOG) + ")\nsys.exit(2)\n")
    log = tmp_path / "build" / "build.log"
    with pytest.raises(BuildError) as info:
        run_logged([sys.executable, str(script)], cwd=tmp_path, log_path=log)
    err = info.value
    assert str(err) == ("build failed: model/codegen/host/src/default_lib1.c:40:10: arm_acle.h: "
                        f"No such file or directory; full log: {log}")
    assert err.data["log"] == str(log)
    assert "src/other.c:3:1: error" in log.read_text()  # the whole output is kept
    ok = tmp_path / "ok.py"
    ok.write_text("print('fine')\n")
    run_logged([sys.executable, str(ok)], cwd=tmp_path, log_path=log)
    assert log.read_text().endswith("fine\n")


def test_missing_program_travels_with_its_detail() -> None:
    with pytest.raises(MissingProgramError, match="'no-such-tool-xyz' is not installed .*; apt"):
        require("no-such-tool-xyz", "apt-get install it")
    err = MissingProgramError("'make' is not installed; install make")
    try:
        raise err
    except MissingProgramError as exc:
        exc.set_traceback(exc.__traceback__)
    # microTVM's client shows only the traceback: the detail is its last line.
    assert err.data["traceback"].endswith("MissingProgramError: 'make' is not installed; "
                                          "install make\n")
    back = JSONRPCError.from_json("calling method build", err.to_json())
    assert isinstance(back, MissingProgramError)
    assert back.detail == "'make' is not installed; install make"
    assert str(back) == "calling method build: 'make' is not installed; install make"


def test_targets(tmp_path: Path) -> None:
    assert family_of("cortex-m4") == "cortex-m" and family_of("Cortex-M55") == "cortex-m"
    (tmp_path / "mcu").mkdir()
    (tmp_path / "mcu" / "boards.yaml").write_text("boards:\n  b1:\n    cpu: cortex-m7\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "boards.yaml").write_text("b2:\n  cpu: riscv32\n")
    assert templates_building_for("cortex-m", tmp_path) == ["mcu"]
    assert templates_building_for("riscv", tmp_path) == ["other"]
    assert templates_building_for("arm", tmp_path) == ["mcu"]  # any Arm family builds Arm code


# --- options through the base class: the server is the authority ------------------------------


class _Saved(TemplateHandler):
    PLATFORM_NAME = "saved"
    OPTIONS = [
        option("rate", "int", default=1, optional=["generate_project", "open_transport"],
               help="A rate."),
        option("name", "str", optional=["generate_project"], help="A name."),
    ]


def test_an_explicit_default_is_kept_and_sets_the_saved_value_back(tmp_path: Path) -> None:
    """A value given for a step is used even when it equals the default: a project generated
    with rate=5 can be set back to 1 at open_transport (it used to keep 5)."""
    (tmp_path / "model.tar").write_bytes(b"")
    save_options(tmp_path, {"rate": 5, "name": "n"})
    handler = _Saved(project_dir=tmp_path)
    assert handler.options_for("open_transport", {})["rate"] == 5  # saved
    assert handler.options_for("open_transport", {"rate": 1})["rate"] == 1  # the default, given
    assert handler.options_for("open_transport", {"name": "m"})["name"] == "n"  # generate only
    with pytest.raises(ServerError, match="unknown option 'rat' for the saved template; did you "
                                          "mean 'rate'"):
        handler.options_for("open_transport", {"rat": 2})
    with pytest.raises(ServerError, match="option rate must be an integer"):
        handler.options_for("open_transport", {"rate": "fast"})


# --- project types as data --------------------------------------------------------------------

TYPES = {
    "rpc_fw": ProjectType(sources=("src/a.c",), crt="host_driven", link="rpc",
                          help="an RPC server", banner=b"ready"),
    "files": ProjectType(sources=("src/b.c",), crt="standalone", link=None,
                         help="runs on files"),
}


class _Typed(TemplateHandler):
    PLATFORM_NAME = "typed"
    PROJECT_TYPES = TYPES
    OPTIONS = [project_type_option(TYPES)]

    def do_open_transport(self, values: dict) -> Link:
        raise AssertionError("a type without a link must be refused before the hook runs")


def test_project_type_option_and_the_wire() -> None:
    wire = project_type_option(TYPES).wire
    assert wire.choices == ["rpc_fw", "files"] and wire.default == "rpc_fw"
    assert wire.help == "rpc_fw: an RPC server; files: runs on files."
    info = _Typed(project_dir=Path("/nonexistent")).server_info_query("0.15.0")
    assert info["project_types"] == {"rpc_fw": {"link": "rpc"}, "files": {"link": None}}
    assert info["fills_defaults"] is True and info["platform_name"] == "typed"
    with pytest.raises(TypeError, match="OPTIONS must hold project_type_option"):
        type("NoOption", (TemplateHandler,), {"PROJECT_TYPES": TYPES, "OPTIONS": []})
    with pytest.raises(ValueError, match="link 'uart'"):
        ProjectType(sources=(), crt="x", link="uart", help="")


def test_open_transport_refuses_a_type_without_a_link_at_once(tmp_path: Path) -> None:
    (tmp_path / "model.tar").write_bytes(b"")
    save_options(tmp_path, {"project_type": "files"})
    with pytest.raises(ServerError) as info:
        _Typed(project_dir=tmp_path).open_transport({})
    assert info.value.message == (f"open_transport: {tmp_path} is a files project "
                                  "(project_type=files): its firmware has no link to the host; "
                                  "generate the project again with -o project_type=rpc_fw")


def test_receive_ring_rule() -> None:
    """One rule for every template: an RPC link holds one whole framed packet, any other link a
    short line (the mlperftiny ring was 8 KiB on stm32 and 1 KiB on zephyr)."""
    rpc, bench, none = (ProjectType((), "c", link, "h") for link in ("rpc", "mlperftiny", None))
    assert [rpc.rx_ring_bytes(n) for n in (256, 2048, 4096, 8192)] == [1024, 4096, 8192, 16384]
    assert bench.rx_ring_bytes(4096) == none.rx_ring_bytes(4096) == 1024


def _template_handlers() -> dict[str, type]:
    import importlib.util

    handlers = {}
    for name in ("host", "stm32", "zephyr", "riscv"):
        spec = importlib.util.spec_from_file_location(
            f"{name}_server_for_common", paths.template_dir(name) / "microtvm_api_server.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[spec.name] = module  # type: ignore[union-attr]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        handlers[name] = module.Handler
    return handlers


def test_templates_take_the_common_options_from_the_library() -> None:
    """A template overrides a common option's default, range or help, never its type, its
    steps or its characters; and its project types' sources exist (in the template, or the
    bare-metal mains the library holds)."""
    from project_api.template.bare_metal import FIRMWARE_DIR

    for name, handler in _template_handlers().items():
        by_name = {o.name: o for o in handler.OPTIONS}
        assert by_name["project_type"].wire == project_type_option(handler.PROJECT_TYPES).wire
        for common_name in set(by_name) & set(COMMON):
            ours, base = by_name[common_name], common(common_name)
            assert (ours.wire.type, ours.methods, ours.chars) == \
                (base.wire.type, base.methods, base.chars), f"{name}: {common_name}"
        for kind in handler.PROJECT_TYPES.values():
            for src in kind.sources:
                assert (paths.template_dir(name) / src).is_file() or \
                    (FIRMWARE_DIR / Path(src).name).is_file(), f"{name}: {src}"


# --- reopening a link: the board is reset first (issue 21) -------------------------------------


class _Resetting(TemplateHandler):
    """A template whose link is a loop and whose do_reset counts (or fails, when told to)."""

    PLATFORM_NAME = "resetting"
    OPTIONS = [option("fail_reset", "bool", default=False, optional=["open_transport"],
                      help="Make do_reset fail."),
               option("port", "str", default="loop://", optional=["open_transport"],
                      help="The link's pyserial URL.")]

    def __init__(self, project_dir: Path) -> None:
        super().__init__(project_dir)
        self.events: list[str] = []

    def do_reset(self, values: dict) -> None:
        self.events.append("reset")
        if values["fail_reset"]:
            raise ServerError(message="the probe is held by another debugger")

    def do_open_transport(self, values: dict) -> Link:
        from project_api.template import uart_link

        self.events.append("open")
        return uart_link(values["port"], 115200)


def test_open_transport_resets_before_every_reopen_not_the_first(tmp_path: Path) -> None:
    (tmp_path / "model.tar").write_bytes(b"")
    handler = _Resetting(tmp_path)
    handler.open_transport({})
    assert handler.events == ["open"]
    handler.close_transport()
    handler.open_transport({})
    assert handler.events == ["open", "reset", "open"]
    handler.open_transport({})  # the link it holds is closed first: a reopen too
    assert handler.events == ["open", "reset", "open", "reset", "open"]
    handler.close_transport()
    assert TemplateHandler.do_reset(handler, {}) is None  # the default does nothing


def test_a_first_open_that_failed_opened_nothing_to_reset(tmp_path: Path) -> None:
    """Only a link this server opened counts: after a first open whose link did not open,
    the next open resets nothing."""
    (tmp_path / "model.tar").write_bytes(b"")
    handler = _Resetting(tmp_path)
    with pytest.raises(ServerError, match="cannot open"):
        handler.open_transport({"port": str(tmp_path / "ttyACM9")})
    handler.open_transport({})
    assert handler.events == ["open", "open"]
    handler.close_transport()


def test_a_failed_reset_is_one_warning_and_the_link_opens(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "model.tar").write_bytes(b"")
    handler = _Resetting(tmp_path)
    handler.open_transport({})
    handler.close_transport()
    with caplog.at_level("WARNING"):
        reply = handler.open_transport({"fail_reset": True})
    assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
    assert handler.events == ["open", "reset", "open"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "open_transport: could not reset the board before reopening its link (the probe is "
        "held by another debugger); opening it anyway"]
    handler.close_transport()

#!/usr/bin/env python3
"""Project API server of the host template: the "device" is ``build/main``, a process on this host.

A generated project holds everything it needs to build (the C runtime sources, the model, a
Makefile), so it keeps working after the template is gone. Project types:

* ``host_driven``: ``build/main`` is an RPC server on its stdin/stdout; ``open_transport`` starts
  it and also offers the FIFO fast path, so our client skips the JSON-RPC hop per read/write.
* ``standalone``: ``build/main`` runs the model on raw input files (see ``src/standalone.c``)
  and links only the TVM backend library; it has no transport.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

from project_api import server
from project_api.errors import IoTimeoutError, ServerError, TransportClosedError

_LOG = logging.getLogger(__name__)

PROJECT_DIR = Path(__file__).resolve().parent
MODEL_LIBRARY_FORMAT_RELPATH = "model.tar"
IS_TEMPLATE = not (PROJECT_DIR / MODEL_LIBRARY_FORMAT_RELPATH).exists()
BUILD_TARGET = "build/main"
# Generate-time options, kept in the project: build/open_transport get only the defaults of
# options scoped to generate_project from a client that did not generate the project itself.
PROJECT_OPTIONS_FILE = "project_options.json"

PROJECT_TYPES = ("host_driven", "standalone")
WORKSPACE_SIZE_BYTES = 2 * 1024 * 1024
MAX_PACKET_SIZE_BYTES = 2048
# Finite timeouts: a host process answers in microseconds, so silence means it is dead or stuck.
TIMEOUTS = server.TransportTimeouts(
    session_start_retry_timeout_sec=1.0,
    session_start_timeout_sec=10.0,
    session_established_timeout_sec=20.0,
)
# Speed knobs of the C runtime this template sets unless compile_definitions names them.
FAST_DEFINES = {"TVM_CRT_CRC16_TABLE_SLICES": 8}
# Slack on top of the model's workspace_size_bytes for allocator alignment padding and tags.
MODEL_WORKSPACE_SLACK_BYTES = 1024

# Sources each project type needs from the C runtime (relative to standalone_crt_dir/src).
CRT_SOURCES = {
    "standalone": ("backend", "memory/stack_allocator.c"),
    "host_driven": None,  # every library under src/
}
APP_SOURCES = {
    "host_driven": ("src/main.c", "src/platform.c", "src/model_glue.c"),
    "standalone": ("src/standalone.c", "src/platform.c", "src/model_glue.c"),
}

PROJECT_OPTIONS = [
    server.ProjectOption(
        "project_type", choices=list(PROJECT_TYPES), default="host_driven", type="str",
        optional=["generate_project"],
        help="host_driven: an RPC server the host drives; standalone: runs the model on input files.",
    ),
    server.ProjectOption(
        "verbose", default=False, type="bool", optional=["build"],
        help="Run make with verbose output.",
    ),
    server.ProjectOption(
        "workspace_size_bytes", default=WORKSPACE_SIZE_BYTES, type="int",
        optional=["generate_project"],
        help="Sets the value of TVM_WORKSPACE_SIZE_BYTES (the runtime memory pool).",
    ),
    server.ProjectOption(
        "warning_as_error", default=False, type="bool", optional=["generate_project"],
        help="Treat warnings as errors (-Werror).",
    ),
    server.ProjectOption(
        "compile_definitions", default=None, type="str", optional=["generate_project"],
        help="Extra -D/-U flags for every C file, e.g. \"-DFOO=1 -UBAR\".",
    ),
    server.ProjectOption(
        "max_packet_size_bytes", default=MAX_PACKET_SIZE_BYTES, type="int",
        optional=["generate_project"],
        help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (microTVM hosts "
             "accept at most 2048).",
    ),
    server.ProjectOption(
        "sanitize", default=False, type="bool", optional=["generate_project"],
        help="Build the device with AddressSanitizer and UndefinedBehaviorSanitizer.",
    ),
]

_DTYPE_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4}


def _fail(message: str) -> ServerError:
    return ServerError(message=message)


def _c_string(text: str) -> str:
    """A C string literal for ``text`` (non-printable and non-ASCII bytes as octal escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _dtype_fields(dtype: str, where: str) -> tuple[int, int, int]:
    """DLDataType (code, bits, lanes) of a dtype string such as int8, float32 or int8x4."""
    if dtype == "bool":
        return 1, 8, 1
    m = re.fullmatch(r"(bfloat|float|uint|int)(\d+)(?:x(\d+))?", dtype)
    if m is None:
        raise _fail(f"{where}: dtype {dtype!r} is not supported by the host template")
    return _DTYPE_CODES[m.group(1)], int(m.group(2)), int(m.group(3) or 1)


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    """Generate-time options with defaults filled in and values checked."""
    opts = {o.name: options.get(o.name, o.default) for o in PROJECT_OPTIONS}
    if opts["project_type"] not in PROJECT_TYPES:
        raise _fail(
            f"project_type {opts['project_type']!r} is not one of {', '.join(PROJECT_TYPES)}"
        )
    for name, minimum in (("workspace_size_bytes", 4096), ("max_packet_size_bytes", 256)):
        value = opts[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise _fail(f"option {name} must be an integer >= {minimum}; got {value!r}")
    defs = shlex.split(opts["compile_definitions"] or "")
    for d in defs:
        if not re.fullmatch(r"-[DU][A-Za-z_]\w*(=.*)?", d):
            raise _fail(
                f"compile_definitions: {d!r} is not a -DNAME[=VALUE] or -UNAME flag; "
                "pass e.g. \"-DFOO=1 -DBAR\""
            )
    # A desktop CPU has memory to spare: the CRC's fast variant (crc16.h) unless the user chose.
    defaults = [f"-D{name}={value}" for name, value in FAST_DEFINES.items()
                if not any(re.match(rf"-[DU]{name}(=|$)", d) for d in defs)]
    opts["compile_definition_flags"] = [shlex.quote(d) for d in defaults + defs]
    return opts


def _module_context(mod: Any) -> dict[str, Any]:
    """What the glue template needs to know about one MLF module; every fact comes from the MLF."""
    where = f"module {mod.name!r}"
    if "aot" not in mod.executors:
        raise _fail(
            f"{where} was built for the {'/'.join(mod.executors) or 'unknown'} executor; the host "
            "template runs AOT modules only: rebuild with the AOT executor"
        )
    if mod.run_function is None:
        raise _fail(
            f"{where}: no entry point tvmgen_<name>_run or tvmgen_<name>_run_model in its "
            "interface header or generated C; export with the C interface API (interface-api=c)"
        )
    api = "flat" if mod.run_function.endswith("_run_model") else "struct"
    prefix = mod.run_function[: -len("_run_model" if api == "flat" else "_run")]
    if api == "struct" and mod.interface_header is None:
        raise _fail(f"{where}: {mod.run_function} needs the interface header tvmgen_<name>.h")

    def tensors(items: list[Any], kind: str) -> list[dict[str, Any]]:
        out = []
        for t in items:
            what = f"{where}, {kind} {t.name!r}"
            if t.shape is None:
                raise _fail(f"{what}: the archive records no shape; re-export it with its Relay text")
            code, bits, lanes = _dtype_fields(t.dtype, what)
            out.append({
                "name": t.name, "c_name": t.c_name, "size_bytes": t.size_bytes,
                "shape": list(t.shape), "dtype_code": code, "dtype_bits": bits, "dtype_lanes": lanes,
            })
        return out

    return {
        "name": mod.name, "prefix": prefix, "ident": "host_" + re.sub(r"\W", "_", mod.name),
        "api": api, "run_function": mod.run_function,
        "inputs": tensors(mod.inputs, "input"), "outputs": tensors(mod.outputs, "output"),
        "workspace_size_bytes": mod.workspace_size_bytes,
    }


class Handler(server.ProjectAPIHandler):
    """The host template's Project API handler."""

    def __init__(self) -> None:
        super().__init__()
        self._proc: subprocess.Popen | None = None
        self._endpoint: Any = None
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        atexit.register(self.close_transport)

    # --- info ---------------------------------------------------------------------------------

    def server_info_query(self, tvm_version: str) -> server.ServerInfo:
        return server.ServerInfo(
            platform_name="host",
            is_template=IS_TEMPLATE,
            model_library_format_path=(
                "" if IS_TEMPLATE else str(PROJECT_DIR / MODEL_LIBRARY_FORMAT_RELPATH)
            ),
            project_options=PROJECT_OPTIONS,
        )

    # --- generate -------------------------------------------------------------------------------

    def generate_project(
        self, model_library_format_path: Path, standalone_crt_dir: Path, project_dir: Path,
        options: dict,
    ) -> None:
        opts = _check_options(options)
        project_dir = Path(project_dir)
        if project_dir.exists():
            raise _fail(f"project directory {project_dir} already exists; pick a new one or remove it")
        if not Path(model_library_format_path).is_file():
            raise _fail(f"model {model_library_format_path} is not a file; pass an MLF .tar")
        if not (Path(standalone_crt_dir) / "include").is_dir():
            raise _fail(f"standalone_crt_dir {standalone_crt_dir} holds no include/ directory")
        project_dir.mkdir(parents=True)
        try:
            self._generate(Path(model_library_format_path), Path(standalone_crt_dir), project_dir, opts)
        except BaseException:
            shutil.rmtree(project_dir, ignore_errors=True)
            raise

    def _generate(self, mlf_path: Path, crt_dir: Path, project_dir: Path, opts: dict) -> None:
        import jinja2

        from project_api import mlf  # the generated project's server needs neither at run time

        shutil.copy2(__file__, project_dir / "microtvm_api_server.py")
        shutil.copy2(mlf_path, project_dir / MODEL_LIBRARY_FORMAT_RELPATH)
        model_dir = project_dir / "model"
        mlf.safe_extract(project_dir / MODEL_LIBRARY_FORMAT_RELPATH, model_dir)
        library = mlf.open_mlf(model_dir)
        if library.has_bundled_runtime:
            _LOG.info("ignoring the archive's bundled ./runtime and ./templates: this project "
                      "uses project-api's C runtime")
        modules = [_module_context(m) for m in library.modules.values()]

        self._copy_crt(crt_dir, project_dir / "crt", opts["project_type"])
        (project_dir / "src").mkdir()
        for rel in APP_SOURCES[opts["project_type"]]:
            if rel != "src/model_glue.c":
                shutil.copy2(PROJECT_DIR / rel, project_dir / rel)

        max_ws = max((m["workspace_size_bytes"] for m in modules), default=0)
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(PROJECT_DIR / "templates")),
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True, trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters["c_string"] = _c_string
        context = dict(
            opts, modules=modules, app_sources=APP_SOURCES[opts["project_type"]],
            max_model_workspace_bytes=max_ws,
            model_workspace_bytes=(max_ws + MODEL_WORKSPACE_SLACK_BYTES + 15) // 16 * 16,
        )
        (project_dir / "crt_config").mkdir()
        for template, dest in (
            ("Makefile.j2", "Makefile"),
            ("crt_config.h.j2", "crt_config/crt_config.h"),
            ("model_glue.c.j2", "src/model_glue.c"),
        ):
            (project_dir / dest).write_text(env.get_template(template).render(context))
        kept = {o.name: opts[o.name] for o in PROJECT_OPTIONS if o.name != "verbose"}
        (project_dir / PROJECT_OPTIONS_FILE).write_text(json.dumps(kept, indent=2) + "\n")
        _LOG.info("generated %s project in %s (modules: %s)", opts["project_type"], project_dir,
                  ", ".join(m["name"] for m in modules))

    @staticmethod
    def _copy_crt(crt_dir: Path, dest: Path, project_type: str) -> None:
        shutil.copytree(crt_dir / "include", dest / "include")
        wanted = CRT_SOURCES[project_type]
        if wanted is None:
            wanted = tuple(p.name for p in sorted((crt_dir / "src").iterdir()) if p.is_dir())
        for rel in wanted:
            src = crt_dir / "src" / rel
            if src.is_dir():
                shutil.copytree(src, dest / "src" / rel)
            elif src.is_file():
                (dest / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / "src" / rel)
            else:
                raise _fail(f"the C runtime at {crt_dir} lacks src/{rel}; reinstall project-api")

    # --- build and flash ------------------------------------------------------------------------

    def _require_generated(self, what: str) -> dict[str, Any]:
        if IS_TEMPLATE:
            raise _fail(f"{what}: {PROJECT_DIR} is the template; generate a project first")
        path = PROJECT_DIR / PROJECT_OPTIONS_FILE
        return json.loads(path.read_text()) if path.is_file() else {"project_type": "host_driven"}

    def build(self, options: dict) -> None:
        self._require_generated("build")
        make = shutil.which("make")
        if make is None:
            raise _fail("build: 'make' is not installed; install make and a C compiler (cc)")
        jobs = max(1, min(4, os.cpu_count() or 1))
        cmd = [make, "-C", str(PROJECT_DIR), f"-j{jobs}"]
        if options.get("verbose"):
            cmd.append("V=1")
        _LOG.info("building: %s", shlex.join(cmd))
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        log_level = logging.INFO if options.get("verbose") else logging.DEBUG
        for line in (proc.stdout + proc.stderr).splitlines():
            _LOG.log(log_level, "make: %s", line)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise _fail(f"build failed (make exited with {proc.returncode}):\n{tail}")

    def flash(self, options: dict) -> None:
        self._require_generated("flash")
        _LOG.info("flash: nothing to do for the host template; open_transport starts %s",
                  BUILD_TARGET)

    # --- transport ------------------------------------------------------------------------------

    def open_transport(self, options: dict) -> dict:
        kept = self._require_generated("open_transport")
        if kept.get("project_type") != "host_driven":
            raise _fail(
                "open_transport: this is a standalone project with no RPC server; run "
                f"{BUILD_TARGET} on input files, or generate with project_type=host_driven"
            )
        binary = PROJECT_DIR / BUILD_TARGET
        if not binary.is_file():
            raise _fail(f"open_transport: {binary} does not exist; build the project first")
        self.close_transport()
        self._endpoint = endpoint = server.FifoEndpoint()
        try:
            device_in, device_out = endpoint.open_device_fds(blocking=True)
            try:
                self._proc = subprocess.Popen(
                    [str(binary)], cwd=PROJECT_DIR, stdin=device_in, stdout=device_out
                )
            finally:
                os.close(device_in)
                os.close(device_out)
            # Our own ends, used only by clients that ignore the fast path (TVM's).
            self._read_fd = os.open(endpoint.rx_path, os.O_RDONLY | os.O_NONBLOCK)
            self._write_fd = os.open(endpoint.tx_path, os.O_WRONLY | os.O_NONBLOCK)
        except BaseException:
            self.close_transport()
            raise
        _LOG.info("started %s (pid %d)", BUILD_TARGET, self._proc.pid)
        return {"timeouts": TIMEOUTS, "endpoint": endpoint.to_json()}

    def close_transport(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            _LOG.debug("device process exited with %s", proc.returncode)
        for fd in (self._read_fd, self._write_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._read_fd = self._write_fd = None
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            endpoint.close()

    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        if self._read_fd is None:
            raise TransportClosedError()
        try:
            return server.read_with_timeout(self._read_fd, n, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: end of file from the device")
            self.close_transport()
            raise

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        if self._write_fd is None:
            raise TransportClosedError()
        try:
            written = server.write_with_timeout(self._write_fd, data, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: the device stopped reading")
            self.close_transport()
            raise
        if written < len(data):
            raise IoTimeoutError()


if __name__ == "__main__":
    server.main(Handler())

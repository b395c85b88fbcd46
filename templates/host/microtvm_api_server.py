#!/usr/bin/env python3
"""Project API server of the host template: the "device" is ``build/main``, a process on this host.

What makes this platform different from the others (everything else is project_api.template):
the system C compiler and ``make`` build the project, there is nothing to flash, and
``open_transport`` starts ``build/main`` on a pair of FIFOs, which it also offers to our client as
a fast path. Project types: ``host_driven`` (``build/main`` is an RPC server on stdin/stdout) and
``standalone`` (``build/main`` runs the model on raw input files; see ``src/standalone.c``).
"""

from __future__ import annotations

import os
import shlex

from project_api import server
from project_api.crt_manifest import read_manifest
from project_api.errors import FlashError, ServerError
from project_api.template import (
    DeviceProcess,
    NewProject,
    TemplateHandler,
    TransportMixin,
    ai_api,
    compile_definitions,
    option,
    require,
    run_logged,
)
from project_api.transport import FdTransport

BUILD_TARGET = "build/main"
# Finite timeouts: a host process answers in microseconds, so silence means it is dead or stuck.
TIMEOUTS = server.TransportTimeouts(
    session_start_retry_timeout_sec=1.0,
    session_start_timeout_sec=10.0,
    session_established_timeout_sec=20.0,
)
# Speed knobs of the C runtime this template sets unless compile_definitions names them.
FAST_DEFINES = {"TVM_CRT_CRC16_TABLE_SLICES": 8}
# Our sources per project type (the runtime's come from its manifest, crt/libraries.txt).
APP_SOURCES = {
    "host_driven": ("src/main.c", "src/platform.c"),
    "standalone": ("src/standalone.c", "src/platform.c"),
    "mlperftiny": ("src/mlperftiny.c", "src/mlperftiny_model.c"),
}
# Project types whose build/main talks on stdin/stdout (open_transport runs it on FIFOs).
INTERACTIVE = ("host_driven", "mlperftiny")


class Handler(TransportMixin, TemplateHandler):
    """The host template's Project API handler."""

    PLATFORM_NAME = "host"
    BUILDS_FOR = ("host",)
    # include/arm_acle.h: the ACLE intrinsics in portable C, for TVM's Cortex-M DSP kernels.
    EMULATED_HEADERS = ("arm_acle.h",)
    OPTIONS = [
        option("project_type", "str", choices=list(APP_SOURCES), default="host_driven",
               optional=["generate_project"],
               help="host_driven: an RPC server the host drives; standalone: runs the model on "
                    "input files; mlperftiny: the MLPerf Tiny benchmark protocol on "
                    "stdin/stdout."),
        ai_api.MLPERFTINY_MODEL_OPTION,
        option("verbose", "bool", default=False, optional=["build"],
               help="Run make with verbose output."),
        option("workspace_size_bytes", "int", default=2 * 1024 * 1024, minimum=4096,
               maximum=1 << 30, optional=["generate_project"],
               help="Sets the value of TVM_WORKSPACE_SIZE_BYTES (the runtime memory pool)."),
        option("warning_as_error", "bool", default=False, optional=["generate_project"],
               help="Treat warnings as errors (-Werror)."),
        option("compile_definitions", "str", optional=["generate_project"],
               help="Extra flags for every C file: -DNAME, -DNAME=VALUE or -UNAME, VALUE a number, "
                    "identifier or C string of letters, digits, spaces and _.,:/+=-, e.g. "
                    "'-DFOO=1 -DVERSION=\"1.2\" -UBAR'."),
        option("max_packet_size_bytes", "int", default=2048, minimum=256, maximum=16 << 20,
               optional=["generate_project"],
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (microTVM "
                    "hosts accept at most 2048)."),
        option("sanitize", "bool", default=False, optional=["generate_project"],
               help="Build the device with AddressSanitizer and UndefinedBehaviorSanitizer."),
    ]

    def render(self, project: NewProject) -> None:
        kind = project.options["project_type"]
        crt_sources = [str(p) for p in read_manifest(project.crt_dir).project_sources(kind)]
        project.copy_crt(crt_sources)
        project.copy(*(s for s in APP_SOURCES[kind] if s != "src/mlperftiny_model.c"))
        project.copy("include/arm_acle.h")
        model_sources = project.write_model_glue()
        if kind == "mlperftiny":
            ai_api.write_mlperftiny_model(project, project.options["mlperftiny_model"])
        project.write_crt_config({
            "TVM_CRT_LOG_LEVEL": ("TVM_CRT_LOG_LEVEL_DEBUG", "Device logs reach the host."),
            "TVM_CRT_MAX_PACKET_SIZE_BYTES": (project.options["max_packet_size_bytes"],
                                              "Largest RPC packet, length header included."),
            "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES": (project.workspace_bytes(),
                                               "Model workspace given to TVMCrtWorkspace_Init."),
        }, title=f'host template, project type "{kind}"')
        flags = compile_definitions(project.options["compile_definitions"], FAST_DEFINES)
        project.render("Makefile.j2", "Makefile", compile_definition_flags=flags,
                       app_sources=(*APP_SOURCES[kind], *model_sources),
                       crt_sources=[f"crt/{s}" for s in crt_sources])

    def build(self, options: dict) -> None:
        values = self.options_for("build", options)
        self.check_targets()
        make = require("make", "install make and a C compiler, e.g. 'apt-get install make gcc'")
        require(shlex.split(os.environ.get("CC") or "cc")[0],
                "install a C compiler, e.g. 'apt-get install gcc'")
        cmd = [make, "-C", str(self.project_dir), f"-j{max(1, min(4, os.cpu_count() or 1))}"]
        if values["verbose"]:
            cmd.append("V=1")
        run_logged(cmd, cwd=self.project_dir, log_path=self.project_dir / "build" / "build.log")

    def flash(self, options: dict) -> None:
        self.require_generated("flash")
        if not (self.project_dir / BUILD_TARGET).is_file():
            raise FlashError(f"nothing to flash: {BUILD_TARGET} is not built; run "
                             "'project-api build' first")

    def open_transport(self, options: dict) -> dict:
        if self.require_generated("open_transport")["project_type"] not in INTERACTIVE:
            raise ServerError(message="open_transport: this is a standalone project with no RPC "
                              f"server; run {BUILD_TARGET} on input files, or generate with "
                              "project_type=host_driven")
        binary = self.project_dir / BUILD_TARGET
        if not binary.is_file():
            raise ServerError(message=f"open_transport: {binary} does not exist; build the "
                                      "project first ('project-api build')")
        self.close_transport()
        endpoint = server.FifoEndpoint()
        try:
            device_in, device_out = endpoint.open_device_fds(blocking=True)
            try:
                device = DeviceProcess([binary], cwd=self.project_dir, stdin=device_in,
                                       stdout=device_out)
            finally:
                os.close(device_in)
                os.close(device_out)
            # Our own ends, used only by clients that ignore the fast path (microTVM's).
            self.attach(FdTransport.for_fifos(endpoint.rx_path, endpoint.tx_path, TIMEOUTS),
                        device, endpoint)
        except BaseException:
            endpoint.close()
            self.close_transport()
            raise
        return {"timeouts": TIMEOUTS, "endpoint": endpoint.to_json()}


if __name__ == "__main__":
    server.main(Handler())

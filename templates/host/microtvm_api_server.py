#!/usr/bin/env python3
"""Project API server of the host template: the "device" is ``build/main``, a process on this host.

What makes this platform different from the others (everything else is project_api.template):
the system C compiler and ``make`` build the project, there is nothing to flash, and
``open_transport`` starts ``build/main`` on a pair of FIFOs, which it also offers to our client as
a fast path. Project types: ``host_driven`` (``build/main`` is an RPC server on stdin/stdout),
``standalone`` (``build/main`` runs the model on raw input files; see ``src/standalone.c``) and
``mlperftiny`` (the benchmark's protocol on stdin/stdout).
"""

from __future__ import annotations

import os
import shlex

from project_api import server
from project_api.errors import FlashError, ServerError
from project_api.template import (
    Link,
    NewProject,
    ProjectType,
    TemplateHandler,
    common,
    compile_definitions,
    option,
    process_link,
    project_type_option,
    require,
    run_logged,
)
from project_api.template.mlperftiny_model import MLPERFTINY_MODEL_OPTION
from project_api.template.profile import PROFILE_OPTION

BUILD_TARGET = "build/main"
# Finite timeouts: a host process answers in microseconds, so silence means it is dead or stuck.
TIMEOUTS = server.TransportTimeouts(
    session_start_retry_timeout_sec=1.0,
    session_start_timeout_sec=10.0,
    session_established_timeout_sec=20.0,
)
# Speed knobs of the C runtime this template sets unless compile_definitions names them.
FAST_DEFINES = {"TVM_CRT_CRC16_TABLE_SLICES": 8}
PROJECT_TYPES = {
    "host_driven": ProjectType(sources=("src/main.c", "src/platform.c"), crt="host_driven",
                               link="rpc", help="an RPC server the host drives"),
    "standalone": ProjectType(sources=("src/standalone.c", "src/platform.c"), crt="standalone",
                              link=None, help="runs the model on input files"),
    "mlperftiny": ProjectType(sources=("src/mlperftiny.c",), crt="mlperftiny",
                              link="mlperftiny", model="mlperftiny",
                              help="the MLPerf Tiny benchmark protocol on stdin/stdout"),
}


class Handler(TemplateHandler):
    """The host template's Project API handler."""

    PLATFORM_NAME = "host"
    PROJECT_TYPES = PROJECT_TYPES
    BUILDS_FOR = ("host",)
    # include/arm_acle.h: the ACLE intrinsics in portable C, for TVM's Cortex-M DSP kernels.
    EMULATED_HEADERS = ("arm_acle.h",)
    OPTIONS = [
        project_type_option(PROJECT_TYPES),
        MLPERFTINY_MODEL_OPTION,
        common("verbose"),
        common("workspace_size_bytes", default=2 * 1024 * 1024),
        common("max_model_workspace_bytes"),
        common("warning_as_error"),
        common("compile_definitions"),
        common("max_packet_size_bytes", default=2048, maximum=16 << 20,
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (microTVM "
                    "hosts accept at most 2048)."),
        PROFILE_OPTION,
        option("sanitize", "bool", default=False, optional=["generate_project"],
               help="Build the device with AddressSanitizer and UndefinedBehaviorSanitizer."),
    ]

    def render(self, project: NewProject) -> None:
        kind = project.options["project_type"]
        crt_sources = project.crt_sources
        project.copy_crt(crt_sources)
        project.copy(*project.project_type.sources, "include/arm_acle.h")
        model_sources, _ = project.write_model_sources()
        project.write_crt_config(f'host template, project type "{kind}"', {
            "TVM_CRT_LOG_LEVEL": ("TVM_CRT_LOG_LEVEL_DEBUG", "Device logs reach the host.")})
        flags = compile_definitions(project.options["compile_definitions"], FAST_DEFINES)
        project.render("Makefile.j2", "Makefile", compile_definition_flags=flags,
                       app_sources=(*project.project_type.sources, *model_sources),
                       crt_sources=[f"crt/{s}" for s in crt_sources])

    def do_build(self, values: dict) -> None:
        make = require("make", "install make and a C compiler, e.g. 'apt-get install make gcc'")
        require(shlex.split(os.environ.get("CC") or "cc")[0],
                "install a C compiler, e.g. 'apt-get install gcc'")
        cmd = [make, "-C", str(self.project_dir), f"-j{max(1, min(4, os.cpu_count() or 1))}"]
        if values["verbose"]:
            cmd.append("V=1")
        run_logged(cmd, cwd=self.project_dir, log_path=self.project_dir / "build" / "build.log")

    def do_flash(self, values: dict) -> None:
        if not (self.project_dir / BUILD_TARGET).is_file():
            raise FlashError(f"nothing to flash: {BUILD_TARGET} is not built; run "
                             "'project-api build' first")

    def do_open_transport(self, values: dict) -> Link:
        binary = self.project_dir / BUILD_TARGET
        if not binary.is_file():
            raise ServerError(message=f"open_transport: {binary} does not exist; build the "
                                      "project first ('project-api build')")
        return process_link([binary], cwd=self.project_dir, timeouts=TIMEOUTS)


if __name__ == "__main__":
    server.main(Handler())

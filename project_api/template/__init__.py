"""The template library: what every template server shares, so a template is only its platform.

A template's ``microtvm_api_server.py`` imports from here and implements a few hooks (render,
build, flash, open_transport); see :class:`TemplateHandler`. The parts:

* :mod:`.handler`: :class:`TemplateHandler` (info, the generate skeleton with rollback, the
  project's saved options) and :class:`NewProject` (what ``render`` gets);
* :mod:`.options`: declared options with bounds (:func:`option`), their checks, the one options
  file per project, the ``compile_definitions`` grammar;
* :mod:`.glue`: the model glue and ``crt_config.h`` generators and their Jinja2 files (``jinja/``);
* :mod:`.graph_lowering`: graph-executor models lowered to static C (``src/graph_model.c``)
  behind the same glue, and their memory beside TVM's graph executor's;
* :mod:`.quoting`: one escaping function per consumer (C, Makefile, CMake, Kconfig, linker
  script, Tcl, QEMU options) and the Jinja2 environments, one per file kind, that refuse any
  value not escaped for their kind;
* :mod:`.runner`: :func:`require` for programs, :func:`run_logged` for builds (full log in the
  project, first compiler error in the message);
* :mod:`.transport`: :class:`TransportMixin` (read/write/close over
  :mod:`project_api.transport`, ``open_uart``), :class:`DeviceProcess`, :class:`SerialEndpoint`;
* :mod:`.qemu`: emulated boards: the serial line on FIFOs or a socket, QEMU that dies with the
  server, the ready banner (``run_emulator``);
* :mod:`.ai_api`: the generated ``ai_`` C API of standalone projects, the MLPerf Tiny model file;
* :mod:`.memory`: the memory report of a GNU ld map;
* :mod:`.targets`: CPU families and the templates that build for them;
* :mod:`.flash`: flash runners (pyOCD, OpenOCD, STM32CubeProgrammer, QEMU) behind one interface;
* :mod:`.serial_ports`: a board's serial port found by USB ID and serial number, opened as a UART;
* :mod:`.remote`: boards on other machines: ``-o serial_url`` (any pyserial URL), ``-o
  labgrid_place`` (a labgrid place held while the transport is open), ``-o probe=remote:...``;
* :mod:`.zephyr`: Zephyr's tree (version, board RAM, board names), west and the devicetree.

This package imports nothing from ``templates/``; the templates import it.
"""

from project_api.template.handler import (
    SERVER_SCRIPT,
    NewProject,
    TemplateHandler,
    load_boards,
)
from project_api.template.options import (
    OPTIONS_FILE,
    DeclaredOption,
    check_declared,
    compile_definitions,
    load_options,
    option,
    save_options,
)
from project_api.template.runner import first_error, require, run_logged
from project_api.template.transport import DeviceProcess, SerialEndpoint, TransportMixin

__all__ = [
    "OPTIONS_FILE",
    "SERVER_SCRIPT",
    "DeclaredOption",
    "DeviceProcess",
    "NewProject",
    "SerialEndpoint",
    "TemplateHandler",
    "load_boards",
    "TransportMixin",
    "check_declared",
    "compile_definitions",
    "first_error",
    "load_options",
    "option",
    "require",
    "run_logged",
    "save_options",
]

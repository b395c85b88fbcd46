"""The template library: what every template server shares, so a template is only its platform.

A template's ``microtvm_api_server.py`` imports from here, declares its project types, options
and boards as data and implements a few hooks (render, do_build, do_flash, do_open_transport);
see :class:`TemplateHandler`. The parts:

* :mod:`.handler`: :class:`TemplateHandler` (info, the generate skeleton with rollback, the
  project's saved options, the device link it attaches, serves and closes);
* :mod:`.new_project`: :class:`NewProject`, what ``render`` gets: checked options, the project
  type, the archive, and writers of the runtime's sources, the model's C and ``crt_config.h``;
* :mod:`.project_types`: :class:`ProjectType` (sources, crt project, link, ready banner, model
  C), the ``project_type`` option, the receive ring's size;
* :mod:`.options`: declared options with bounds (:func:`option`), their checks, the one options
  file per project, the ``compile_definitions`` grammar;
* :mod:`.common_options`: the options most templates share, declared once (:func:`common`);
* :mod:`.boards`: ``boards.yaml``, a template's boards as data (with shared ``defaults``);
* :mod:`.link`: :class:`Link`, the device link a template's ``do_open_transport`` returns;
  :func:`uart_link`, :func:`process_link`, :class:`DeviceProcess`, :class:`SerialEndpoint`;
* :mod:`.qemu`: emulated boards: the serial line on FIFOs or a socket, QEMU that dies with the
  server, the ready banner (:func:`~.qemu.emulator_link`);
* :mod:`.serial_ports`: a board's serial port found by USB ID and serial number, opened as a UART;
* :mod:`.remote`: boards on other machines (``-o serial_url``, ``-o labgrid_place``, ``-o
  probe=remote:...``): the options and :func:`~.remote.remote_link`; :mod:`.remote_serial` (a
  UART at a pyserial URL), :mod:`.labgrid_place` (holding a place, flashing through it),
  :mod:`.labgrid_keeper` (the program that holds it), :mod:`.labgrid_owner` (who holds it, and
  a dead holder's place released);
* :mod:`.flash`: flash runners (pyOCD, OpenOCD, STM32CubeProgrammer, QEMU) behind one interface;
* :mod:`.glue`: the model glue and ``crt_config.h`` generators and their Jinja2 files (``jinja/``);
* :mod:`.ai_api`: the generated ``ai_`` C API of standalone projects; :mod:`.symbols` (renaming
  a module's C symbols); :mod:`.mlperftiny_model` (the MLPerf Tiny model file);
* :mod:`.graph_lowering`: graph-executor models lowered to static C (``src/graph_model.c``)
  behind the same glue, and their memory beside TVM's graph executor's;
* :mod:`.profile` (``-o profile=true``) and :mod:`.profile_build` (the C of a profile build and
  the record it reports, shared with ``emit --profile`` and ``project-api profile``);
* :mod:`.quoting`: one escaping function per consumer (C, Makefile, CMake, Kconfig, linker
  script, Tcl, QEMU options) and the Jinja2 environments, one per file kind, that refuse any
  value not escaped for their kind;
* :mod:`.runner`: :func:`require` for programs, :func:`run_logged` for builds (full log in the
  project, first compiler error in the message);
* :mod:`.elf`: is a firmware image a whole ELF file; :mod:`.memory`: the memory report of a
  GNU ld map; :mod:`.targets`: CPU families and the templates that build for them;
* :mod:`.zephyr`: Zephyr's tree (version, board RAM, board names), west and the devicetree.

This package imports nothing from ``templates/`` nor from the host side (``project_api.cli``,
the client); the templates import it.
"""

from project_api.template.boards import load_boards
from project_api.template.common_options import common
from project_api.template.handler import SERVER_SCRIPT, TemplateHandler
from project_api.template.link import DeviceProcess, Link, SerialEndpoint, process_link, uart_link
from project_api.template.new_project import NewProject
from project_api.template.options import (
    OPTIONS_FILE,
    DeclaredOption,
    check_declared,
    compile_definitions,
    load_options,
    option,
    save_options,
)
from project_api.template.project_types import ProjectType, project_type_option
from project_api.template.runner import first_error, require, run_logged

__all__ = [
    "OPTIONS_FILE",
    "SERVER_SCRIPT",
    "DeclaredOption",
    "DeviceProcess",
    "Link",
    "NewProject",
    "ProjectType",
    "SerialEndpoint",
    "TemplateHandler",
    "check_declared",
    "common",
    "compile_definitions",
    "first_error",
    "load_boards",
    "load_options",
    "option",
    "process_link",
    "project_type_option",
    "require",
    "run_logged",
    "save_options",
    "uart_link",
]

"""The options most templates share, declared once: a template names the ones it takes and
gives only what differs on its platform (a default, a range, a sentence of help)::

    OPTIONS = [
        project_type_option(PROJECT_TYPES),
        common("workspace_size_bytes", default=32 * 1024, maximum=1 << 24),
        common("verbose"),
        ...
    ]

Each entry of :data:`COMMON` is the keyword arguments of :func:`~.options.option`; ``common``
merges the overrides into them, so bounds and characters are written into the help text once,
after the override. ``project_type`` is common too, but it is built from the template's
``PROJECT_TYPES`` (:func:`~.project_types.project_type_option`).
"""

from __future__ import annotations

from typing import Any

from project_api.template.options import SERIAL_NUMBER_CHARS, DeclaredOption, option

#: Every common option's declaration, by name.
COMMON: dict[str, dict[str, Any]] = {
    "verbose": dict(
        type="bool", default=False, optional=["build"],
        help="Run the build tool with verbose output."),
    "workspace_size_bytes": dict(
        type="int", minimum=4096, maximum=1 << 30, optional=["generate_project"],
        help="TVM_WORKSPACE_SIZE_BYTES: the runtime's pool for tensors the host allocates."),
    "max_model_workspace_bytes": dict(
        type="int", default=1 << 30, minimum=4096, maximum=1 << 40, optional=["generate_project"],
        help="The largest model workspace (an archive module's workspace_size_bytes) generate "
             "accepts on a template with no board RAM to check it against."),
    "warning_as_error": dict(
        type="bool", default=False, optional=["generate_project"],
        help="Treat warnings as errors (-Werror), in the runtime and the model's code too."),
    "compile_definitions": dict(
        type="str", optional=["generate_project"],
        help="Extra preprocessor flags: -DNAME, -DNAME=VALUE or -UNAME, VALUE a number, "
             "identifier or C string of letters, digits, spaces and _.,:/+=-, e.g. "
             "'-DFOO=1 -DVERSION=\"1.2\" -UBAR'."),
    "max_packet_size_bytes": dict(
        type="int", default=4096, minimum=256, maximum=1 << 20, optional=["generate_project"],
        help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet."),
    "serial_number": dict(
        type="str", optional=["flash", "open_transport"], chars=SERIAL_NUMBER_CHARS,
        help="The debug probe's serial number: picks the probe and its serial port."),
    "serial_port": dict(
        type="str", optional=["open_transport"],
        help="The board's serial port or pyserial URL (default: found by USB ID)."),
}


def common(name: str, **overrides: Any) -> DeclaredOption:
    """The common option ``name`` with ``overrides`` (any keyword of :func:`~.options.option`:
    ``default``, ``minimum``, ``maximum``, ``help``, ...) in place of its own."""
    if name not in COMMON:
        raise KeyError(f"{name!r} is not a common option; the common options are "
                       f"{', '.join(COMMON)} (declare a platform's own with option())")
    spec = {**COMMON[name], **overrides}
    return option(name, spec.pop("type"), **spec)

"""The project options a server declares (name, type, which calls take it, default, help), and the
default set every template shares.
"""

from __future__ import annotations

import collections
from typing import Any

OPTION_TYPES = ("bool", "str", "int")


class ProjectOption(
    collections.namedtuple(
        "ProjectOption", ["name", "choices", "default", "type", "required", "optional", "help"]
    )
):
    """One option a template project accepts.

    Every field but ``name`` is a keyword. ``type`` (one of ``"bool"``, ``"str"``, ``"int"``) and
    ``help`` are required, and so is at least one of ``required`` / ``optional``: the lists of
    method names (``"generate_project"``, ``"build"``, ...) that need or accept the option.
    ``choices`` and ``default`` default to None. On the wire an option is its 7 fields as a dict,
    in field order.
    """

    __slots__ = ()

    def __new__(
        cls,
        name: str,
        *,
        type: str,  # noqa: A002 - TVM's field name
        help: str,  # noqa: A002 - TVM's field name
        choices: list[Any] | None = None,
        default: Any = None,
        required: list[str] | None = None,
        optional: list[str] | None = None,
    ) -> ProjectOption:
        if not isinstance(name, str) or not name:
            raise ValueError(f"ProjectOption name: want a non-empty str; got {name!r}")
        if type not in OPTION_TYPES:
            raise ValueError(
                f"ProjectOption {name}: type must be one of {', '.join(OPTION_TYPES)}; got {type!r}"
            )
        if required is None and optional is None:
            raise ValueError(
                f"ProjectOption {name}: give required= or optional= (the methods that use it)"
            )
        for field, methods in (("required", required), ("optional", optional)):
            if methods is not None and (
                not isinstance(methods, (list, tuple))
                or not all(isinstance(m, str) for m in methods)
            ):
                raise ValueError(
                    f"ProjectOption {name}: {field} must be a list of method names; got {methods!r}"
                )
        if choices is not None and not isinstance(choices, (list, tuple)):
            raise ValueError(f"ProjectOption {name}: choices must be a list; got {choices!r}")
        return super().__new__(cls, name, choices, default, type, required, optional, help)

    def replace(self, attrs: dict[str, Any]) -> ProjectOption:
        """A copy with the fields in ``attrs`` replaced."""
        return self._replace(**attrs)


_DEFAULT_OPTIONS = [
    ProjectOption(
        "verbose",
        optional=["generate_project"],
        type="bool",
        default=False,
        help="Run build with verbose output.",
    ),
    ProjectOption(
        "project_type",
        required=["generate_project"],
        type="str",
        help="Type of project to generate.",
    ),
    ProjectOption(
        "board",
        required=["generate_project"],
        type="str",
        help="Name of the board to build for.",
    ),
    ProjectOption(
        "cmsis_path",
        optional=["generate_project"],
        type="str",
        help="Path to the CMSIS directory.",
    ),
    ProjectOption(
        "warning_as_error",
        optional=["generate_project"],
        type="bool",
        default=False,
        help="Treat warnings as errors and raise an Exception.",
    ),
    ProjectOption(
        "compile_definitions",
        optional=["generate_project"],
        type="str",
        help="Extra definitions added project compile.",
    ),
    ProjectOption(
        "extra_files_tar",
        optional=["generate_project"],
        type="str",
        help="If given, during generate_project, uncompress the tarball at this path into the project dir.",
    ),
]


def default_project_options(**overrides: dict[str, Any]) -> list[ProjectOption]:
    """The 7 options most templates share; ``name={"field": value}`` replaces fields of one."""
    options = list(_DEFAULT_OPTIONS)
    index = {opt.name: i for i, opt in enumerate(options)}
    for name, attrs in overrides.items():
        if name not in index:
            raise ValueError(f"Option {name} was not found in default ProjectOptions.")
        options[index[name]] = options[index[name]].replace(attrs)
    return options

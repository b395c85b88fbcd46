"""The base of every template's Project API handler: everything that is not platform-specific.

A template server subclasses :class:`TemplateHandler`, declares its platform as data and writes
only what differs between platforms (the hooks, as west's runners implement ``do_run`` under
the base class's ``run``)::

    class Handler(TemplateHandler):
        PLATFORM_NAME = "host"
        PROJECT_TYPES = {"host_driven": ProjectType(...), ...}   # sources, crt, link, banner
        OPTIONS = [project_type_option(PROJECT_TYPES), common("verbose"), option(...), ...]
        BUILDS_FOR = ("host",)            # CPU families it can compile for

        def render(self, project: NewProject) -> None:           # the project's own files
        def do_build(self, values: dict) -> None:
        def do_flash(self, values: dict) -> None:
        def do_open_transport(self, values: dict) -> Link:        # the device link

    if __name__ == "__main__":
        server.main(Handler())

The base owns ``IS_TEMPLATE`` (a directory is a generated project when ``model.tar`` sits beside
its server script), ``server_info_query`` (which also carries the project types' links, and
says that this server fills in defaults and saved options itself), and the generate skeleton:
option checks (names, types, choices and bounds, :mod:`project_api.template.options`: the
server is the authority), the project directory, copying the server script and the archive,
safe extraction, model glue contexts, the options file, and removal of everything when any
step fails. ``build``, ``flash`` and ``open_transport`` check the call's options against the
saved ones once (:meth:`TemplateHandler.options_for`) and hand the values to the hook;
``open_transport`` refuses a project type without a link at once, closes the link it holds,
and opens, replies with and serves the :class:`~project_api.template.link.Link` the hook builds.
The hook may run again after the device went away: it builds the link from the options and
the project alone. Before such a reopen (any ``open_transport`` after one of this server
opened a link) the base calls :meth:`TemplateHandler.do_reset`, which does nothing unless the
template resets its board there (the stm32 template: a real board through its flash runner's
probe); a reset that fails is one warning, and the link is opened anyway.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from project_api.api import server
from project_api.errors import (
    BuildError,
    MLFError,
    OptionValueError,
    ServerError,
    TemplateStepError,
    TransportClosedError,
)
from project_api.template import project_types
from project_api.template.link import Link
from project_api.template.new_project import NewProject
from project_api.template.options import (
    DeclaredOption,
    check_declared,
    check_names,
    load_options,
    save_options,
)
from project_api.template.project_types import ProjectType

_LOG = logging.getLogger(__name__)

MODEL_LIBRARY_FORMAT_RELPATH = "model.tar"
#: The server script's name in every project (what the client launches).
SERVER_SCRIPT = "microtvm_api_server.py"


class TemplateHandler(server.ProjectAPIHandler):
    """What every template server shares; subclasses declare their platform and write the rest."""

    #: ``platform_name`` of ``server_info_query``.
    PLATFORM_NAME: ClassVar[str] = ""
    #: The kinds of firmware it generates, by ``project_type`` (empty: one kind, no such option).
    PROJECT_TYPES: ClassVar[Mapping[str, ProjectType]] = {}
    #: Every option the template takes, with bounds (:func:`project_api.template.option`; the
    #: common ones through :func:`~project_api.template.common_options.common`).
    OPTIONS: ClassVar[list[DeclaredOption]] = []
    #: CPU families the template compiles the model's C for ("host", "cortex-m"); ``build``
    #: checks the model against them first (:meth:`check_targets`), unless there are none.
    BUILDS_FOR: ClassVar[tuple[str, ...]] = ()
    #: Arm-only headers the template supplies itself for code it builds elsewhere (the host
    #: template's portable ``<arm_acle.h>``), so including them is no reason to refuse.
    EMULATED_HEADERS: ClassVar[tuple[str, ...]] = ()
    #: Its boards (:func:`load_boards`), for templates with a ``board`` option.
    BOARDS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.PROJECT_TYPES:
            return
        declared = next((o for o in cls.OPTIONS if o.name == "project_type"), None)
        if declared is None or list(declared.wire.choices or []) != list(cls.PROJECT_TYPES):
            raise TypeError(f"{cls.__name__}: OPTIONS must hold project_type_option(PROJECT_TYPES)"
                            " (its choices are the project types)")

    def __init__(self, project_dir: Path | None = None) -> None:
        super().__init__()
        script = Path(inspect.getfile(type(self))).resolve()
        #: The directory of this server script: the template, or a generated project.
        self.project_dir = Path(project_dir) if project_dir is not None else script.parent
        self._script = script
        self._link: Link | None = None
        #: Links this server opened; while it is 0, open_transport resets nothing.
        self.links_opened = 0
        atexit.register(self.close_transport)

    @property
    def is_template(self) -> bool:
        return not (self.project_dir / MODEL_LIBRARY_FORMAT_RELPATH).exists()

    @property
    def where(self) -> str:
        return f"the {self.PLATFORM_NAME} template"

    # --- info --------------------------------------------------------------------------------

    def server_info_query(self, tvm_version: str) -> dict[str, Any]:
        info = server.ServerInfo(
            platform_name=self.PLATFORM_NAME,
            is_template=self.is_template,
            model_library_format_path=(
                "" if self.is_template else str(self.project_dir / MODEL_LIBRARY_FORMAT_RELPATH)
            ),
            project_options=[o.wire for o in self.OPTIONS],
        )
        # Our extensions (microTVM's client ignores them): the link each project type speaks,
        # and that this server fills in defaults and saved options, so a client sends only
        # what its user gave.
        return {**info._asdict(), "project_types": project_types.to_wire(self.PROJECT_TYPES),
                "fills_defaults": True}

    # --- generate ------------------------------------------------------------------------------

    def render(self, project: NewProject) -> None:
        """Write the platform's own files into ``project.dir`` (sources, build files)."""
        raise NotImplementedError(f"{type(self).__name__} must implement render()")

    def generate_project(
        self, model_library_format_path: Path, standalone_crt_dir: Path, project_dir: Path,
        options: dict,
    ) -> None:
        if not self.is_template:
            raise ServerError(message=f"generate_project: {self.project_dir} is a generated "
                                      "project; generate from the template instead")
        values = check_declared(self.OPTIONS, options, "generate_project", self.where)
        mlf_path, crt_dir, project_dir = (
            Path(model_library_format_path), Path(standalone_crt_dir), Path(project_dir)
        )
        if project_dir.exists():
            raise ServerError(
                message=f"project directory {project_dir} already exists; pick a new one or remove it"
            )
        if not mlf_path.is_file():
            raise ServerError(message=f"model {mlf_path} is not a file; pass the archive's path")
        project_dir.mkdir(parents=True)
        try:
            self._generate(mlf_path, crt_dir, project_dir, values)
        except BaseException:
            shutil.rmtree(project_dir, ignore_errors=True)
            raise

    def _generate(self, mlf_path: Path, crt_dir: Path, project_dir: Path,
                  values: dict[str, Any]) -> None:
        # Imported here: a generated project's server needs neither to build or run.
        from project_api.archive import mlf
        from project_api.template import quoting

        shutil.copy2(self._script, project_dir / SERVER_SCRIPT)
        shutil.copy2(mlf_path, project_dir / MODEL_LIBRARY_FORMAT_RELPATH)
        mlf.safe_extract(project_dir / MODEL_LIBRARY_FORMAT_RELPATH, project_dir / "model")
        if values.get("profile"):  # -o profile=true: the archive's C times every operator
            from project_api.template.profile import instrument_model

            instrument_model(project_dir / "model")
        project = NewProject(
            dir=project_dir, template_dir=self.project_dir, crt_dir=crt_dir,
            options=MappingProxyType(values), platform=self.PLATFORM_NAME,
            project_type=self.project_type(values),
            env=quoting.environment(self.project_dir / "templates"),
        )
        self.check_workspace(project, values)
        self.render(project)
        save_options(project_dir, values)
        _LOG.info("generated a project of %s in %s", self.where, project_dir)

    def workspace_limit(self, values: Mapping[str, Any]) -> tuple[int, str] | None:
        """The most bytes of model workspace one module of a project of ``values`` may take,
        and the words naming that limit and what changes it; None: no limit is known.

        A board with a RAM length in its boards.yaml entry: that RAM. Otherwise the option
        ``max_model_workspace_bytes`` when the template takes it (the host template: a cap)."""
        board = values.get("board")
        if board is not None and board in self.BOARDS:
            ram = (self.BOARDS[board].get("memory") or {}).get("ram") or {}
            length = ram.get("length") if isinstance(ram, dict) else None
            if isinstance(length, int) and length > 0:
                return length, (f"the RAM of board {board} ({length} bytes, boards.yaml); pick "
                                "a board with more RAM (-o board=NAME)")
        cap = values.get("max_model_workspace_bytes")
        if isinstance(cap, int):
            return cap, (f"the cap of {cap} bytes; raise it with "
                         "-o max_model_workspace_bytes=BYTES")
        return None

    def check_workspace(self, project: NewProject, values: Mapping[str, Any]) -> None:
        """OptionValueError, before anything is rendered, when a module's workspace (metadata.json's
        ``workspace_size_bytes``) is larger than :meth:`workspace_limit`, rather than an
        ``#error`` or a link failure in the C build."""
        limit = self.workspace_limit(values)
        if limit is None:
            return
        cap, words = limit
        try:
            modules = project.library.modules.values()
        except MLFError:
            return  # no modules to weigh: whether such an archive will do is render's to say
        for mod in modules:
            need = mod.workspace_size_bytes
            if isinstance(need, int) and need > cap:
                raise OptionValueError(
                    f"generate_project: module {mod.name!r} needs a workspace of {need} bytes, "
                    f"more than {words}")

    # --- the steps after generate ------------------------------------------------------------

    def require_generated(self, method: str) -> dict[str, Any]:
        """The options the project was generated with (defaults where none were saved).

        Raises ServerError when this is the template itself.
        """
        if self.is_template:
            raise ServerError(message=f"{method}: {self.project_dir} is the template; generate "
                                      "a project first ('project-api generate')")
        saved = load_options(self.project_dir)
        return {o.name: saved.get(o.name, o.default) for o in self.OPTIONS}

    def options_for(self, method: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """The values ``method`` runs with, checked: the call's for the options ``method``
        takes (a default given again is a value like any other), the saved ones for the rest.
        OptionValueError for a name the template does not take."""
        values = self.require_generated(method)
        check_names(self.OPTIONS, options, self.where)
        for o in self.OPTIONS:
            if method in o.methods and options.get(o.name) is not None:
                values[o.name] = options[o.name]
        return check_declared(self.OPTIONS, values, method, self.where)

    def project_type(self, values: Mapping[str, Any]) -> ProjectType | None:
        """The PROJECT_TYPES entry of a generated project's ``values`` (None: no types)."""
        return self.PROJECT_TYPES.get(values.get("project_type") or "")

    def board(self, values: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The project's board (``values["board"]``): its name and its :attr:`BOARDS` entry
        with the name in it (``{"name": ..., **entry}``, as the flash runners take it)."""
        name = values["board"]
        return name, {"name": name, **self.BOARDS[name]}

    @functools.cached_property
    def library(self) -> Any:
        """The project's extracted archive (``model/``), as a ModelLibrary, opened once."""
        from project_api.archive import mlf

        return mlf.open_mlf(self.project_dir / "model")

    def check_targets(self, modules: Iterable[Any] | None = None) -> None:
        """BuildError if a module's C builds only for a CPU family this template does not build
        for (see :func:`project_api.template.targets.arch_requirement`)."""
        from project_api.template import targets

        for mod in modules if modules is not None else self.library.modules.values():
            need = targets.arch_requirement(mod, emulated=self.EMULATED_HEADERS)
            if need is None or targets.builds(need[0], self.BUILDS_FOR):
                continue
            family, evidence = need
            others = [t for t in targets.templates_building_for(family)
                      if t != self.PLATFORM_NAME]
            hint = (f"generate it with a template that builds for it: {', '.join(others)}"
                    if others else "no installed template builds for it yet (see "
                                   "'project-api templates'); re-export the model for this host")
            raise BuildError(
                f"module {mod.name!r} targets {targets.family_title(family)} ({evidence}), "
                f"which {self.where} cannot build; {hint}"
            )

    def check_board_cpu(self, board_name: str, cpu: str) -> None:
        """BuildError if a module's C builds only for a CPU family that board ``board_name``
        (``cpu`` of boards.yaml) is not, such as Arm-only code on an x86 board."""
        from project_api.template import targets

        family = targets.family_of(cpu)
        for mod in self.library.modules.values():
            need = targets.arch_requirement(mod)
            if need is not None and not targets.builds(need[0], (family,)):
                raise BuildError(f"module {mod.name!r} targets {targets.family_title(need[0])} "
                                 f"({need[1]}), which board {board_name} ({cpu}) cannot run; "
                                 "regenerate the project with a board of that family")

    # --- build, flash, open_transport: checked options in, the hook does the rest ------------

    def build(self, options: dict) -> None:
        values = self.options_for("build", options)
        if self.BUILDS_FOR:  # a template that compiles the model's C for some CPU families
            self.check_targets()
        self.do_build(values)

    def flash(self, options: dict) -> None:
        self.do_flash(self.options_for("flash", options))

    def open_transport(self, options: dict) -> dict[str, Any]:
        values = self.options_for("open_transport", options)
        kind = self.project_type(values)
        if kind is not None and kind.link is None:
            raise ServerError(message="open_transport: " + project_types.no_link(
                str(self.project_dir), values["project_type"], self.PROJECT_TYPES))
        self.close_transport()
        if self.links_opened:  # a reopen: the device may have gone away
            self._reset_device(values)
        link = self.do_open_transport(values)
        try:
            link.open()
        except BaseException:
            link.close()
            raise
        self._link = link
        self.links_opened += 1
        return link.reply()

    def _reset_device(self, values: dict[str, Any]) -> None:
        """:meth:`do_reset`; what it raises is one warning (the link is opened anyway)."""
        try:
            self.do_reset(values)
        except Exception as exc:  # noqa: BLE001 - a reset is a help, never a reason to stop
            _LOG.warning("open_transport: could not reset the board before reopening its link "
                         "(%s); opening it anyway", _one_line(exc))

    def do_build(self, values: dict[str, Any]) -> None:
        """Build the generated project with the checked ``values``."""
        raise NotImplementedError(f"{type(self).__name__} must implement do_build()")

    def do_flash(self, values: dict[str, Any]) -> None:
        """Put the built firmware on the device."""
        raise NotImplementedError(f"{type(self).__name__} must implement do_flash()")

    def do_reset(self, values: dict[str, Any]) -> None:
        """Restart the device before ``open_transport`` opens its link again: called, once the
        old link is closed, by every open_transport after this server opened a link (never by
        its first). A template with a way to reset its board (a debug probe) does it here. The default does
        nothing (an emulator or a device program starts afresh with the link; a remote link
        has no local probe). What it raises is logged as one warning."""

    def do_open_transport(self, values: dict[str, Any]) -> Link:
        """The link to the device: a :class:`~project_api.template.link.Link`, built from
        ``values`` and the project alone (it may be called again after the device went away;
        the old link is closed by then). Templates without a device link keep this refusal."""
        raise ServerError(message=f"open_transport: {self.where} has no device link")

    # --- the link ----------------------------------------------------------------------------

    def close_transport(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.close()

    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        if self._link is None:
            raise TransportClosedError()
        try:
            return self._link.transport.read(n, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: end of file from the device")
            self.close_transport()
            raise

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        if self._link is None:
            raise TransportClosedError()
        try:
            self._link.transport.write(data, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: the device stopped reading")
            self.close_transport()
            raise


def _one_line(exc: BaseException) -> str:
    """An error's one-line reason: a step error's detail, a server error's message, else the
    first line of its text."""
    if isinstance(exc, TemplateStepError) and exc.detail:
        return exc.detail
    if isinstance(exc, ServerError):
        return exc.message
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

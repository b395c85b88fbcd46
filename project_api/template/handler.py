"""The base of every template's Project API handler: everything that is not platform-specific.

A template server subclasses :class:`TemplateHandler`, declares its platform as data and writes
only what differs between platforms::

    class Handler(TransportMixin, TemplateHandler):
        PLATFORM_NAME = "host"
        OPTIONS = [option("project_type", "str", choices=[...], ...), ...]
        BUILDS_FOR = ("host",)            # CPU families it can compile for

        def render(self, project: NewProject) -> None:   # write the project's own files
        def build(self, options: dict) -> None:
        def flash(self, options: dict) -> None:
        def open_transport(self, options: dict) -> dict:

    if __name__ == "__main__":
        server.main(Handler())

The base owns ``IS_TEMPLATE`` (a directory is a generated project when ``model.tar`` sits beside
its server script), ``server_info_query``, and the generate skeleton: option checks (types,
choices and bounds, :mod:`project_api.template.options`), the project directory, copying the
server script and the archive, safe extraction, model glue contexts, the options file, and
removal of everything when any step fails. ``require_generated`` and ``options_for`` give the
later steps the options the project was generated with.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from project_api import server
from project_api.crt_manifest import CrtManifestError, read_manifest
from project_api.errors import BuildError, ServerError
from project_api.template.options import (
    DeclaredOption,
    check_declared,
    load_options,
    save_options,
)

_LOG = logging.getLogger(__name__)

MODEL_LIBRARY_FORMAT_RELPATH = "model.tar"
#: The server script's name in every project (what the client launches).
SERVER_SCRIPT = "microtvm_api_server.py"


def load_boards(server_file: str | Path) -> dict[str, dict[str, Any]]:
    """The ``boards`` of the ``boards.yaml`` beside a template's server (``__file__``)."""
    import yaml

    path = Path(server_file).resolve().parent / "boards.yaml"
    return yaml.safe_load(path.read_text())["boards"]


@dataclass
class NewProject:
    """A project being generated, handed to :meth:`TemplateHandler.render`."""

    dir: Path  #: the new project directory (exists, holds the server script and model/)
    template_dir: Path  #: the template's own directory (static files, templates/)
    crt_dir: Path  #: the C runtime sources (include/, src/)
    options: dict[str, Any]  #: every declared option's checked value
    platform: str  #: the template's platform name, for messages
    #: Jinja2 environments, one per file kind (template's templates/ first; see quoting)
    env: Any = field(repr=False, default=None)
    #: The model's C sources the glue writers produced (the glue, the lowered graph models),
    #: relative to the project; for the template's build files.
    model_sources: list[str] = field(default_factory=list)

    @functools.cached_property
    def library(self) -> Any:
        """The extracted archive (``model/``), a :class:`project_api.mlf.ModelLibrary`."""
        from project_api import mlf
        from project_api.template import glue

        glue.check_build_files(self.dir / "model", "model.tar")
        library = mlf.open_mlf(self.dir / "model")
        if library.has_bundled_runtime:
            _LOG.info("ignoring the archive's bundled ./runtime and ./templates: the project "
                      "uses project-api's C runtime")
        return library

    @functools.cached_property
    def modules(self) -> list[dict[str, Any]]:
        """One model glue context per module (:func:`glue.module_context`); raises ServerError
        for a module the glue cannot serve (not AOT, no entry point, no shape)."""
        from project_api.template import glue

        return [glue.module_context(m, self.platform) for m in self.library.modules.values()]

    def copy(self, *relpaths: str) -> None:
        """Copy static files or folders of the template into the project, at the same paths."""
        for rel in relpaths:
            src, dest = self.template_dir / rel, self.dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dest)
            else:
                shutil.copy2(src, dest)

    def copy_crt(self, sources: Iterable[str], dest: str = "crt") -> None:
        """Copy the runtime's ``include/``, the given sources (paths relative to the runtime
        directory, e.g. from :mod:`project_api.crt_manifest`) and the private headers the
        manifest lists for their libraries, so the project builds without project-api
        installed."""
        if not (self.crt_dir / "include").is_dir():
            raise ServerError(message=f"standalone_crt_dir {self.crt_dir} holds no include/ "
                                      "directory; reinstall project-api")
        sources = list(sources)
        try:
            headers = read_manifest(self.crt_dir).private_headers(sources)
        except CrtManifestError as exc:
            raise ServerError(message=f"{exc}; reinstall project-api") from exc
        root = self.dir / dest
        shutil.copytree(self.crt_dir / "include", root / "include")
        for rel in [*sources, *map(str, headers)]:
            src = self.crt_dir / rel
            if not src.is_file():
                raise ServerError(message=f"the C runtime at {self.crt_dir} lacks {rel}; "
                                          "reinstall project-api")
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)

    def extract_tar(self, archive: str | Path, option: str = "extra_files_tar") -> None:
        """Extract a user's tar archive (the ``option`` that names it) into the project, safely
        (no absolute paths, no ``..``, no links out)."""
        from project_api import mlf

        archive = Path(archive)
        if not archive.is_file():
            raise ServerError(message=f"{option} {archive} is not a file; pass a tar archive's "
                                      "path")
        try:
            mlf.safe_extract(archive, self.dir)
        except mlf.MLFError as exc:
            raise ServerError(message=f"{option} {archive}: {exc}; pass a tar archive") from None

    def render(self, template: str, dest: str, **context: Any) -> None:
        """Render Jinja2 ``template`` to ``dest`` with the options, modules and ``context``."""
        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        values = {**self.options, "modules": self.modules, **context}
        path.write_text(self.env.get_template(template).render(values))

    def write_model_glue(self, dest: str = "src/model_glue.c") -> list[str]:
        """The model glue (one TVMCrtAotModel per module) at ``dest``, reporting the build hash
        that it also writes to ``build_hash.txt`` (:func:`glue.compute_build_hash`), and
        ``src/graph_model.c`` when a module is a graph (:mod:`.graph_lowering`). Returns the
        C sources written, relative to the project (also :attr:`model_sources`)."""
        from project_api.template import glue, graph_lowering

        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        build_hash = glue.compute_build_hash(self.dir / "model", self.options, self.template_dir,
                                             self.platform)
        (self.dir / glue.BUILD_HASH_FILE).write_text(build_hash + "\n")
        path.write_text(glue.render_model_glue(self.env, self.modules, build_hash))
        self.model_sources = [dest, *graph_lowering.write_sources(self.env, self.dir,
                                                                  self.modules)]
        return list(self.model_sources)

    def write_crt_config(self, knobs: Mapping[str, tuple[Any, str]], title: str,
                         dest: str = "crt_config/crt_config.h") -> None:
        """``crt_config.h`` with the knobs that differ from the runtime's defaults."""
        from project_api.template import glue

        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        header = self.crt_dir / "include" / "tvm" / "runtime" / "crt" / "config.h"
        path.write_text(glue.render_crt_config(self.env, knobs, title=title, config_header=header))

    def write_device_crt_config(self, max_packet_bytes: int, title: str) -> None:
        """``crt_config.h`` of a firmware: its largest RPC packet and the model's workspace."""
        self.write_crt_config({
            "TVM_CRT_MAX_PACKET_SIZE_BYTES": (max_packet_bytes,
                                              "Largest RPC packet, header included."),
            "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES": (self.workspace_bytes(),
                                               "Model workspace given to TVMCrtWorkspace_Init."),
        }, title=title)

    def workspace_bytes(self) -> int:
        """The model workspace to reserve for all modules (see :func:`glue.workspace_bytes`)."""
        from project_api.template import glue

        return glue.workspace_bytes(self.modules)


class TemplateHandler(server.ProjectAPIHandler):
    """What every template server shares; subclasses declare their platform and write the rest."""

    #: ``platform_name`` of ``server_info_query``.
    PLATFORM_NAME: ClassVar[str] = ""
    #: Every option the template takes, with bounds (:func:`project_api.template.option`).
    OPTIONS: ClassVar[list[DeclaredOption]] = []
    #: CPU families the template compiles for ("host", "cortex-m"); see :meth:`check_targets`.
    BUILDS_FOR: ClassVar[tuple[str, ...]] = ()
    #: Arm-only headers the template supplies itself for code it builds elsewhere (the host
    #: template's portable ``<arm_acle.h>``), so including them is no reason to refuse.
    EMULATED_HEADERS: ClassVar[tuple[str, ...]] = ()
    #: Its boards (:func:`load_boards`), for templates with a ``board`` option.
    BOARDS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, project_dir: Path | None = None) -> None:
        super().__init__()
        script = Path(inspect.getfile(type(self))).resolve()
        #: The directory of this server script: the template, or a generated project.
        self.project_dir = Path(project_dir) if project_dir is not None else script.parent
        self._script = script
        atexit.register(self.close_transport)

    @property
    def is_template(self) -> bool:
        return not (self.project_dir / MODEL_LIBRARY_FORMAT_RELPATH).exists()

    @property
    def where(self) -> str:
        return f"the {self.PLATFORM_NAME} template"

    # --- info --------------------------------------------------------------------------------

    def server_info_query(self, tvm_version: str) -> server.ServerInfo:
        return server.ServerInfo(
            platform_name=self.PLATFORM_NAME,
            is_template=self.is_template,
            model_library_format_path=(
                "" if self.is_template else str(self.project_dir / MODEL_LIBRARY_FORMAT_RELPATH)
            ),
            project_options=[o.wire for o in self.OPTIONS],
        )

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
        values = check_declared(self.OPTIONS, options, "generate_project")
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
        from project_api import mlf
        from project_api.template import quoting

        shutil.copy2(self._script, project_dir / SERVER_SCRIPT)
        shutil.copy2(mlf_path, project_dir / MODEL_LIBRARY_FORMAT_RELPATH)
        mlf.safe_extract(project_dir / MODEL_LIBRARY_FORMAT_RELPATH, project_dir / "model")
        project = NewProject(
            dir=project_dir, template_dir=self.project_dir, crt_dir=crt_dir, options=values,
            platform=self.PLATFORM_NAME, env=quoting.environment(self.project_dir / "templates"),
        )
        self.render(project)
        save_options(project_dir, values)
        _LOG.info("generated a project of %s in %s", self.where, project_dir)

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

    def board(self) -> tuple[str, dict[str, Any]]:
        """The generated project's board: its name and its :attr:`BOARDS` entry."""
        name = self.require_generated("board")["board"]
        return name, self.BOARDS[name]

    def options_for(self, method: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """The values ``method`` runs with: the call's for options scoped to ``method``, the
        saved ones for the rest (a client that did not generate the project sends defaults)."""
        values = self.require_generated(method)
        for o in self.OPTIONS:
            methods = (o.wire.optional or []) + (o.wire.required or [])
            given = options.get(o.name)
            if method not in methods or given is None:
                continue
            # An option the project was also generated with keeps its generated value when the
            # call sends only the default (a client that did not generate the project does).
            if "generate_project" in methods and given == o.default:
                continue
            values[o.name] = given
        return check_declared(self.OPTIONS, values, method)

    def model_library(self) -> Any:
        """The project's extracted archive (``model/``), as a ModelLibrary."""
        from project_api import mlf

        return mlf.open_mlf(self.project_dir / "model")

    def check_targets(self, modules: Iterable[Any] | None = None) -> None:
        """BuildError if a module's C builds only for a CPU family this template does not build
        for (see :func:`project_api.template.targets.arch_requirement`)."""
        from project_api.template import targets

        for mod in modules if modules is not None else self.model_library().modules.values():
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
        for mod in self.model_library().modules.values():
            need = targets.arch_requirement(mod)
            if need is not None and not targets.builds(need[0], (family,)):
                raise BuildError(f"module {mod.name!r} targets {targets.family_title(need[0])} "
                                 f"({need[1]}), which board {board_name} ({cpu}) cannot run; "
                                 "regenerate the project with a board of that family")

    def close_transport(self) -> None:
        """Templates with a device channel override this (see TransportMixin)."""

    # --- defaults for templates without a device channel -------------------------------------

    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        raise server.TransportClosedError()

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        raise server.TransportClosedError()


"""A project being generated: what a template's ``render`` hook gets and writes into.

:class:`NewProject` holds the checked options (read-only: what is saved is what was checked),
the project type's row of ``PROJECT_TYPES``, the extracted archive (opened once) and the Jinja2
environments, and writes the files every template has: the runtime's sources, the model's C for
the project type (:meth:`NewProject.write_model_sources`) and ``crt_config.h``.
"""

from __future__ import annotations

import functools
import logging
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.errors import ServerError
from project_api.template.project_types import ProjectType

_LOG = logging.getLogger(__name__)


@dataclass
class NewProject:
    """A project being generated, handed to :meth:`TemplateHandler.render`."""

    dir: Path  #: the new project directory (exists, holds the server script and model/)
    template_dir: Path  #: the template's own directory (static files, templates/)
    crt_dir: Path  #: the C runtime sources (include/, src/)
    options: Mapping[str, Any]  #: every declared option's checked value (read-only)
    platform: str  #: the template's platform name, for messages
    #: The project type's entry of the template's PROJECT_TYPES (None: a template without).
    project_type: ProjectType | None = None
    #: Jinja2 environments, one per file kind (template's templates/ first; see quoting)
    env: Any = field(repr=False, default=None)

    @functools.cached_property
    def library(self) -> Any:
        """The extracted archive (``model/``), a :class:`project_api.archive.mlf.ModelLibrary`."""
        from project_api.archive import mlf
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

    @property
    def crt_sources(self) -> list[str]:
        """The runtime's sources of the project type's crt project (``crt/libraries.txt``)."""
        from project_api.archive.crt_manifest import read_manifest

        if self.project_type is None:
            raise ServerError(message=f"the {self.platform} template declares no project types")
        return [str(p) for p in read_manifest(self.crt_dir).project_sources(self.project_type.crt)]

    @property
    def rx_ring_bytes(self) -> int:
        """The device UART's receive ring for this project type and its largest packet."""
        assert self.project_type is not None
        return self.project_type.rx_ring_bytes(int(self.options["max_packet_size_bytes"]))

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
        directory, e.g. from :mod:`project_api.archive.crt_manifest`) and the private headers the
        manifest lists for their libraries, so the project builds without project-api
        installed."""
        from project_api.archive.crt_manifest import CrtManifestError, read_manifest

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
        from project_api.archive import mlf

        archive = Path(archive)
        if not archive.is_file():
            raise ServerError(message=f"{option} {archive} is not a file; pass a tar archive's "
                                      "path")
        try:
            mlf.safe_extract(archive, self.dir)
        except mlf.MLFError as exc:
            raise ServerError(message=f"{option} {archive}: {exc}; pass a tar archive") from None

    def render(self, template: str, dest: str, **context: Any) -> None:
        """Render Jinja2 ``template`` to ``dest`` with the options, modules and ``context``
        (``context`` wins over an option of the same name: a value the template derived)."""
        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        values = {**self.options, "modules": self.modules, **context}
        path.write_text(self.env.get_template(template).render(values))

    def write_model_sources(self) -> tuple[list[str], list[str]]:
        """The model's C for the project type (its ``model``): the model glue; plus, for
        mlperftiny, the benchmark's model file; or, for ai_api, the ai_ API over the glue of
        every model of the firmware. Returns the generated sources and the folders holding each
        archive's code (``model`` and any ``extra_models/<k>/model``)."""
        from project_api.template import ai_api, mlperftiny_model

        kind = self.project_type.model if self.project_type is not None else "glue"
        if kind == "ai_api":
            ai = ai_api.generate(self, self.options["extra_models"], self.options["shared_pool"],
                                 self.options["sample_seed"])
            glue_sources = self.write_model_glue(ai.modules, extra_model_dirs=ai.model_dirs[1:])
            return list(dict.fromkeys([*glue_sources, *ai.sources])), list(ai.model_dirs)
        ai_api.check_standalone_options(self.options)  # its options, on a type without it
        glue_sources = self.write_model_glue()
        if kind == "mlperftiny":
            mlperftiny_model.write_model_file(self, self.options["mlperftiny_model"])
            return [*glue_sources, mlperftiny_model.MODEL_FILE], ["model"]
        return glue_sources, ["model"]

    def write_model_glue(self, modules: list[dict[str, Any]] | None = None,
                         extra_model_dirs: Iterable[str] = (),
                         dest: str = "src/model_glue.c") -> list[str]:
        """The model glue (one TVMCrtAotModel per module of ``modules``, default the project's own)
        at ``dest``, reporting the build hash that it also writes to ``build_hash.txt``
        (:func:`glue.compute_build_hash` over the project's archive, ``extra_model_dirs`` and
        the options), and ``src/graph_model.c`` when a module is a graph
        (:mod:`.graph_lowering`). Returns the C sources written, relative to the project."""
        from project_api.template import glue, graph_lowering

        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        model_dirs = [self.dir / "model", *(self.dir / d for d in extra_model_dirs)]
        build_hash = glue.compute_build_hash(model_dirs, self.options, self.template_dir,
                                             self.platform)
        (self.dir / glue.BUILD_HASH_FILE).write_text(build_hash + "\n")
        modules = self.modules if modules is None else modules
        path.write_text(glue.render_model_glue(self.env, modules, build_hash))
        return [dest, *graph_lowering.write_sources(self.env, self.dir, modules)]

    def write_crt_config(self, title: str, knobs: Mapping[str, tuple[Any, str]] | None = None,
                         dest: str = "crt_config/crt_config.h") -> None:
        """``crt_config.h``: the template's own ``knobs`` (``{macro: (value, doc)}``), then the
        device's largest RPC packet and the model's workspace, each only where it differs from
        the runtime's default."""
        from project_api.template import glue

        path = self.dir / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        header = self.crt_dir / "include" / "tvm" / "runtime" / "crt" / "config.h"
        every = {
            **(knobs or {}),
            "TVM_CRT_MAX_PACKET_SIZE_BYTES": (self.options["max_packet_size_bytes"],
                                              "Largest RPC packet, header included."),
            "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES": (self.workspace_bytes(),
                                                   "Model workspace given to TVMCrtWorkspace_Init."),
        }
        path.write_text(glue.render_crt_config(self.env, every, title=title, config_header=header))

    def workspace_bytes(self) -> int:
        """The model workspace to reserve for all modules (see :func:`glue.workspace_bytes`)."""
        from project_api.template import glue

        return glue.workspace_bytes(self.modules)

"""Template projects, generated projects and project options: the client-side glue.

A *template project* is a directory with a ``microtvm_api_server.py`` that reports
``is_template == True``; its server turns a Model Library Format archive into a *generated
project*, a new directory with its own server that can build, flash and talk to the device::

    from project_api.api.project import generate_project

    with generate_project("host", "model.tar", "prj", {"verbose": False}) as project:
        project.build()
        project.flash()
        with project.session() as session:
            ...

A server of our template library is the authority on its options: it says so in
``server_info_query`` (``fills_defaults``), and each call then sends it only the options the user
gave (a default given again included, so it can be set back); the server checks them and fills in
the saved and default values. A server that does not say so (microTVM's) gets what microTVM's
client sends: every call checks the options against what the server advertises *before* it goes
out (:func:`check_options`: unknown names with the closest valid name suggested, wrong types,
values outside ``choices`` and options the method requires are :class:`OptionError`), and options
not given get their defaults (:func:`add_unspecified_options`). ``-o NAME=VALUE`` on the command
line is typed by the advertised options in either case (:func:`parse_option_assignments`).

Unlike microTVM, every server process started here is shut down again: projects are context
managers, and :func:`generate_project` stops the template server before returning. The options a
project was generated with are remembered in the project's one options file,
``<project>/project_options.json`` (written by the template server; by the client when a server does
not write it), so that a later ``build`` or ``flash`` need not repeat them.
"""

from __future__ import annotations

import difflib
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from project_api import TVM_COMPAT_VERSION
from project_api.api import output_dir
from project_api.errors import (
    NotATemplateProjectError,
    OptionError,
    ProjectError,
    TemplateProjectError,
)
from project_api.system import paths
from project_api.template import options as template_options
from project_api.template.project_types import LINK_TITLES, speaks, type_with_link

if TYPE_CHECKING:
    from project_api.api.client import ProjectAPIClient
    from project_api.api.transport import Transport
    from project_api.archive.mlf import ModelLibrary

_LOG = logging.getLogger(__name__)
_Owner = TypeVar("_Owner", bound="_ServerOwner")

SERVER_SCRIPT = "microtvm_api_server.py"
#: Where a generated project remembers the options it was generated with.
OPTIONS_FILE = template_options.OPTIONS_FILE

#: Methods that take options, as named in ``required``/``optional`` of a ProjectOption.
OPTION_METHODS = ("generate_project", "build", "flash", "open_transport")

#: The protocol each of microTVM's ``project_type`` names speaks on its device link (None: it
#: has none), for servers that do not say (ours carry their own table in ``server_info_query``,
#: from the template's PROJECT_TYPES): :meth:`GeneratedProject.require_link` refuses a verb that
#: needs another before anything starts. A template without a ``project_type`` option is not
#: checked.
PROJECT_TYPE_LINKS: dict[str, str | None] = {
    "host_driven": "rpc",
    "mlperftiny": "mlperftiny",
    "standalone": None,
}
_LINK_NEEDED = {"rpc": "'run' and 'validate' need the RPC protocol",
                "mlperftiny": "'mlperftiny' needs the MLPerf Tiny benchmark protocol"}

_TYPES: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "str": (str,)}
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True,
               "false": False, "0": False, "no": False, "off": False}


# --- options -----------------------------------------------------------------------------------


def add_unspecified_options(
    options: dict[str, Any] | None, server_project_options: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Fill each advertised option missing from ``options`` with its ``"default"``.

    Mutates and returns ``options`` (a new dict when ``options`` is falsy), as microTVM's does.
    """
    if not options:
        options = {}
    for opt in server_project_options:
        options.setdefault(opt["name"], opt.get("default"))
    return options


def _names_hint(names: list[str]) -> str:
    return ", ".join(sorted(names)) if names else "(this server takes no options)"


def _describe_type(kind: str) -> str:
    return {"bool": "a bool (true/false)", "int": "an integer", "str": "a string"}.get(kind, kind)


def check_option_names(
    options: Mapping[str, Any], project_options: Iterable[Mapping[str, Any]], where: str = ""
) -> None:
    """Raise :class:`OptionError` for the first option name the server does not advertise."""
    known = [o["name"] for o in project_options]
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise OptionError(
                f"unknown option {name!r}{where}; {hint}valid options: {_names_hint(known)}"
            )


def check_option_value(option: Mapping[str, Any], value: Any) -> None:
    """Raise :class:`OptionError` if ``value`` does not fit ``option``'s type and choices.

    ``None`` means "not set" and always fits here (:func:`check_options` handles ``required``).
    Ints are accepted only for "int" (a bool is not an int here) and real bools only for "bool".
    """
    if value is None:
        return
    name, kind = option["name"], option.get("type")
    allowed = _TYPES.get(kind) if isinstance(kind, str) else None
    if allowed is not None:
        ok = isinstance(value, allowed) and not (kind == "int" and isinstance(value, bool))
        if not ok:
            raise OptionError(
                f"option {name!r} expects {_describe_type(kind)}, got {type(value).__name__} "
                f"{value!r}; pass e.g. -o {name}={_example(option)}"
            )
    choices = option.get("choices")
    if choices and value not in choices:
        raise OptionError(
            f"option {name!r} = {value!r} is not one of its choices: "
            f"{', '.join(map(str, choices))}; pick one of those"
        )


def _example(option: Mapping[str, Any]) -> str:
    if option.get("choices"):
        return str(option["choices"][0])
    return {"bool": "true", "int": "1024", "str": "value"}.get(option.get("type", ""), "value")


def check_options(
    options: Mapping[str, Any] | None,
    project_options: Iterable[Mapping[str, Any]],
    method: str | None = None,
    where: str = "",
) -> dict[str, Any]:
    """Validate ``options`` against the server's ``project_options``; return them with defaults.

    Checks, in order: every name is advertised (else the valid names and the closest match),
    every value has the advertised type and is one of its ``choices``, and, when ``method`` is
    given, every option whose ``required`` lists ``method`` has a value. ``where`` (e.g. " for
    template 'host'") is put into messages.

    Raises:
        OptionError: on the first problem found.
    """
    project_options = list(project_options)
    given = dict(options or {})
    check_option_names(given, project_options, where)
    by_name = {o["name"]: o for o in project_options}
    for name, value in given.items():
        check_option_value(by_name[name], value)
    full = add_unspecified_options(given, project_options)
    if method is not None:
        for opt in project_options:
            if method in (opt.get("required") or []) and full.get(opt["name"]) is None:
                choices = opt.get("choices")
                also = f" (one of: {', '.join(map(str, choices))})" if choices else ""
                raise OptionError(
                    f"option {opt['name']!r} is required by {method}{where} but was not given; "
                    f"pass -o {opt['name']}=<value>{also}"
                )
    return full


def parse_option_value(option: Mapping[str, Any], text: str) -> Any:
    """Turn command-line text into a value of ``option``'s type ("bool", "int" or "str")."""
    kind = option.get("type")
    name = option["name"]
    if kind == "bool":
        try:
            return _BOOL_WORDS[text.strip().lower()]
        except KeyError:
            raise OptionError(
                f"option {name!r} expects a bool, got {text!r}; use true or false"
            ) from None
    if kind == "int":
        try:
            return int(text.strip(), 0)
        except ValueError:
            raise OptionError(
                f"option {name!r} expects an integer, got {text!r}; pass e.g. -o {name}=1024"
            ) from None
    return text


#: Options whose values are paths on this computer, by name (microTVM's and our templates'):
#: ``"path"`` one path, ``"paths"`` a comma-separated list. A server runs in its own directory
#: (the template's or the project's), so the client makes relative ones absolute against the
#: current directory before sending them (:func:`resolve_path_options`).
PATH_OPTIONS: dict[str, str] = {
    "extra_files_tar": "path",
    "cmsis_path": "path",
    "zephyr_base": "path",
    "pyocd_pack": "path",
    "extra_models": "paths",
}


def resolve_path_options(options: Mapping[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """``options`` with the relative paths of :data:`PATH_OPTIONS` made absolute against
    ``cwd`` (default: the current directory); ``~`` is expanded; other values unchanged."""
    base = Path.cwd() if cwd is None else Path(cwd)

    def absolute(text: str) -> str:
        path = Path(text).expanduser()
        return str(path if path.is_absolute() else base / path)

    out = dict(options)
    for name, kind in PATH_OPTIONS.items():
        value = out.get(name)
        if not isinstance(value, str) or not value.strip():
            continue
        if kind == "paths":
            out[name] = ",".join(absolute(p.strip()) for p in value.split(",") if p.strip())
        else:
            out[name] = absolute(value)
    return out


def parse_option_assignments(
    assignments: Iterable[str], project_options: Iterable[Mapping[str, Any]], where: str = ""
) -> dict[str, Any]:
    """Parse ``NAME=VALUE`` strings, typed by the server's options (unknown names are errors);
    relative paths of :data:`PATH_OPTIONS` become absolute (:func:`resolve_path_options`)."""
    project_options = list(project_options)
    by_name = {o["name"]: o for o in project_options}
    result: dict[str, Any] = {}
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise OptionError(f"option {item!r} is not NAME=VALUE; write e.g. -o verbose=true")
        check_option_names({name: None}, project_options, where)
        result[name] = parse_option_value(by_name[name], text)
    return resolve_path_options(result)


# --- templates -----------------------------------------------------------------------------------


def builtin_templates() -> dict[str, Path]:
    """Built-in template directories (those holding a server script), by name."""
    root = paths.templates_dir()
    if not root.is_dir():
        return {}
    return {
        d.name: d
        for d in sorted(root.iterdir())
        if d.is_dir() and (d / SERVER_SCRIPT).is_file()
    }


def resolve_template(template: str | os.PathLike[str]) -> Path:
    """A template directory from a built-in name or a path."""
    path = Path(template)
    if path.is_dir():
        return path
    builtins = builtin_templates()
    name = str(template)
    if name in builtins:
        return builtins[name]
    close = difflib.get_close_matches(name, list(builtins), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ProjectError(
        f"no template {name!r}: it is neither a built-in template nor a directory; {hint}"
        f"built-in templates: {', '.join(builtins) or 'none'} (see 'project-api templates')"
    )


def _launch(project_dir: Path, debug: bool) -> ProjectAPIClient:
    from project_api.api import client as client_mod

    # Absolute: the server runs with the project as its cwd, so a relative script path breaks.
    return client_mod.instantiate_from_dir(str(Path(project_dir).absolute()), debug=debug)


def _query(client: ProjectAPIClient) -> dict[str, Any]:
    return client.server_info_query(TVM_COMPAT_VERSION)


class _ServerOwner:
    """Owns one server process; closing (or leaving ``with``) shuts it down once."""

    def __init__(self, client: ProjectAPIClient, info: dict[str, Any], directory: Path | None):
        self._client = client
        self._info = info
        self.directory = directory

    @property
    def client(self) -> ProjectAPIClient:
        return self._client

    def info(self) -> dict[str, Any]:
        """The server's ``server_info_query`` reply."""
        return self._info

    @property
    def platform_name(self) -> str:
        return str(self._info.get("platform_name", ""))

    @property
    def project_options(self) -> list[dict[str, Any]]:
        return list(self._info.get("project_options") or [])

    def close(self) -> None:
        """Shut the server down (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.shutdown()
            except Exception as exc:  # the server may already be gone; nothing to keep
                _LOG.debug("shutting down %s: %s", self.directory, exc)

    @property
    def closed(self) -> bool:
        return self._client is None

    def _require_open(self) -> ProjectAPIClient:
        if self._client is None:
            raise ProjectError(f"the project server for {self.directory} is closed")
        return self._client

    def __enter__(self: _Owner) -> _Owner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TemplateProject(_ServerOwner):
    """A template project's server, ready to generate projects.

    ``TemplateProject(client)`` wraps an already launched client, as microTVM's does; the usual
    way in is :meth:`from_directory`.
    """

    debug = False

    def __init__(self, client: ProjectAPIClient, info: dict[str, Any] | None = None,
                 directory: Path | None = None):
        if info is None:
            info = _query(client)
        if not info.get("is_template"):
            raise NotATemplateProjectError(
                f"{directory or 'the project'} is a generated project, not a template; use it "
                "with 'project-api build' or GeneratedProject.from_directory"
            )
        super().__init__(client, info, directory)

    @classmethod
    def from_directory(cls, template_project_dir: str | os.PathLike[str], debug: bool = False) -> TemplateProject:
        """Launch the server in ``template_project_dir`` and check that it is a template."""
        directory = Path(template_project_dir)
        client = _launch(directory, debug)
        try:
            project = cls(client, _query(client), directory)
        except BaseException:
            client.shutdown()
            raise
        project.debug = debug
        return project

    @property
    def where(self) -> str:
        return f" for template {self.platform_name or str(self.directory)!r}"

    @property
    def checks_options(self) -> bool:
        """Whether the server checks options and fills in defaults itself (our template
        library's servers say so in ``server_info_query``): then the client sends only what its
        user gave. microTVM's servers get the defaults filled in, as microTVM's client does."""
        return bool(self._info.get("fills_defaults"))

    def generate(
        self,
        model: str | os.PathLike[str] | ModelLibrary,
        project_dir: str | os.PathLike[str],
        options: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
    ) -> Path:
        """Generate ``project_dir`` from ``model`` (an MLF tar or directory, or one already
        opened with :func:`~project_api.archive.mlf.open_mlf`, which is then not read again) without
        starting the new project's server; its absolute path.

        ``project_dir`` must not exist unless ``force`` is true, in which case it is removed
        first. If generation fails, whatever was generated is removed again.

        Raises:
            OptionError: bad options (checked here for servers that do not check them).
            MLFError: the archive is unsafe or invalid. ProjectError: ``project_dir`` exists.
            Server errors propagate unchanged.
        """
        from project_api.archive.mlf import ModelLibrary, open_mlf

        client = self._require_open()
        user_options = resolve_path_options(options or {})
        sent = (user_options if self.checks_options else
                check_options(user_options, self.project_options, "generate_project", self.where))
        if isinstance(model, ModelLibrary):
            library, opened = model, None
        else:  # validates (and safety-checks) before the server sees it
            library = opened = open_mlf(Path(model))
        try:
            if library.has_bundled_runtime:
                _LOG.info("%s carries its producer's C runtime (./runtime); the generated project "
                          "uses project-api's runtime instead", library.path)
        finally:
            if opened is not None:
                opened.close()
        mlf = Path(library.path)
        project = Path(project_dir).absolute()
        with output_dir.locked(project), \
                tempfile.TemporaryDirectory(prefix="project-api-gen-") as tmp:
            output_dir.prepare(project, force, protect=[mlf, self.directory])
            tar_path = mlf if mlf.is_file() else _pack_dir(mlf, Path(tmp) / "model.tar")
            try:
                client.generate_project(
                    model_library_format_path=str(tar_path.absolute()),
                    standalone_crt_dir=str(paths.crt_dir()),
                    project_dir=str(project),
                    options=sent,
                )
                _save_options(project, user_options)
            except BaseException:
                _remove_failed(project)
                raise
        return project

    def generate_project_from_mlf(
        self,
        model_library_format_path: str | os.PathLike[str] | ModelLibrary,
        project_dir: str | os.PathLike[str],
        options: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
    ) -> GeneratedProject:
        """Generate ``project_dir`` from an MLF tar or directory (:meth:`generate`) and open the
        new project (its server started); if that fails, the project is removed again."""
        project = self.generate(model_library_format_path, project_dir, options, force=force)
        try:
            return GeneratedProject.from_directory(project, resolve_path_options(options or {}),
                                                   debug=self.debug)
        except BaseException:
            _remove_failed(project)
            raise


def _remove_failed(project: Path) -> None:
    if project.exists():
        _LOG.info("generation failed; removing %s", project)
        shutil.rmtree(project, ignore_errors=True)


def _pack_dir(directory: Path, tar_path: Path) -> Path:
    """Pack an MLF directory as TVM would (root ``.``), for servers that want a tar."""
    with tarfile.open(tar_path, "w") as tar:
        tar.add(str(directory), arcname=".")
    return tar_path


def _save_options(project: Path, options: Mapping[str, Any]) -> None:
    """Record the user's options for a server that keeps no options file of its own."""
    if not project.is_dir() or (project / OPTIONS_FILE).exists():
        return
    try:
        template_options.save_options(project, options)
    except (OSError, TypeError) as exc:
        _LOG.warning("could not record the project options in %s: %s", project, exc)


def load_project_options(project: str | os.PathLike[str]) -> dict[str, Any]:
    """The options a generated project was generated with (its options file; ``{}`` if none);
    ProjectError naming the fix for a corrupt file."""
    return template_options.load_options(Path(project), error=ProjectError)


# --- the build hash: which firmware the device runs ----------------------------------------------

#: The device global function that answers the firmware's build hash.
BUILD_HASH_FUNCTION = "project_api.build_hash"


class BuildHashMismatchError(ProjectError):
    """The device runs other firmware than the project's: the build hash it reports
    (``reported``; None when its firmware reports none) is not the project's (``expected``)."""

    def __init__(self, message: str, reported: str | None, expected: str) -> None:
        super().__init__(message)
        self.reported = reported
        self.expected = expected


def project_build_hash(project_dir: str | os.PathLike[str]) -> str | None:
    """The build hash a generated project's firmware reports (its ``build_hash.txt``), or None
    for a project without one."""
    from project_api.template import glue

    return glue.read_build_hash(Path(project_dir))


def device_build_hash(session: Any) -> str | None:
    """The build hash the device of ``session`` (a :class:`project_api.micro.Session`) reports
    (hex, as in ``build_hash.txt``), or None when its firmware has no ``project_api.build_hash``
    (generated before build hashes, or by another tool)."""
    from project_api.errors import SessionError
    from project_api.template.glue import BUILD_HASH_DIGITS

    try:
        value = session.call(BUILD_HASH_FUNCTION)
    except SessionError as err:
        if "no global function" in str(err):
            return None
        raise
    return f"{int(value):0{BUILD_HASH_DIGITS}x}"


def check_build_hash(session: Any, expected: str, *, require: bool = False,
                     subject: str = "the device's firmware",
                     fix: str = "flash the project onto it") -> str | None:
    """The device's build hash (:func:`device_build_hash`) when it is ``expected``, or None
    when its firmware reports none and ``require`` is false; else BuildHashMismatchError, one
    line naming both hashes and ``fix`` (``subject`` is what reports the hash)."""
    reported = device_build_hash(session)
    if reported == expected or (reported is None and not require):
        return reported
    raise BuildHashMismatchError(
        f"{subject} reports build hash {reported or 'none'}, the project's is {expected}; {fix}",
        reported, expected)


class GeneratedProject(_ServerOwner):
    """A generated project's server: build, flash and open the device transport."""

    def __init__(self, client: ProjectAPIClient, options: Mapping[str, Any] | None = None,
                 directory: Path | None = None, info: dict[str, Any] | None = None,
                 saved: Mapping[str, Any] | None = None):
        if info is None:
            info = _query(client)
        if info.get("is_template"):
            raise TemplateProjectError(
                f"{directory or 'the project'} is a template, not a generated project; generate "
                "one with 'project-api generate' or TemplateProject.generate_project_from_mlf"
            )
        super().__init__(client, info, directory)
        self._saved = dict(saved or {})
        self._given: dict[str, Any] = {}
        self._options: dict[str, Any] = {}
        try:
            self.options = dict(options or {})
        except BaseException:
            self._client = None  # the caller still owns the client and shuts it down
            raise

    @classmethod
    def from_directory(
        cls,
        project_dir: str | os.PathLike[str],
        options: Mapping[str, Any] | None = None,
        debug: bool = False,
    ) -> GeneratedProject:
        """Launch the server of a generated project.

        The options it was generated with (``project_options.json``) are in force, updated by
        ``options``; names the server no longer advertises are dropped from the saved ones.
        """
        directory = Path(project_dir)
        client = _launch(directory, debug)
        try:
            info = _query(client)
            known = {o["name"] for o in info.get("project_options") or []}
            saved = {k: v for k, v in load_project_options(directory).items() if k in known}
            return cls(client, dict(options or {}), directory, info, saved=saved)
        except BaseException:
            client.shutdown()
            raise

    @property
    def where(self) -> str:
        return f" for project {str(self.directory or self.platform_name)!r}"

    @property
    def checks_options(self) -> bool:
        """Whether the server checks options and fills in defaults and saved options itself
        (see :attr:`TemplateProject.checks_options`); then each call sends only the given ones."""
        return bool(self._info.get("fills_defaults"))

    @property
    def options(self) -> dict[str, Any]:
        """The options in force: the saved ones updated by the given ones (and, for a server
        that does not fill them in, every default: what each call sends such a server)."""
        return dict(self._options)

    @options.setter
    def options(self, options: Mapping[str, Any]) -> None:
        given = dict(options)
        merged = {**self._saved, **given}
        self._options = (merged if self.checks_options else
                         check_options(merged, self.project_options, None, self.where))
        self._given = given

    def override(self, given: Mapping[str, Any]) -> None:
        """Use ``given`` (e.g. parsed ``-o`` options) for the calls that follow.

        An option that only ``generate_project`` takes (``board``, ``project_type``, ...) is
        baked into the generated files: a new value is refused with :class:`OptionError`
        saying to generate the project again, never silently ignored.
        """
        by_name = {o["name"]: o for o in self.project_options}
        check_option_names(given, self.project_options, self.where)
        for name, value in given.items():
            opt = by_name[name]
            methods = set(opt.get("optional") or []) | set(opt.get("required") or [])
            current = self._options.get(name)
            if methods == {"generate_project"} and value != current:
                project = self.directory or "the project"
                raise OptionError(
                    f"option {name} cannot change after generate: {project} was generated with "
                    f"{name}={current!r}; generate the project again with -o {name}={value}"
                )
        self.options = {**self._given, **given}

    def _options_for(self, method: str) -> dict[str, Any]:
        """What ``method`` is sent: the given options to a server that checks them (an explicit
        default included, so it can be set back), else every option, checked here."""
        if self.checks_options:
            return dict(self._given)
        return check_options(self._options, self.project_options, method, self.where)

    def build(self) -> None:
        """Build the project (the server's ``build``)."""
        self._require_open().build(self._options_for("build"))

    def flash(self) -> None:
        """Flash the built project onto the device (the server's ``flash``)."""
        self._require_open().flash(self._options_for("flash"))

    def transport(self, debug: bool = False) -> Transport:
        """A :class:`~project_api.api.transport.Transport` to the device, not yet opened.

        With ``debug=True`` it is wrapped in a ``TransportLogger`` that hex-dumps every call.
        """
        from project_api.api.transport import ProjectTransport, TransportLogger

        client = self._require_open()
        # The project owns its server: closing the transport must not shut the client down.
        transport: Transport = ProjectTransport(
            client, self._options_for("open_transport"), shutdown_client=False
        )
        if debug:
            transport = TransportLogger(f"project {self.directory.name if self.directory else ''}".strip(),
                                        transport)
        return transport

    def session(self, *, debug: bool = False, **kwargs: Any) -> Any:
        """A :class:`project_api.micro.Session` over :meth:`transport` (use it with ``with``);
        ProjectError at once when the project's firmware has no RPC server. ``kwargs`` go to
        the Session; without a ``verify`` of the caller's (``verify=None``: no check) it checks
        the firmware's build hash at open and after every reopen on a device that may have
        restarted (:meth:`build_hash_check`)."""
        from project_api.micro import Session

        self.require_link("rpc")
        if "verify" not in kwargs:
            kwargs["verify"] = self.build_hash_check()
        return Session(self.transport(debug=debug), **kwargs)

    def build_hash_check(self) -> Callable[[Any], None] | None:
        """A session's ``verify`` that refuses a device whose firmware reports another build
        hash than the project's ``build_hash.txt`` (:class:`BuildHashMismatchError`, naming
        both and the fix); a firmware that reports none is accepted. None when the project has
        no build hash (or no directory): nothing to check."""
        if self.directory is None:
            return None
        expected = project_build_hash(self.directory)
        if expected is None:
            return None
        name = self.directory
        fix = (f"flash the project onto it ('project-api build {name}', then 'project-api "
               f"flash {name}')")

        def verify(session: Any) -> None:
            check_build_hash(session, expected, fix=fix)
        return verify

    def require_link(self, link: str) -> None:
        """ProjectError, before anything starts, when this project's ``project_type`` does not
        speak ``link`` ("rpc" or "mlperftiny") on its device link: the server's table of
        project types says which does (``server_info_query``'s ``project_types``), else
        :data:`PROJECT_TYPE_LINKS`, microTVM's types."""
        kind = self._options.get("project_type")
        table = self._info.get("project_types")
        links = ({name: entry.get("link") for name, entry in table.items()}
                 if isinstance(table, dict) else PROJECT_TYPE_LINKS)
        if not isinstance(kind, str) or kind not in links:
            return  # a template without project types: its server decides
        has = links[kind]
        if has == link:
            return
        name = self.directory or "the project"
        use = f"use 'project-api mlperftiny {name}', or " if has == "mlperftiny" else (
            f"use 'project-api run {name}', or " if has == "rpc" else "")
        other = type_with_link(links, link)
        fix = f"generate the project again with -o project_type={other}" if other else \
            f"generate it with a template whose firmware speaks {LINK_TITLES[link]}"
        raise ProjectError(
            f"{name} is a {kind} project (project_type={kind}): {speaks(has)}, and "
            f"{_LINK_NEEDED[link]}; {use}{fix}"
        )


def generate_project(
    template: str | os.PathLike[str],
    mlf: str | os.PathLike[str],
    project_dir: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
    *,
    force: bool = False,
    debug: bool = False,
    build: bool = False,
) -> GeneratedProject:
    """Generate ``project_dir`` from ``template`` (a built-in name or a directory) and ``mlf``.

    The template server is shut down before this returns; close the returned project (or use it
    in a ``with``) to stop its server. With ``build=True`` the project is also built; if the
    build fails its server is stopped and the error raised (the generated files stay).
    """
    with TemplateProject.from_directory(resolve_template(template), debug=debug) as tpl:
        project = tpl.generate_project_from_mlf(mlf, project_dir, options, force=force)
    if build:
        try:
            project.build()
        except BaseException:
            project.close()
            raise
    return project


def generate_project_from_mlf(
    template_project_dir: str | os.PathLike[str],
    project_dir: str | os.PathLike[str],
    mlf_path: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
) -> GeneratedProject:
    """microTVM's argument order for :func:`generate_project` (template, project, MLF, options)."""
    return generate_project(template_project_dir, mlf_path, project_dir, options)

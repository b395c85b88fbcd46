"""The ``project-api`` command: one module per verb, registered in :data:`VERB_MODULES`.

How to add a verb:

1. Write ``project_api/cli/<verb>.py`` with one subclass of
   :class:`project_api.cli.base.Subcommand` (``NAMES``, ``HELP``, ``EPILOG`` with examples,
   ``add_arguments(parser)``, ``invoke() -> int``). It is found automatically; a module may also
   list its classes explicitly in ``COMMANDS = [...]``.
2. Add ``"<verb>"`` to :data:`VERB_MODULES` below. Nothing else.

The list is tolerant: a listed module that does not exist yet is skipped, and one that fails to
import still gets its verb, which then reports the import error as its one-line failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import signal
import sys
import textwrap
import threading
from collections.abc import Sequence
from typing import Any

from project_api import TVM_COMPAT_VERSION, __version__
from project_api.cli.base import Subcommand, UsageError, is_tflite_file, tflite_not_mlf_error
from project_api.errors import (
    ClientError,
    IoTimeoutError,
    JSONRPCError,
    MLFError,
    OptionError,
    OptionValueError,
    ProjectAPIError,
    ProjectAPIServerNotFoundError,
    ProjectError,
    ServerError,
    TemplateStepError,
    TransportClosedError,
)
from project_api.system import bounded

#: Verb modules under project_api/cli, in the order ``--help`` lists them.
VERB_MODULES = [
    "templates",
    "info",
    "generate",
    "build",
    "flash",
    "run",  # host-template helper
    "emit",  # emitter helper
    "ops",  # the emitter's operators, dtype schemes and kernels
    "validate",  # many samples on the device vs a reference
    "mlperftiny",  # the MLPerf Tiny benchmark's host side
    "analyze",  # where the memory goes, per layer, and the fit against a board
    "profile",  # where the time goes, per operator, on the device
    "devices",  # serial ports, debug probes, labgrid places
]

_LOG = logging.getLogger("project_api.cli")

EPILOG = """\
examples:
  project-api templates
  project-api generate --template host --model model.tar --out prj
  project-api build prj
  project-api flash prj
  project-api info prj --json

'project-api <command> --help' explains each command;
'project-api generate --template NAME --help' lists that template's options.
exit status: 0 success, 1 failure, 2 usage error."""


class _Unavailable(Subcommand):
    """Stands in for a verb whose module failed to import."""

    ERROR = ""

    def invoke(self) -> int:
        raise ProjectError(self.ERROR)


def _commands_of(module: object) -> list[type[Subcommand]]:
    listed = getattr(module, "COMMANDS", None)
    if listed is None and getattr(module, "COMMAND", None) is not None:
        listed = [module.COMMAND]  # type: ignore[attr-defined]
    if listed is None:
        listed = [
            obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Subcommand) and obj is not Subcommand
            and obj.__module__ == module.__name__ and obj.NAMES  # type: ignore[attr-defined]
        ]
    return list(listed)


def load_commands(modules: Sequence[str] = VERB_MODULES) -> list[type[Subcommand]]:
    """Import each verb module and collect its Subcommand classes (see module docstring)."""
    commands: list[type[Subcommand]] = []
    for name in modules:
        qualified = f"{__name__}.{name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                _LOG.debug("verb module %s is not present; skipping", qualified)
                continue
            commands.append(_unavailable(name, exc))
            continue
        except Exception as exc:  # a broken verb must not take the whole CLI down
            commands.append(_unavailable(name, exc))
            continue
        commands.extend(_commands_of(module))
    return commands


def _unavailable(name: str, exc: BaseException) -> type[Subcommand]:
    message = f"the '{name}' command is unavailable ({type(exc).__name__}: {exc}); reinstall project-api"
    return type(f"Unavailable_{name}", (_Unavailable,),
                {"NAMES": [name], "HELP": f"(unavailable: {type(exc).__name__})", "ERROR": message})


def version_text() -> str:
    """What ``--version`` prints: the package version, the Project API protocol version the
    servers speak and the Model Library Format versions read."""
    from project_api.api import server
    from project_api.archive import mlf

    return "\n".join([
        f"project-api {__version__}",
        f"Project API protocol v{server.PROTOCOL_VERSION} (JSON-RPC 2.0, as microTVM "
        f"{TVM_COMPAT_VERSION})",
        "Model Library Format versions read: " + ", ".join(map(str, mlf.SUPPORTED_VERSIONS)),
    ])


class _VersionAction(argparse.Action):
    """``--version``: imports what it reports only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors become one line (raised as UsageError)."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message}; see '{self.prog} --help'")


def _common_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="show logs on stderr (-vv: debug logs, also from the servers)")
    group.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    return common


def build_parser(commands: Sequence[type[Subcommand]] | None = None) -> tuple[
        argparse.ArgumentParser, dict[str, tuple[type[Subcommand], argparse.ArgumentParser]]]:
    """The top-level parser and, per verb name or alias, its class and sub-parser."""
    if commands is None:
        commands = load_commands()
    parser = _Parser(
        prog="project-api",
        description="Generate, build, flash and drive microcontroller projects for compiled "
                    "ML models (the standalone successor of microTVM's Project API).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="show the package version and the wire versions it speaks, and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = _common_parser()
    table: dict[str, tuple[type[Subcommand], argparse.ArgumentParser]] = {}
    for cls in commands:
        if not cls.NAMES or cls.NAMES[0] in table:
            continue
        sub = subparsers.add_parser(
            cls.NAMES[0], aliases=cls.NAMES[1:], help=cls.HELP,
            description=textwrap.fill(cls.DESCRIPTION or cls.HELP, 79), epilog=cls.EPILOG or None,
            parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        cls.add_arguments(sub)
        sub.set_defaults(command_class=cls)
        for n in cls.NAMES:
            table[n] = (cls, sub)
    return parser, table


def _setup_logging(verbosity: int) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_project_api_cli", False):
            root.removeHandler(handler)
    if verbosity <= 0:
        handler: logging.Handler = logging.NullHandler()  # no stray "lastResort" output
        level = logging.CRITICAL + 1
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        level = logging.INFO if verbosity == 1 else logging.DEBUG
    handler._project_api_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


def format_error(exc: BaseException) -> str:
    """``<what went wrong>; <what to do>`` on one line."""
    if isinstance(exc, TemplateStepError) and exc.detail:
        # A template step (build, flash, a missing program) already says what and what to do.
        what = exc.detail
        hint = "run again with -v to see the full output"
    elif isinstance(exc, JSONRPCError):
        what, hint = _server_error(exc)
    elif isinstance(exc, ProjectAPIServerNotFoundError):
        what = str(exc)
        hint = "pass a template directory or a project made by 'project-api generate'"
    elif isinstance(exc, ClientError):
        what = str(exc) or type(exc).__name__
        hint = "check that the project's microtvm_api_server.py runs (-v shows its output)"
    elif isinstance(exc, (ProjectAPIError, UsageError)):
        what = str(exc) or type(exc).__name__
        hint = "see 'project-api --help'"
        if isinstance(exc, MLFError):
            hint = _mlf_hint(what)
    elif isinstance(exc, OSError):
        what = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
        hint = "check the path and its permissions"
    else:
        what = f"internal error: {type(exc).__name__}: {exc}"
        hint = "please report it with the output of -vv"
    what = shorten_values(" ".join(what.split()))
    if ";" in what:
        return what
    return f"{what}; {hint}"


#: Longest error line :func:`format_error` returns, whatever the message quotes.
MAX_ERROR_CHARS = 2000

_LONG_WORD = re.compile(rf"\S{{{bounded.QUOTE_CHARS + 1},}}")


def shorten_values(line: str) -> str:
    """``line`` with each word longer than :data:`bounded.QUOTE_CHARS` characters (a user's
    120 KB option value, a path too long for the system) cut to that many and its length, and
    the whole cut to :data:`MAX_ERROR_CHARS`: the last line of defence for a message that quotes
    a value whole. A message that names the problem and the fix stays whole below these bounds."""
    line = _LONG_WORD.sub(
        lambda m: f"{m.group()[:bounded.QUOTE_CHARS]}... ({len(m.group())} characters)", line)
    if len(line) > MAX_ERROR_CHARS:
        line = f"{line[:MAX_ERROR_CHARS]}... ({len(line)} characters)"
    return line


def _raised_in_server(data: Any) -> str:
    """The exception text at the end of a server's traceback (``MLFError: ...``, every line of
    it), without its module path; empty when the traceback ends in code (a deliberate error)."""
    tb = data.get("traceback") if isinstance(data, dict) else None
    lines = [line for line in str(tb or "").splitlines() if line.strip()]
    last_code = max((i for i, line in enumerate(lines) if line.startswith(" ")), default=-1)
    text = " ".join(line.strip() for line in lines[last_code + 1:])
    return re.sub(r"^(?:[A-Za-z_]\w*\.)+(?=\w+: )", "", text)


def _server_error(exc: JSONRPCError) -> tuple[str, str]:
    """What went wrong and what to do, for an error reply of a project's server.

    A link error our client raised itself (the fast-path endpoint it opened) says why the link
    failed; a template's own message (a plain ServerError) is shown as it is, after the method;
    anything else is an exception inside the server, shown with its text.
    """
    method = (exc.client_context or "").removeprefix("calling method ").strip()
    at = f"{method}: " if method else ""
    has_traceback = isinstance(exc.data, dict) and bool(exc.data.get("traceback"))
    reason = exc.data.get("reason") if isinstance(exc.data, dict) else None
    if isinstance(exc, TransportClosedError | IoTimeoutError) and (reason or not has_traceback):
        default = ("the link to the device is closed" if isinstance(exc, TransportClosedError)
                   else "the device did not answer in time")
        return (f"{at}{reason or default}",
                "check that the device is running and connected (-vv logs the link)")
    raised = _raised_in_server(exc.data)
    trace_hint = ("run again with -v to see the server's traceback" if has_traceback
                  else "run again with -vv to see the server's log")
    if type(exc) is ServerError and not exc.message.startswith("calling method "):
        return f"{at}{exc.message}", trace_hint  # a template's one-line message
    text = raised or exc.message
    if raised and not raised.startswith(exc.message) and not exc.message.startswith("calling "):
        text = f"{exc.message}: {raised}"
    return f"the project server failed in {method or 'a call'}: {text}", trace_hint


def _mlf_hint(message: str) -> str:
    """The fix for an MLFError without one: only a file that is no archive at all needs
    "pass an MLF"; an archive that is unsafe or lacks something needs something else."""
    if re.search(r"not a readable tar|no such file|not a Model Library Format|corrupt tar", message):
        return "pass a Model Library Format .tar (from TVM or 'project-api emit')"
    if "unsafe archive member" in message:
        return "do not use this archive; get a clean copy from whoever produced it"
    return "run again with -v to see what was read from the archive"


def _tflite_instead_of_mlf(cls: type[Subcommand], args: argparse.Namespace,
                          exc: Exception) -> Exception:
    """An MLF error about a file that is a TFLite model becomes the hint to emit it first."""
    if not isinstance(exc, MLFError):
        return exc
    for name in ("model", "path"):
        value = getattr(args, name, None)
        if isinstance(value, str) and is_tflite_file(value):
            return tflite_not_mlf_error(value, cls.NAMES[0] if cls.NAMES else "this command")
    return exc


def _exit_code(exc: BaseException) -> int:
    """2 for a usage error, whether the command line, our client (OptionError) or the
    template's server (OptionValueError) found it; else 1."""
    return 2 if isinstance(exc, (UsageError, OptionError, OptionValueError)) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``project-api`` with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, table = build_parser()

    if any(a in ("-h", "--help") for a in argv):
        verb = next((a for a in argv if not a.startswith("-")), None)
        if verb in table:
            cls, sub = table[verb]
            cls.prepare_help(sub, argv)

    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        line = format_error(exc)
        if "--json" in (argv[: argv.index("--")] if "--" in argv else argv):
            sys.stdout.write(json.dumps({"error": line}) + "\n")
        sys.stderr.write(f"error: {line}\n")
        return 2
    except SystemExit as exc:  # argparse after --help / --version
        return int(exc.code) if isinstance(exc.code, int) else 2
    verbosity = getattr(args, "verbose", 0) or 0
    cls = getattr(args, "command_class", None)
    if cls is None:
        parser.print_help(sys.stderr)
        return 2
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    _setup_logging(verbosity)
    try:
        return _invoke(cls, args, verbosity)
    finally:  # leave the caller's logging as it was (main may run in-process, e.g. in tests)
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])


class _InterruptWatch:
    """While active, notes that SIGINT arrived (then raises KeyboardInterrupt as Python does).

    A Ctrl-C reaches the whole process group: the device and the project's server may die of it
    and make the command fail in some other way (a closed link, say) before or while its own
    KeyboardInterrupt unwinds. The note lets such a failure still be reported as an interrupt.
    """

    def __init__(self) -> None:
        self.interrupted = False
        self._saved: Any = None

    def __enter__(self) -> _InterruptWatch:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._saved = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.interrupted = True
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGINT, self._saved)
            self._saved = None


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _interrupted(json_mode: bool) -> int:
    line = "interrupted; run the command again to finish"
    if json_mode:
        sys.stdout.write(json.dumps({"error": line}) + "\n")
    sys.stderr.write(f"error: {line}\n")
    return 130


def _invoke(cls: type[Subcommand], args: argparse.Namespace, verbosity: int) -> int:
    json_mode = bool(getattr(args, "json", False))
    watch = _InterruptWatch()
    try:
        with watch:
            return int(cls(args).invoke() or 0)
    except KeyboardInterrupt:
        return _interrupted(json_mode)
    except Exception as exc:
        if watch.interrupted or _caused_by_interrupt(exc):
            _LOG.debug("failed after an interrupt", exc_info=True)
            return _interrupted(json_mode)
        exc = _tflite_instead_of_mlf(cls, args, exc)
        _LOG.debug("command failed", exc_info=True)
        if verbosity and isinstance(exc, JSONRPCError) and isinstance(exc.data, dict):
            tb = exc.data.get("traceback")
            if tb:
                _LOG.info("server traceback:\n%s", tb)
        line = format_error(exc)
        if json_mode:
            sys.stdout.write(json.dumps({"error": line}) + "\n")
        sys.stderr.write(f"error: {line}\n")
        return _exit_code(exc)

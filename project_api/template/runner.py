"""Running a template's external programs: the build, the flasher, an emulator.

:func:`require` finds a program or raises :class:`~project_api.errors.MissingProgramError` with
the install hint. :func:`run_logged` runs a command with its whole output kept in a log file inside
the project (``build/build.log``), each line also logged (INFO: ``project-api -v`` shows it), and
on failure raises :class:`~project_api.errors.BuildError` (or the class given) naming the
**first** compiler error with its file and line, followed by the path of the full log::

    make = require("make", "install make and a C compiler, e.g. 'apt-get install make gcc'")
    run_logged([make, "-C", str(project_dir)], cwd=project_dir,
               log_path=project_dir / "build" / "build.log")
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from project_api.errors import BuildError, MissingProgramError, TemplateStepError

_LOG = logging.getLogger(__name__)

#: gcc/clang diagnostics: ``file:line[:col]: [fatal ]error: message``.
_COMPILER_ERROR = re.compile(r"^(?P<where>[^\s:][^:]*:\d+(?::\d+)?): (?:fatal )?error: (?P<what>.*)$")
#: Linker and driver errors that carry no line number.
_LINK_ERROR = re.compile(
    r"(undefined reference to .*|multiple definition of .*|cannot find -l\S+|"
    r"region `[^']+' overflowed by \d+ bytes|will not fit in region .*|ld returned \d+ exit status)"
)
_FATAL = re.compile(r"^(?:\S+: )?(?:fatal )?error: (?P<what>.*)$")
_MAKE_ERROR = re.compile(r"^(?:g?make(?:\[\d+\])?: \*\*\* .*|ninja: build stopped: .*)$")


def require(program: str, hint: str) -> str:
    """The path of ``program`` on PATH; MissingProgramError ``'<program>' is not installed; <hint>``."""
    path = shutil.which(program)
    if path is None:
        raise MissingProgramError(f"'{program}' is not installed (not found on PATH); {hint}")
    return path


def first_error(lines: Iterable[str]) -> str | None:
    """The first error a build printed, as ``file:line: message``; None if none is recognised.

    Compiler diagnostics win over linker errors, which win over the build tool's own summary
    (``make: *** [...] Error 1`` only says that something failed).
    """
    linker: str | None = None
    fatal: str | None = None
    tool: str | None = None
    for raw in lines:
        line = raw.rstrip()
        m = _COMPILER_ERROR.match(line)
        if m:
            return f"{m.group('where')}: {m.group('what')}"
        if linker is None:
            lm = _LINK_ERROR.search(line)
            if lm:
                linker = line.strip()
        if fatal is None:
            fm = _FATAL.match(line)
            if fm:
                fatal = line.strip()
        if tool is None and _MAKE_ERROR.match(line):
            tool = line.strip()
    return linker or fatal or tool


def run_logged(
    cmd: Sequence[str],
    *,
    cwd: Path,
    log_path: Path,
    step: str = "build",
    error: type[TemplateStepError] = BuildError,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``cmd`` in ``cwd``, keeping its whole output in ``log_path``; raise ``error`` on failure.

    Output lines are logged on this module's logger at INFO as they arrive (stdout and stderr
    merged, in order). A non-zero exit raises ``error`` with ``<step> failed: <first error>; full
    log: <log_path>``; a missing program raises MissingProgramError.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _LOG.info("%s: %s", step, shlex.join(cmd))
    lines: list[str] = []
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {shlex.join(cmd)}\n")
        try:
            proc = subprocess.Popen(
                list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace",
                env={**os.environ, **env} if env else None,
            )
        except FileNotFoundError:
            raise MissingProgramError(f"{step}: '{cmd[0]}' is not installed (not found)") from None
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                log.write(line)
                lines.append(line)
                _LOG.info("%s: %s", step, line.rstrip())
            returncode = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if returncode != 0:
        cause = first_error(lines) or f"{Path(cmd[0]).name} exited with status {returncode}"
        raise error(f"{step} failed: {cause}; full log: {log_path}", log=str(log_path))

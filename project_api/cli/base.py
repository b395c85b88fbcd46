"""The base class of every ``project-api`` verb, and the CLI's output and error conventions.

A verb is one module with one :class:`Subcommand` subclass (pyOCD style)::

    class BuildCommand(Subcommand):
        NAMES = ["build"]
        HELP = "Build a generated project."
        EPILOG = "example:\\n  project-api build prj"

        @classmethod
        def add_arguments(cls, parser):
            parser.add_argument("project_dir")

        def invoke(self) -> int:
            ...
            self.output({"project_dir": ...}, f"built {...}")
            return 0

Conventions: results go to stdout (text, or JSON with ``--json``); progress lines go to stderr;
logs appear only with ``-v``. A failure raises (any :class:`~project_api.errors.ProjectAPIError`,
or :class:`UsageError`) and ``main`` turns it into ONE stderr line ``error: <what>; <what to do>``
and exit status 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from project_api.errors import ProjectError
from project_api.system import bounded


class UsageError(Exception):
    """The command line is wrong; exit status 2."""


class Subcommand:
    """One verb of the ``project-api`` command."""

    #: Verb name first, then aliases.
    NAMES: ClassVar[list[str]] = []
    #: One line for the verb list in ``project-api --help``.
    HELP: ClassVar[str] = ""
    #: Longer text above the options in ``project-api <verb> --help`` (defaults to HELP).
    DESCRIPTION: ClassVar[str | None] = None
    #: Examples, shown below the options.
    EPILOG: ClassVar[str] = ""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self._started = time.monotonic()

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this verb's arguments to ``parser`` (common ones like --json are already there)."""

    @classmethod
    def prepare_help(cls, parser: argparse.ArgumentParser, argv: list[str]) -> None:
        """Called before ``--help`` is printed for this verb, to add dynamic text to the epilog."""

    def invoke(self) -> int:
        """Run the verb; return the exit status (0 on success)."""
        raise NotImplementedError

    # --- helpers for verbs ---------------------------------------------------------------------

    @property
    def json_output(self) -> bool:
        return bool(getattr(self.args, "json", False))

    @property
    def verbosity(self) -> int:
        return int(getattr(self.args, "verbose", 0) or 0)

    def output(self, data: Any, text: str | Callable[[], str]) -> None:
        """Print the result: ``data`` as JSON with --json, else ``text``."""
        if self.json_output:
            sys.stdout.write(json.dumps(json_safe(data), indent=2, default=str,
                                        allow_nan=False) + "\n")
        else:
            rendered = text() if callable(text) else text
            if rendered:
                sys.stdout.write(rendered.rstrip("\n") + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """A progress line on stderr (never on stdout, so --json output stays clean)."""
        if getattr(self.args, "quiet", False):
            return
        sys.stderr.write(f"{message}\n")
        sys.stderr.flush()

    def bar(self, label: str, total: int, unit: str = "samples") -> Any:
        """Progress of ``total`` units on stderr (:func:`project_api.cli.progress.progress_bar`:
        a bar on a terminal, else a line every few seconds, nothing with -q)."""
        from project_api.cli.progress import progress_bar

        return progress_bar(label, total, unit, quiet=bool(getattr(self.args, "quiet", False)))

    @property
    def timeout_advice(self) -> str:
        """How this verb's timeout messages say to wait longer: its own ``--timeout`` flag."""
        return f"project-api {self.NAMES[0]} --timeout SECONDS"

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    @contextlib.contextmanager
    def one_go_project(self, model: Path, work_prefix: str) -> Iterator[Any]:
        """A project generated, built and flashed from ``--template``, ``model`` (an MLF or a
        ``.tflite``, emitted first), ``-o`` and ``--input-spec``; kept in ``--out`` (replaced
        only with ``--force``) or in a temporary folder removed afterwards."""
        from project_api.api.project import (
            TemplateProject,
            generate_project,
            parse_option_assignments,
            resolve_template,
        )
        from project_api.template.targets import board_cpu

        a = self.args
        with self.work_dir(work_prefix) as work:
            template = resolve_template(a.template)
            with TemplateProject.from_directory(template) as tpl:
                options = parse_option_assignments(a.options, tpl.project_options)
                board = options.get("board", _default_of(tpl.project_options, "board"))
            mlf_path = model
            if model.suffix == ".tflite":
                mlf_path = work / "model.tar"
                cpu = board_cpu(template, board)
                self.progress(f"emitting {model} -> {mlf_path}"
                              + (f" (kernels for {board}'s {cpu})" if cpu else ""))
                _emit(model, mlf_path, cpu)
            if getattr(a, "input_specs", None):
                mlf_path = model_with_specs(mlf_path, a.input_specs, work)
            project_dir = work / "project"
            self.progress(f"generating {project_dir} from template {a.template}")
            with generate_project(template, mlf_path, project_dir, options,
                                  debug=self.verbosity > 1) as project:
                self.progress("building")
                project.build()
                project.flash()
                yield project

    @contextlib.contextmanager
    def work_dir(self, prefix: str) -> Iterator[Path]:
        """The verb's working folder: ``--out`` (an existing one replaced only with
        ``--force``), else a temporary folder named ``prefix...`` removed afterwards."""
        from project_api.errors import ProjectError

        a = self.args
        keep = a.out is not None
        work = Path(a.out) if keep else Path(tempfile.mkdtemp(prefix=prefix))
        try:
            if keep and work.exists():
                if not a.force:
                    raise ProjectError(f"{work} already exists; pass --force to replace it")
                shutil.rmtree(work)
            work.mkdir(parents=True, exist_ok=True)
            yield work
        finally:
            if not keep:
                shutil.rmtree(work, ignore_errors=True)


def add_retry_arguments(parser: argparse.ArgumentParser, unit: str = "sample", *,
                        how: str | None = None, without: str = "") -> None:
    """``--retries N`` and ``--no-retry``, the recovery from link faults every verb that drives
    a device offers (:func:`retry_policy` reads them). ``unit`` is what is sent again; ``how``
    says what recovery does (default: reopen the session, go on where the fault cut it);
    ``without`` adds to ``--no-retry``'s help what turning recovery off also drops."""
    from project_api.micro.recovery import DEFAULT_RETRIES, RetryPolicy

    how = how or f"reopen the session and go on where the fault cut the {unit}"
    retry = parser.add_mutually_exclusive_group()
    retry.add_argument("--retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                       help="recover from link faults (a lost or damaged frame, a reset "
                            f"board, a dead emulator): {how}, giving a {unit} up after N faults "
                            f"in a row without progress (default {DEFAULT_RETRIES}; "
                            f"{RetryPolicy().describe()})")
    retry.add_argument("--no-retry", action="store_true",
                       help="end the run at the first link fault, as microTVM and the MLPerf "
                            "Tiny EnergyRunner do"
                            + (f"; {without}" if without else ""))


def retry_policy(args: argparse.Namespace) -> Any:
    """The :class:`~project_api.micro.recovery.RetryPolicy` of ``--retries`` / ``--no-retry``."""
    from project_api.micro.recovery import RetryPolicy

    if args.no_retry:
        return RetryPolicy.disabled()
    if args.retries < 0:
        raise UsageError(f"--retries {args.retries}: give 0 or more, or --no-retry")
    return RetryPolicy(retries=args.retries)


def run_and_time(session: Any, module: Any, inputs: Sequence[Any], number: int,
                 repeat: int) -> tuple[list[Any], Any]:
    """One inference of ``module`` (an :class:`project_api.archive.mlf.ModuleInfo`) on the device of
    ``session`` with ``inputs``, then the device's timing of ``repeat`` x ``number`` runs:
    ``(outputs, timing)``. The inference streams as one sample (so with recovery on,
    ``Session(retry=...)``, it goes on where a link fault cut it, as ``validate`` does); the
    timing is made again whole after a fault."""
    import numpy as np

    from project_api.micro.stream import stream_samples
    from project_api.tools.samples import TensorSpec

    specs = [TensorSpec.from_tensor_info(t) for t in module.outputs]
    session.recovery.begin_run(1)
    outs, _ = stream_samples(session, module.name, [np.asarray(x)[None] for x in inputs], specs)
    outputs = [o[0] for o in outs]
    return outputs, session.time(session.model(module.name), number=number, repeat=repeat)


def json_safe(value: Any) -> Any:
    """``value`` with every float JSON cannot hold replaced: NaN by null, infinities by the
    strings "inf" and "-inf" (``json.dumps`` would write bare ``NaN``/``Infinity``, which no
    JSON parser has to accept)."""
    if isinstance(value, float):  # numpy's float64 is a float too
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return json_safe(value.tolist())
    return value


def model_with_specs(model: str | Path, specs: Sequence[str], workdir: str | Path) -> Path:
    """``model`` itself without specs; else a copy in ``workdir`` whose metadata.json records the
    supplied facts (so the template server sees them too)."""
    if not specs:
        return Path(model)
    from project_api.archive.mlf import write_mlf_with_specs

    return write_mlf_with_specs(model, specs, Path(workdir) / "model-with-input-specs.tar")


def _default_of(project_options: Iterable[Mapping[str, Any]], name: str) -> Any:
    """The default a server declares for option ``name`` (None if it has no such option)."""
    return next((o.get("default") for o in project_options if o.get("name") == name), None)


def _emit(tflite_path: Path, out_tar: Path, cpu: str | None = None) -> None:
    """Emit ``tflite_path`` with the kernels of ``cpu`` (a board's; None: portable C)."""
    from project_api.errors import ProjectError

    try:
        from project_api.emit import emit
        from project_api.emit.target import for_cpu
    except ImportError as exc:
        raise ProjectError(
            f"the TFLite emitter is not available ({exc}); emit the model with a project-api "
            "that has it, or pass an MLF .tar"
        ) from None
    emit(str(tflite_path), str(out_tar), name="default", target=for_cpu(cpu))


def format_options(options: Iterable[Mapping[str, Any]], indent: str = "  ") -> str:
    """Human-readable list of a server's project options."""
    lines: list[str] = []
    for opt in options:
        facts = [str(opt.get("type", "?"))]
        if opt.get("required"):
            facts.append("required for " + ", ".join(opt["required"]))
        if opt.get("optional"):
            facts.append("used by " + ", ".join(opt["optional"]))
        if opt.get("default") is not None:
            default = opt["default"]
            facts.append(f"default {json.dumps(default) if isinstance(default, bool) else default}")
        if opt.get("choices"):
            facts.append("choices: " + ", ".join(map(str, opt["choices"])))
        lines.append(f"{indent}{opt['name']}  ({'; '.join(facts)})")
        if opt.get("help"):
            lines.append(f"{indent}    {opt['help']}")
    return "\n".join(lines) if lines else f"{indent}(no options)"


def add_option_argument(parser: argparse.ArgumentParser) -> None:
    """``-o NAME=VALUE`` (repeatable): a project option, typed by the server's option types."""
    parser.add_argument(
        "-o", "--option", dest="options", action="append", default=[], metavar="NAME=VALUE",
        help="set a project option (repeatable); the value is typed by the option's type "
             "(bool: true/false, int, str)",
    )


def is_tflite_file(path: str | Path) -> bool:
    """True for a TFLite flatbuffer: its file identifier ``TFL3`` at bytes 4..8."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[4:8] == b"TFL3"


def tflite_not_mlf_error(path: str | Path, verb: str) -> UsageError:
    """The error for a TFLite file given where a Model Library Format archive belongs."""
    return UsageError(
        f"{path} is a TFLite model, not a Model Library Format archive, so '{verb}' cannot read "
        f"it; compile it with 'project-api emit {path} --out model.tar', or run it in one go "
        f"with 'project-api run --template host --model {path}'"
    )



def check_output_file(path: str | Path | None, option: str, force: bool, example: str) -> None:
    """Refuse at once an output path that is a directory, FIFO, device or socket, that exists
    without ``--force``, or whose folder is missing or unwritable: nothing may block on open."""
    if not path:
        return
    p = Path(path)
    shown = bounded.quote(str(p))
    try:
        st = os.stat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{option} {shown}: {exc.strerror}; name a file, e.g. {example}") from None
    if st is not None:
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else None)
        if kind:
            raise UsageError(f"{option} {shown} is {kind}, not a regular file; name a file, "
                             f"e.g. {example}")
        if not force:
            raise ProjectError(f"{p} already exists; pass --force to overwrite it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {shown}: its folder does not exist; create it first")
    if not os.access(parent, os.W_OK) or (st is not None and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {shown} is not writable; name a file you may write")

"""``project-api generate``: make a project from a template and a model."""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from project_api.api.project import (
    TemplateProject,
    add_unspecified_options,
    parse_option_assignments,
    resolve_template,
)
from project_api.cli.base import Subcommand, add_option_argument, format_options, model_with_specs
from project_api.errors import ProjectAPIError

_LOG = logging.getLogger(__name__)


def add_input_spec_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--input-spec NAME:DTYPE:SHAPE`` (repeatable): a fact the model archive lacks."""
    parser.add_argument(
        "--input-spec", dest="input_specs", action="append", default=[],
        metavar="NAME:DTYPE:SHAPE",
        help="dtype and shape of a tensor, overriding what is inferred where the archive does "
             "not record them (asked for only when nothing determines them), e.g. "
             "input_1:int8:1x49x10x1 (repeatable; an output's name works too)",
    )


class GenerateCommand(Subcommand):
    NAMES = ["generate"]
    HELP = "Generate a project from a template and a Model Library Format archive."
    DESCRIPTION = (
        "Generate a project directory from a template (a built-in name or a directory) and a "
        "model (an MLF .tar or its directory). Options are checked against the template's "
        "before anything is generated; an existing output directory is refused unless --force."
    )
    EPILOG = """\
examples:
  project-api generate --template host --model model.tar --out prj
  project-api generate --template host --model model.tar --out prj -o verbose=true --force
  project-api generate --template ./my_template --model mlf_dir --out prj --json
  project-api generate -t host -m tvm08.tar --out prj --input-spec input_1:int8:1x49x10x1
  project-api generate --template host --help     # lists the host template's options"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--template", "-t", required=True, metavar="NAME|DIR",
                            help="built-in template name (see 'project-api templates') or a directory")
        parser.add_argument("--model", "-m", required=True, metavar="MLF",
                            help="Model Library Format .tar, or its unpacked directory")
        parser.add_argument("--out", required=True, metavar="DIR",
                            help="project directory to create (must not exist unless --force)")
        add_option_argument(parser)
        parser.add_argument("--force", action="store_true",
                            help="replace --out if it exists (its contents are deleted)")
        add_input_spec_argument(parser)

    @classmethod
    def prepare_help(cls, parser: argparse.ArgumentParser, argv: list[str]) -> None:
        template = _value_of(argv, ("--template", "-t"))
        if template is None:
            parser.epilog = (parser.epilog or "") + (
                "\n\nadd --template NAME to this --help to list that template's options")
            return
        try:
            with TemplateProject.from_directory(resolve_template(template)) as tpl:
                listing = format_options(tpl.project_options)
                title = f"options of template {template!r} (platform {tpl.platform_name}), set with -o NAME=VALUE:"
        except (ProjectAPIError, OSError) as exc:
            title = f"could not list the options of template {template!r}:"
            listing = "  " + " ".join(str(exc).split())
        parser.epilog = f"{title}\n{listing}\n\n{parser.epilog or ''}"

    def invoke(self) -> int:
        from project_api.api.project import load_project_options
        from project_api.archive.mlf import open_mlf

        args = self.args
        template_dir = resolve_template(args.template)
        self.progress(f"starting the server of template {args.template} ...")
        with TemplateProject.from_directory(template_dir, debug=self.verbosity >= 2) as tpl, \
                tempfile.TemporaryDirectory(prefix="project-api-specs-") as tmp:
            options = parse_option_assignments(args.options, tpl.project_options, tpl.where)
            with open_mlf(model_with_specs(args.model, args.input_specs, tmp)) as library:
                warnings = self._notes(library, template_dir, options, tpl.project_options)
                self.progress(f"generating {args.out} from {args.model} ...")
                project_dir = tpl.generate(library, args.out, options, force=args.force)
            platform = tpl.platform_name
            full = {**add_unspecified_options({}, tpl.project_options),
                    **load_project_options(project_dir)}
        for line in warnings:  # not progress: shown with -q too
            sys.stderr.write(f"warning: {args.model}: {line}\n")
        out = str(Path(args.out))
        data = {"project_dir": str(project_dir), "template": str(template_dir),
                "platform": platform, "options": full, "warnings": warnings}
        self.output(data, f"generated {out} (template {args.template}, platform {platform}); "
                          f"next: project-api build {shlex.quote(out)}")  # pasted into a shell
        return 0

    def _notes(self, library: Any, template_dir: Path, options: dict[str, Any],
               project_options: list[dict[str, Any]]) -> list[str]:
        """A progress line for each tensor whose facts were inferred, not read (see
        :attr:`project_api.archive.mlf.TensorInfo.note`); the warnings to show after generating
        (kernels slower than the board's, float in software)."""
        from project_api.cli.base import _default_of
        from project_api.template.boards import board_entry
        from project_api.template.targets import board_cpu, software_float

        board = options.get("board", _default_of(project_options, "board"))
        for m in library.modules.values():
            for kind, tensors in (("input", m.inputs), ("output", m.outputs)):
                for t in tensors:
                    if t.note:
                        self.progress(f"note: {kind} {t.name!r}: {t.note} (--input-spec "
                                      f"{t.name}:{t.dtype}:D0xD1x... overrides it)")
        warnings = []
        if board:
            warnings += [slower_kernels(library, board, board_cpu(template_dir, board)),
                         software_float(library.modules.values(), board,
                                        board_entry(template_dir, board))]
        return [w for w in warnings if w]


def slower_kernels(library: Any, board: str, cpu: str | None) -> str | None:
    """A warning when ``library`` (a ModelLibrary) holds a module our emitter wrote with the
    portable kernels although ``board``'s ``cpu`` has DSP-extension kernels (which run several
    times faster, bit for bit the same); None otherwise. Archives from TVM record no
    ``kernel_target`` and are left alone."""
    from project_api.emit.target import for_cpu

    best = for_cpu(cpu)
    if not best.dsp:
        return None
    modules = (library.metadata.get("modules") or {}) if isinstance(library.metadata, dict) else {}
    generic = [name for name, entry in modules.items()
               if isinstance(entry, dict) and entry.get("kernel_target") in ("generic",
                                                                             "cortex-m0")]
    if not generic:
        return None
    return (f"module {generic[0]!r} was emitted with the portable kernels, but {board} is a "
            f"{cpu} with the {best.name} DSP kernels (several times faster, the same results): "
            f"emit the model again with 'project-api emit MODEL.tflite --target {best.name}'")



def _value_of(argv: list[str], flags: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                return argv[i + 1]
            if flag.startswith("--") and arg.startswith(flag + "="):
                return arg[len(flag) + 1 :]
    return None

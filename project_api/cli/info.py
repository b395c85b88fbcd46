"""``project-api info DIR``: what a project (or a model archive) is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from project_api import TVM_COMPAT_VERSION
from project_api.api.project import OPTIONS_FILE, SERVER_SCRIPT, load_project_options
from project_api.archive.mlf import ModelLibrary, open_mlf
from project_api.cli.base import (
    Subcommand,
    UsageError,
    format_options,
    is_tflite_file,
    tflite_not_mlf_error,
)


def describe_library(lib: ModelLibrary) -> str:
    """Human-readable summary of an MLF: modules, entry points, inputs and outputs."""
    lines = [f"  MLF version {lib.version}"
             + ("; carries its producer's runtime (./runtime), not used" if lib.has_bundled_runtime else "")]
    for mod in lib.modules.values():
        lines.append(
            f"  module {mod.name}: executors {', '.join(mod.executors) or '-'}, entry "
            f"{mod.run_function or '-'}, workspace {mod.workspace_size_bytes} B, "
            f"constants {mod.constants_size_bytes} B"
        )
        if mod.state_size_bytes:
            lines.append(f"    keeps {mod.state_size_bytes} B of state across runs "
                         f"(reset by {mod.reset_function})")
        if mod.internal_workspace_bytes:
            lines.append(f"    carries its own memory pool ({mod.internal_workspace_bytes} B in its C)")
        if mod.graph is not None:
            from project_api.template import graph_lowering

            g = mod.graph.graph
            lines.append(f"    graph executor, lowered to static C at generate time: "
                         f"{len([op for op in g.ops if not op.is_nop])} calls, "
                         f"{len(g.storage_sizes())} storage ids, {len(mod.graph.params)} params")
            lines.append(f"    memory: {graph_lowering.memory(mod).describe()}")
        if mod.target_family or mod.target_cpu:
            lines.append(f"    built for {mod.target_cpu or mod.target_family}"
                         + (f" ({mod.target_evidence})" if mod.target_evidence else ""))
        for kind, tensors in (("input", mod.inputs), ("output", mod.outputs)):
            for i, t in enumerate(tensors):
                shape = "x".join(map(str, t.shape)) if t.shape is not None else "?"
                quant = ""
                if t.quantization:
                    quant = f"  scale {t.quantization['scale'][0]:g} zero_point {t.quantization['zero_point'][0]}"
                lines.append(f"    {kind} {i}: {t.name}  {t.dtype}[{shape}]  {t.size_bytes} B{quant}")
                if t.note:
                    lines.append(f"      note: {t.note}")
    return "\n".join(lines)


def _add_graph_memory(lib: ModelLibrary, data: dict[str, Any]) -> None:
    """A graph module's memory figures (lowered vs TVM's graph executor) into its JSON."""
    from project_api.template import graph_lowering

    for name, mod in lib.modules.items():
        if mod.graph is not None:
            data["modules"][name]["graph_memory"] = graph_lowering.memory(mod).to_json()


class InfoCommand(Subcommand):
    NAMES = ["info"]
    HELP = "Show what a project directory (template or generated) or an MLF archive is."
    DESCRIPTION = (
        "Start the project's server and show its platform, whether it is a template, its "
        "options and, for a generated project, the model it was generated from. Given a Model "
        "Library Format .tar (or its directory), show the model's modules, inputs and outputs."
    )
    EPILOG = """\
examples:
  project-api info prj
  project-api info templates/host
  project-api info host                    # a built-in template, by name
  project-api info model.tar
  project-api info prj --json"""

    @classmethod
    def add_arguments(cls, parser) -> None:
        parser.add_argument("path", metavar="DIR",
                            help="project directory, built-in template name, or an MLF "
                                 ".tar/directory")
        from project_api.cli.generate import add_input_spec_argument

        add_input_spec_argument(parser)

    def invoke(self) -> int:
        path = Path(self.args.path)
        if not path.exists():
            from project_api.api.project import builtin_templates

            builtin = builtin_templates().get(str(self.args.path))
            if builtin is None:
                raise UsageError(f"{path} does not exist, and is not a built-in template "
                                 f"({', '.join(builtin_templates()) or 'none'})")
            path = builtin
        if path.is_file() and is_tflite_file(path):
            raise tflite_not_mlf_error(path, "info")
        looks_mlf = (path / "metadata.json").is_file() or (path / "codegen" / "host").is_dir()
        if path.is_file() or looks_mlf and not (path / SERVER_SCRIPT).exists():
            with open_mlf(path, input_specs=getattr(self.args, "input_specs", None)) as lib:
                data = lib.to_json()
                _add_graph_memory(lib, data)
                self.output(data, lambda: f"{path}: Model Library Format\n{describe_library(lib)}")
            return 0

        from project_api.api import client as client_mod

        client = client_mod.instantiate_from_dir(str(path.absolute()), debug=self.verbosity >= 2)
        try:
            info = dict(client.server_info_query(TVM_COMPAT_VERSION))
        finally:
            client.shutdown()
        data: dict[str, Any] = {"path": str(path), **info}
        model_text = ""
        mlf_path = info.get("model_library_format_path")
        if not info.get("is_template"):
            data["saved_options"] = load_project_options(path)
            if mlf_path and Path(mlf_path).exists():
                with open_mlf(mlf_path) as lib:
                    data["model"] = lib.to_json()
                    _add_graph_memory(lib, data["model"])
                    model_text = describe_library(lib)

        def text() -> str:
            kind = "template project" if info.get("is_template") else "generated project"
            lines = [f"{path}: {kind}, platform {info.get('platform_name')}"]
            if not info.get("is_template"):
                lines.append(f"model: {mlf_path or '-'}")
                if model_text:
                    lines.append(model_text)
                if data.get("saved_options"):
                    saved = ", ".join(f"{k}={v}" for k, v in data["saved_options"].items())
                    lines.append(f"generated with: {saved}  ({OPTIONS_FILE})")
            lines.append("options:")
            lines.append(format_options(info.get("project_options") or []))
            return "\n".join(lines)

        self.output(data, text)
        return 0

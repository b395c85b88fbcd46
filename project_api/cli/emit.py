"""``project-api emit MODEL.tflite --out MODEL.tar``: compile a TFLite model to an MLF archive."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from project_api.cli.base import Subcommand, UsageError

if TYPE_CHECKING:
    from project_api.emit import EmitResult


class EmitCommand(Subcommand):
    NAMES = ["emit"]
    HELP = "Compile a TFLite model (.tflite) to a Model Library Format archive of portable C."
    DESCRIPTION = (
        "Read a .tflite flatbuffer and write a Model Library Format (v7) .tar: C kernels that "
        "match TFLite Micro's reference kernels bit for bit (int8), weights as const arrays, and "
        "a static plan for the activations (TVMGEN_<NAME>_WORKSPACE_SIZE bytes). An existing "
        "output file is refused unless --force."
    )
    EPILOG = """\
examples:
  project-api emit model.tflite --out model.tar
  project-api emit kws.tflite --out kws.tar --name kws --force
  project-api emit model.tflite --out model.tar --json
  project-api emit kws.tflite --out kws.tar --target cortex-m4
  project-api emit kws.tflite --out kws.tar --target "c -keys=arm_cpu,cpu -mcpu=cortex-m7"
  project-api emit kws.tflite --out kws-prof.tar --target cortex-m4 --profile
  project-api emit vww.tflite --out vww.tar --target cortex-m4 --weights int16

--target picks the kernels: generic (portable C, the default), cortex-m4, cortex-m7,
cortex-m33 (DSP-extension SIMD kernels; on a CPU without the extension they compile to
portable C with the same results), cortex-m0 or cortex-m3 (the portable kernels, each run
on its own core). A TVM target string or
-mcpu=CPU selects the same way (cortex-m33+nodsp -> cortex-m0). metadata.json records it.
cortex-m55 adds Helium (MVE) kernels where they beat the DSP ones (fully connected, unpadded
convolutions); -mcpu=cortex-m55+nomve keeps the DSP kernels alone, and cortex-m85 (no emulator
has run Helium on it) gets them too. docs/cores.md lists what runs on each core.
On a DSP target the summary says how many operators got its DSP kernels and lists those that
took a generic one ('project-api ops' shows which operators and types have DSP kernels).
--weights picks the DSP convolutions' weight layout: int8 (the default: the model's int8
weights, reordered offline and widened in registers, so the constants stay the size of the
.tflite's weights) or int16 (16-bit pairs in flash: twice the weight bytes, no widening at run
time). FULLY_CONNECTED always keeps int8. metadata.json records the layout ("weights").

--profile makes a profile build: before each operator the C reads the platform's counter
(TVMCrtPlatform_CycleCount) into a static table, which 'project-api profile PROJECT' reads after
each run; the outputs are the plain build's, bit for bit.

-o FILE still names the archive, but -o NAME=VALUE (a project option in 'generate' and
'run') is refused: emit has no project options."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", metavar="MODEL.tflite", help="TFLite flatbuffer to compile")
        parser.add_argument("--out", "--output", dest="output", metavar="OUT.tar",
                            help="Model Library Format archive to write (required)")
        parser.add_argument("-o", dest="o_output", metavar="OUT.tar", help=argparse.SUPPRESS)
        parser.add_argument("--name", default="default",
                            help="module name: C symbols are tvmgen_<name>_* (default: default)")
        parser.add_argument("--force", action="store_true", help="overwrite OUT.tar if it exists")
        parser.add_argument("--profile", action="store_true",
                            help="a profile build: the C times every operator with the "
                                 "platform's counter ('project-api profile' reads the table)")
        parser.add_argument("--target", default=None, metavar="TARGET",
                            help="kernel target: generic (default), cortex-m0, cortex-m3, "
                                 "cortex-m4, cortex-m7, cortex-m33, cortex-m55, cortex-m85, "
                                 "riscv32 (rv32imac), rv32imafc, or a target string with "
                                 "-mcpu=CPU")
        parser.add_argument("--weights", default=None, choices=("int8", "int16"),
                            help="weight layout of the DSP convolutions: int8 (default, the "
                                 "model's bytes reordered) or int16 (pairs in flash, 2x)")

    def invoke(self) -> int:
        from project_api.emit import emit

        a = self.args
        o_output = getattr(a, "o_output", None)
        if o_output is not None:
            if "=" in o_output:
                raise UsageError(
                    f"-o {o_output}: -o NAME=VALUE is a project option (for 'generate' and "
                    "'run'), and emit has none; name the archive with --out FILE.tar"
                )
            if a.output is not None:
                raise UsageError("give the archive once: --out FILE.tar")
            a.output = o_output
        if a.output is None:
            raise UsageError("name the archive to write: --out FILE.tar")
        model = Path(self.args.model)
        if not model.is_file():
            raise UsageError(f"model {model} does not exist or is not a file")
        from project_api.emit.target import resolve, with_weights
        from project_api.errors import EmitError

        try:
            target = with_weights(resolve(a.target), getattr(a, "weights", None))
        except EmitError as exc:
            raise UsageError(f"--target {a.target!r}: {exc}") from exc
        result = emit(model, self.args.output, name=self.args.name, force=self.args.force,
                      target=target, profile=bool(getattr(a, "profile", False)))
        data = {
            "path": str(Path(self.args.output).absolute()),
            "name": result.name,
            "operators": result.num_operators,
            "workspace_size_bytes": result.workspace_size_bytes,
            "workspace_lower_bound_bytes": result.lower_bound_bytes,
            "constants_size_bytes": result.constants_size_bytes,
            "state_size_bytes": result.state_size_bytes,
            "target": target.name,
            "profile": result.generated.profile,
            "weights": target.weights,
            "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}
                       for t in result.inputs],
            "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)}
                        for t in result.outputs],
            "kernels": [{"node": u.node, "op": u.op, "scheme": u.scheme, "kernel": u.kernel}
                        for u in result.kernels],
            "generic_on_dsp": [{"node": u.node, "op": u.op, "scheme": u.scheme}
                               for u in result.generic_on_dsp],
        }
        self.output(data, f"wrote {self.args.output}: module {result.name}, "
                          f"{result.num_operators} operators, {kernels_summary(result)}, "
                          f"workspace {result.workspace_size_bytes} B, constants "
                          f"{result.constants_size_bytes} B"
                          + (f", state {result.state_size_bytes} B (kept across runs)"
                             if result.state_size_bytes else ""))
        return 0


def kernels_summary(result: EmitResult) -> str:
    """What kernels the model got, in words: on a DSP target, how many nodes took its DSP
    kernels and which took a generic one (never "cortex-m4 kernels" when none applied)."""
    target = result.target
    if not target.dsp:
        return f"{target.name} kernels (portable C)"
    uses = result.kernels
    dsp = sum(1 for u in uses if u.kernel == "dsp")
    mve = sum(1 for u in uses if u.kernel == "mve")
    generic = result.generic_on_dsp
    words = f"{dsp} with {target.name} DSP kernels" if dsp else f"no {target.name} DSP kernel applies"
    if mve:
        words = f"{mve} with {target.name} Helium (MVE) kernels, {words}"
    if not generic:
        return words
    nodes: dict[str, list[int]] = {}
    for u in generic:
        nodes.setdefault(f"{u.op} {u.scheme}", []).append(u.node)
    listed = ", ".join(f"{op} (node{'s' if len(n) > 1 else ''} {', '.join(map(str, n))})"
                       for op, n in nodes.items())
    return f"{words}, generic kernels for {listed}"

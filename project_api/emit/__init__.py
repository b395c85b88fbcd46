"""The emitter: a TFLite flatbuffer in, a Model Library Format (v7) archive of portable C out.

``emit(model, out_path, name="default")`` reads the model (:mod:`.tflite_reader`), prepares every
operator (:mod:`.ops`, one module per operator, with all checks done here and none in the C),
plans the activation pool (:mod:`.planner`), renders C from the Jinja2 kernels in ``kernels/``
(:mod:`.codegen`) and writes a deterministic tar (:mod:`.mlf_writer`).

The generated ``tvmgen_<name>_run(inputs, outputs)`` reads and writes the caller's buffers and
takes every intermediate from one ``TVMBackendAllocWorkspace`` call of
``TVMGEN_<NAME>_WORKSPACE_SIZE`` bytes, so it links only the CRT backend library. int8 and
int16x8 results match the TFLM reference kernels bit for bit. What the emitter implements is
:data:`.ops.REGISTRY` (``project-api ops``); the schema facts it reads models with are
:mod:`.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from project_api.errors import EmitError
from project_api.system import bounded
from project_api.tflite.reader import read_tflite

from .codegen import Generated, IOTensor, generate
from .mlf_writer import tar_bytes, write_mlf
from .target import GENERIC, TARGET_NAMES, WEIGHT_LAYOUTS, Target, resolve, with_weights

__all__ = ["GENERIC", "TARGET_NAMES", "WEIGHT_LAYOUTS", "EmitResult", "IOTensor", "KernelUse", "Target", "emit",
           "emit_sources", "kernel_uses", "read_tflite", "resolve"]


@dataclass(frozen=True)
class KernelUse:
    """The kernel one node of the model got."""

    node: int
    op: str  # the operator's name
    scheme: str  # its dtype scheme (float32, int8, int16x8, ...)
    kernel: str  # "dsp" (a DSP-extension kernel), "mve" (a Helium one), "generic" (portable C)
    # or "view" (no code: a view of its input, or a VAR_HANDLE naming a state slot)
    template: str


def kernel_uses(gen: Generated) -> list[KernelUse]:
    """The kernel each node of ``gen`` got, in execution order."""
    return [KernelUse(k.op.index, k.op.name, k.scheme,
                      "view" if k.alias or k.no_code else "dsp" if k.dsp
                      else "mve" if k.params.get("mve") else "generic",
                      k.template)
            for k in gen.kernels]


@dataclass
class EmitResult:
    """What :func:`emit` produced."""

    path: Path | None
    name: str
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    workspace_size_bytes: int
    lower_bound_bytes: int
    constants_size_bytes: int
    num_operators: int
    generated: Generated

    @property
    def target(self) -> Target:
        return self.generated.target

    @property
    def state_size_bytes(self) -> int:
        """Bytes of the module's state region (0 for a model without state)."""
        return self.generated.state_size_bytes

    @property
    def kernels(self) -> list[KernelUse]:
        """The kernel each node got."""
        return kernel_uses(self.generated)

    @property
    def generic_on_dsp(self) -> list[KernelUse]:
        """On a DSP target, the nodes that took a generic kernel (no DSP kernel applies to their
        scheme or shape); empty on a target without DSP kernels."""
        if not self.target.dsp:
            return []
        return [u for u in self.kernels if u.kernel == "generic"]


#: Longest module name (``--name``): the archive reader takes names of at most 128 characters.
MAX_NAME_CHARS = 128


def emit_sources(model: bytes | bytearray | str | Path, name: str = "default",
                 target: str | Target | None = None, weights: str | None = None,
                 profile: bool = False) -> Generated:
    """Read and compile ``model`` (bytes or a path) to C sources without writing anything.

    ``target``: a kernel target name (``generic``, ``cortex-m4``, ...), a TVM target string
    with ``-mcpu=``, or None for ``generic`` (see :mod:`.target`). ``weights``: the weight
    layout of the DSP convolutions, ``int8`` (default) or ``int16``. ``profile``: a profile
    build, whose C times every operator (:mod:`.profile`)."""
    if not name or len(name) > MAX_NAME_CHARS:
        raise EmitError(f"module name {bounded.quote(name)} must have 1 to {MAX_NAME_CHARS} "
                        "characters (--name)")
    gen = generate(read_tflite(model), name, with_weights(resolve(target), weights))
    if profile:
        from .profile import instrument

        gen = instrument(gen)
    return gen


def emit(model: bytes | bytearray | str | Path, out_path: str | Path, name: str = "default",
         force: bool = False, target: str | Target | None = None,
         weights: str | None = None, profile: bool = False) -> EmitResult:
    """Compile ``model`` for ``target`` (weight layout ``weights``, see :func:`emit_sources`)
    and write the MLF archive to ``out_path`` (with ``profile``, a profile build: see
    :mod:`.profile`).

    Raises :class:`~project_api.errors.EmitError` for a corrupt model or an existing
    ``out_path`` without ``force``, and :class:`~project_api.errors.UnsupportedOperatorError`
    (naming the node) for anything the emitter does not implement.
    """
    gen = emit_sources(model, name, target, weights, profile)
    path = write_mlf(gen, out_path, force=force)
    return EmitResult(path, name, gen.inputs, gen.outputs, gen.workspace_size_bytes,
                      gen.lower_bound_bytes, gen.constants_size_bytes,
                      len(gen.kernels), gen)


def archive_bytes(model: bytes | bytearray | str | Path, name: str = "default",
                  target: str | Target | None = None) -> bytes:
    """The archive as bytes (for tests of determinism)."""
    from .mlf_writer import mlf_files

    return tar_bytes(mlf_files(emit_sources(model, name, target)))

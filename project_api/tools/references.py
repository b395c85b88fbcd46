"""The reference outputs of a validation: TFLite Micro's and LiteRT's interpreters run on the same
samples as the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from project_api.errors import (
    ValidationError,
)

if TYPE_CHECKING:
    pass

#: The label of LiteRT's reference kernels standing in for TFLM (a model TFLM cannot run).
LITERT_REF = "LiteRT's reference kernels"

Progress = Callable[[int], None]  #: called with how many more samples are done


def _tflite_bytes(model: bytes | str | Path) -> bytes:
    if isinstance(model, bytes | bytearray):
        return bytes(model)
    path = Path(model)
    if not path.is_file():
        raise ValidationError(f"model {path} does not exist; pass the .tflite the project was made from")
    return path.read_bytes()


def tflm_outputs(model: bytes, inputs: Sequence[np.ndarray], progress: Progress | None = None,
                 arena_size_bytes: int | None = None, *, state: str = "reset"
                 ) -> list[np.ndarray]:
    """Run every sample of ``inputs`` (each ``(samples, ...)``) in one TFLite Micro interpreter
    (reference kernels); return each output as ``(samples, *shape)``.

    ``state`` says what a stateful model's state does between samples: ``"reset"`` (the
    default; the interpreter's reset), ``"boot"`` (a new interpreter per sample: the state of a
    device just booted or reset, which runs CALL_ONCE init subgraphs again where TFLM's reset
    does not) or ``"carry"`` (one interpreter, never reset: the samples are one stream)."""
    from project_api.emit import reference

    runtime = reference._tflm_runtime()
    n_in, n_out = reference._subgraph_io_count(model)
    if len(inputs) != n_in:
        raise ValidationError(f"the .tflite has {n_in} inputs, the data {len(inputs)}; "
                              "pass the .tflite the project was made from")
    size = arena_size_bytes or reference.tflm_arena_size(model)
    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=size)
    shapes = [tuple(int(d) for d in interp.get_input_details(i)["shape"]) for i in range(n_in)]
    n = int(inputs[0].shape[0]) if inputs else 0
    outs: list[np.ndarray] = []
    for s in range(n):
        if state == "boot" and s:
            interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=size)
        elif state == "reset":
            interp.reset()  # no state carried between samples (variable tensors)
        for i in range(n_in):
            interp.set_input(np.ascontiguousarray(inputs[i][s].reshape(shapes[i])), i)
        interp.invoke()
        for k in range(n_out):
            y = np.asarray(interp.get_output(k))
            if s == 0:
                outs.append(np.empty((n, *y.shape), dtype=y.dtype))
            outs[k][s] = y
        if progress is not None:
            progress(1)
    return outs


def tflm_or_litert_ref(model: bytes, inputs: Sequence[np.ndarray],
                       progress: Progress | None = None, *, state: str = "reset",
                       litert_state: str = "carry") -> tuple[str, list[np.ndarray]]:
    """TFLite Micro's outputs (:func:`tflm_outputs`) and its label; for a model TFLM cannot
    run (an operator it lacks, such as TILE, or an operand it wants constant, such as FILL's
    dims computed from shapes), LiteRT's reference kernels' (``BUILTIN_REF``), labelled with
    why TFLM could not. An arena too big for the host, or a missing package, still raises."""
    from project_api.emit import reference

    failure: Exception | None = None
    printed: list[str] = []

    def tflm() -> tuple[str, list[np.ndarray]] | None:
        nonlocal failure
        try:
            return "TFLite Micro", tflm_outputs(model, inputs, progress, state=state)
        except reference.ReferenceArenaError:
            raise
        except (RuntimeError, TypeError, IndexError, KeyError) as exc:
            failure = exc
            return None

    try:
        with reference._captured_fds() as printed:  # TFLM's C code says why it fails
            got = tflm()
    except OSError:  # no descriptors to redirect: run it plainly
        got = tflm()
    if got is not None:
        return got
    why = reference.tflm_failure_reason("".join(printed), failure)
    if not reference.litert_ref_stands_in(why):
        raise ValidationError(f"TFLite Micro cannot run this model as the reference ({why})")
    try:
        outs = litert_outputs(model, inputs, progress, state=litert_state,
                              reference_kernels=True)
    except (RuntimeError, ValueError) as exc:
        raise ValidationError(
            f"TFLite Micro cannot run this model as the reference ({why}), nor "
            f"{LITERT_REF} ({' '.join(str(exc).split())[:200]})") from None
    return f"{LITERT_REF} (TFLite Micro cannot run this model: {why})", outs


def litert_outputs(model: bytes, inputs: Sequence[np.ndarray],
                   progress: Progress | None = None, *, state: str = "carry",
                   reference_kernels: bool = False) -> list[np.ndarray]:
    """Run every sample in one LiteRT interpreter (built-in kernels, no delegates, one thread;
    with ``reference_kernels`` its reference kernels); return each output as
    ``(samples, *shape)``. ``state``: ``"carry"`` (one interpreter, the default) or ``"boot"``
    (a new one per sample, for a stateful model whose state is reset)."""
    from project_api.emit import reference

    def fresh() -> Any:
        return reference._litert(model, reference_kernels)

    interp = fresh()
    ins, outs_d = interp.get_input_details(), interp.get_output_details()
    if len(inputs) != len(ins):
        raise ValidationError(f"the .tflite has {len(ins)} inputs, the data {len(inputs)}; "
                              "pass the .tflite the project was made from")
    n = int(inputs[0].shape[0]) if inputs else 0
    outs = [np.empty((n, *(int(d) for d in o["shape"])), dtype=o["dtype"]) for o in outs_d]
    for s in range(n):
        if state == "boot" and s:
            interp = fresh()
        for value, det in zip(inputs, ins, strict=True):
            interp.set_tensor(det["index"], np.ascontiguousarray(
                value[s].reshape(tuple(int(d) for d in det["shape"]))))
        interp.invoke()
        for k, det in enumerate(outs_d):
            outs[k][s] = interp.get_tensor(det["index"])
        if progress is not None:
            progress(1)
    return outs

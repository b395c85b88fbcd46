"""The Relay text of a TVM model: what ``@main`` takes and what it returns.

Model Library Format archives carry the Relay text the model was built from (``src/relay.txt``,
``src/<module>.relay``). :func:`read_main` reads its ``def @main``: the parameters with their
declared types, the function's attributes (``output_tensor_names``), the printed return type if
any, and the result type inferred through the body::

    >>> from project_api import relay
    >>> main = relay.read_main('def @main(%x: Tensor[(1, 8), float32], %w: Tensor[(3, 8), '
    ...                        'float32]) {\\n  nn.dense(%x, %w, units=3)\\n}\\n')
    >>> main.params[0].name, str(main.result)
    ('x', 'Tensor[(1, 3), float32]')

``parser`` reads the text, ``ops`` holds the operators' type relations and ``infer`` carries the
types through a body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from project_api.archive.relay.infer import Inference
from project_api.archive.relay.parser import Call, OpRef, Param, RelayError, parse
from project_api.archive.relay.types import TensorType, TupleType, Type, flatten

__all__ = ["MainSignature", "RelayError", "TensorType", "TupleType", "Type", "flatten",
           "read_main"]


@dataclass
class MainSignature:
    """What ``def @main`` says and what its body gives."""

    params: list[Param]  #: every parameter (weights too), in order, with declared types
    attrs: dict[str, Any]  #: ``output_tensor_names=[...]`` and other function attributes
    declared: Type  #: the printed ``-> T`` (None when absent or unreadable)
    has_declared: bool
    result: Type  #: the result type inferred through the body (None: unknown)
    last_op: str | None  #: the operator of the body's final call, e.g. ``nn.bias_add``
    unknown_ops: list[str]  #: operators met whose types this reader does not infer

    @property
    def output_names(self) -> list[str] | None:
        names = self.attrs.get("output_tensor_names")
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            return [str(n) for n in names]
        return None


def read_main(text: str, where: str = "Relay text") -> MainSignature:
    """Read ``def @main`` of a Relay text and infer its result type.

    Raises:
        RelayError: the text holds no readable ``def @main``.
    """
    module = parse(text, where)
    main = module.functions.get("main")
    if main is None:
        raise RelayError("no 'def @main' among the functions " + ", ".join(
            f"@{n}" for n in module.functions))
    inference = Inference(module, where)
    try:
        result = inference.function(main)
    except RecursionError:
        result = None  # nested too deeply to follow: the result stays unknown
    last = None
    if main.body is not None and isinstance(main.body.result, Call) and isinstance(
            main.body.result.fn, OpRef):
        last = main.body.result.fn.name
    return MainSignature(main.params, main.attrs, main.ret, main.has_ret, result, last,
                         sorted(inference.unknown_ops))

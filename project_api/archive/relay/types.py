"""Relay types as far as the shapes and dtypes of tensors go: :class:`TensorType`,
:class:`TupleType`, and ``None`` for a type that is not known (or not a tensor or tuple).

A dimension is an ``int`` or ``None`` (printed ``?``, a shape variable, or an expression we do
not evaluate); a dtype is TVM's spelling (``int8``, ``float32``) or ``None``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from project_api.archive import dtypes

Dim = int | None


@dataclass(frozen=True)
class TensorType:
    """``Tensor[(d0, d1, ...), dtype]``; a scalar has the shape ``()``."""

    shape: tuple[Dim, ...] | None
    dtype: str | None

    @property
    def known(self) -> bool:
        """Both the dtype and every dimension are known."""
        return self.dtype is not None and self.static_shape is not None

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape when every dimension is known, else None."""
        if self.shape is None or any(d is None for d in self.shape):
            return None
        return tuple(int(d) for d in self.shape)  # type: ignore[arg-type]

    @property
    def ndim(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def with_dtype(self, dtype: str | None) -> TensorType:
        return TensorType(self.shape, dtype)

    def with_shape(self, shape: tuple[Dim, ...] | None) -> TensorType:
        return TensorType(shape, self.dtype)

    def __str__(self) -> str:
        if self.shape is not None and not self.shape:
            return self.dtype or "?"
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d)
                                                        for d in self.shape)
        return f"Tensor[({dims}), {self.dtype or '?'}]"


@dataclass(frozen=True)
class TupleType:
    """``(T0, T1, ...)``; a field may be None (unknown)."""

    fields: tuple[Type, ...]

    def __str__(self) -> str:
        inner = ", ".join("?" if f is None else str(f) for f in self.fields)
        return f"({inner}{',' if len(self.fields) == 1 else ''})"


Type = TensorType | TupleType | None


def is_dtype(name: str) -> bool:
    """Whether ``name`` is a dtype TVM prints (``int8``, ``float32``, ``bool``, ``int8x4``)."""
    try:
        dtypes.parse(name)
    except dtypes.DTypeError:
        return False
    return True


def flatten(t: Type) -> list[TensorType | None]:
    """The tensors of a (nested) tuple type, in order; a lone tensor is a list of one."""
    if isinstance(t, TupleType):
        out: list[TensorType | None] = []
        for f in t.fields:
            out.extend(flatten(f) if isinstance(f, TupleType) else [f])
        return out
    return [t]


def num_elements(shape: tuple[Dim, ...] | None) -> int | None:
    if shape is None or any(d is None for d in shape):
        return None
    return math.prod(int(d) for d in shape)  # type: ignore[arg-type]

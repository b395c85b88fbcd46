"""Shapes and dtypes carried through a Relay function body, statement by statement.

Parameters have their declared types; each call's result comes from its operator's relation
(:mod:`project_api.archive.relay.ops`), a call of another ``@function`` or ``fn`` from that function's
body; tuples and ``%t.0`` projections follow. Where the printer wrote ``/* ty=T */`` after an
expression, T is TVM's own inferred type and is used as it is. Whatever cannot be inferred is
None and makes only what depends on it unknown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from project_api.archive.relay import ops
from project_api.archive.relay.parser import (
    Body,
    Call,
    Const,
    Expr,
    FnExpr,
    Function,
    GlobalRef,
    IfExpr,
    MetaRef,
    Module,
    OpRef,
    Proj,
    TupleExpr,
    Unreadable,
    VarRef,
)
from project_api.archive.relay.types import TensorType, TupleType, Type

_LOG = logging.getLogger(__name__)
_MAX_DEPTH = 16


@dataclass(frozen=True)
class _Closure:
    func: Function


Value = Type | _Closure


class Inference:
    """Type inference over the functions of one module."""

    def __init__(self, module: Module, where: str = "Relay text"):
        self.module = module
        self.where = where
        self.depth = 0
        self.unknown_ops: set[str] = set()

    def function(self, fn: Function, args: list[Type] | None = None) -> Type:
        """The type ``fn``'s body produces (its declared parameter types, else ``args``)."""
        if fn.body is None:
            return None
        env: dict[str, Value] = {}
        for k, p in enumerate(fn.params):
            env[p.name] = p.annotation if p.annotation is not None else (
                args[k] if args is not None and k < len(args) else None)
        return _type(self.body(fn.body, env))

    def body(self, body: Body, env: dict[str, Value]) -> Value:
        env = dict(env)
        for b in body.bindings:
            if b.value is None:
                env[b.name] = b.annotation
            else:
                value = self.expr(b.value, env)
                env[b.name] = b.annotation if b.annotation is not None else value
        return self.expr(body.result, env)

    def expr(self, e: Expr, env: dict[str, Value]) -> Value:
        value = self._expr(e, env)
        if e.has_annotation and e.annotated is not None:
            if isinstance(value, TensorType | TupleType) and value != e.annotated:
                _LOG.debug("%s: printed type %s differs from the inferred %s; using the printed",
                           self.where, e.annotated, value)
            return e.annotated
        return value

    def _expr(self, e: Expr, env: dict[str, Value]) -> Value:
        if isinstance(e, VarRef):
            return env.get(e.name)
        if isinstance(e, Const):
            return TensorType((), e.dtype)
        if isinstance(e, TupleExpr):
            return TupleType(tuple(_type(self.expr(f, env)) for f in e.fields))
        if isinstance(e, Proj):
            t = self.expr(e.tuple, env)
            if isinstance(t, TupleType) and 0 <= e.index < len(t.fields):
                return t.fields[e.index]
            return None
        if isinstance(e, FnExpr):
            return _Closure(e.func)
        if isinstance(e, Call):
            return self.call(e, env)
        if isinstance(e, IfExpr):
            a = _type(self.body(e.then, env))
            b = _type(self.body(e.otherwise, env))
            return a if a == b else None
        if isinstance(e, MetaRef | Unreadable | OpRef | GlobalRef):
            return None
        return None

    def call(self, e: Call, env: dict[str, Value]) -> Value:
        args = [_type(self.expr(a, env)) for a in e.args]
        fn = e.fn
        if isinstance(fn, OpRef):
            if fn.name not in ops.RELATIONS:
                self.unknown_ops.add(fn.name)
                return None
            return ops.result_type(fn.name, args, e.attrs)
        target: Function | None = None
        if isinstance(fn, GlobalRef):
            target = self.module.functions.get(fn.name)
        elif isinstance(fn, FnExpr):
            target = fn.func
        elif isinstance(fn, VarRef):
            bound = env.get(fn.name)
            target = bound.func if isinstance(bound, _Closure) else None
        if target is None:
            return None
        if target.has_ret and target.ret is not None:
            return target.ret
        if self.depth >= _MAX_DEPTH:
            return None
        self.depth += 1
        try:
            return self.function(target, args)
        finally:
            self.depth -= 1


def _type(value: Value) -> Type:
    return None if isinstance(value, _Closure) else value

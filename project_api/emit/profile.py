"""``emit --profile``: the profile build of an emitted module (the C instrumentation and the
record it reports are :mod:`project_api.template.profile_build`'s)."""

from __future__ import annotations

import dataclasses

from project_api.template.profile_build import instrument_sources

from .codegen import Generated

__all__ = ["instrument"]


def instrument(gen: Generated) -> Generated:
    """The profile build of ``gen``: the same operators, with the table and its read function
    at the top of the C and declared in the header."""
    if gen.profile:
        return gen
    source, header = instrument_sources(gen.name, gen.source, gen.header,
                                        [k.op.index for k in gen.kernels if not k.alias])
    return dataclasses.replace(gen, source=source, header=header, profile=True)

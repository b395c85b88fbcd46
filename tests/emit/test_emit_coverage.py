"""Every operator x dtype scheme the emitter declares (``project-api ops``) has randomized
parity cases, and every scheme with DSP kernels has cases emitted for the DSP target: adding an
operator or a scheme without its parity cases fails here.

The parity modules are ``tests/emit/test_emit_random.py`` and every ``tests/test_ops_<family>.py``;
each exposes its cases as ``CASES``. A case's scheme is what the registry's classifier says of
the model the case builds, not what the case claims.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from helpers.emit_parity import DSP_TARGET

from project_api.emit.ops import REGISTRY

TESTS = Path(__file__).resolve().parent  # the parity modules sit beside this one
PARITY_MODULES = ["test_emit_random", *sorted(p.stem for p in TESTS.glob("test_ops_*.py"))]


@pytest.fixture(scope="module")
def cases():
    return [c for name in PARITY_MODULES for c in importlib.import_module(name).CASES]


def test_every_operator_and_scheme_has_parity_cases(cases):
    covered = {(c.op, c.scheme) for c in cases}
    missing = [f"{e.name} {s}" for e in REGISTRY.entries() for s in e.spec.schemes
               if (e.name, s) not in covered]
    assert not missing, ("declared in an op module's SPEC but without parity cases in "
                         f"{', '.join(PARITY_MODULES)}: {', '.join(missing)}")


def test_every_dsp_scheme_runs_on_the_dsp_target(cases):
    covered = {(c.op, c.scheme) for c in cases if c.target == DSP_TARGET}
    missing = [f"{e.name} {s}" for e in REGISTRY.entries() for s in e.spec.dsp
               if (e.name, s) not in covered]
    assert not missing, f"DSP kernels without {DSP_TARGET} parity cases: {', '.join(missing)}"


def test_cases_are_named_once(cases):
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})

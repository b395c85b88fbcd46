"""The archives TVM users published (tests/tvm_corpus.py ``world-*``) on QEMU's STM32F405, host
driven, as they are (no ``--input-spec``): TVM's DSP micro-kernels of the Cortex-M7 archive run on
the Cortex-M4's real DSP instructions; every output is checked against numpy."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    stm32_tools_and_no_qemu_left,
)
from tvm_corpus import build_archive

from project_api.archive.mlf import open_mlf

KEYS = ("world-2023-cortex-m7-int8", "world-2021-keras-dense")


@pytest.fixture(scope="module", params=KEYS)
def flashed(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    root = tmp_path_factory.mktemp(request.param)
    entry = build_archive(request.param, root)
    # TVM's C is not warning-free (the 2021 operators take const weights as float*).
    project = build_project(entry.path, root / "prj", warning_as_error=False)
    try:
        project.flash()
        yield entry, project
    finally:
        project.close()


def _sample(entry, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = entry.model.inputs[0]
    if t.dtype == "int8":
        return {t.name: rng.integers(-128, 128, t.shape).astype(np.int8)}
    return {t.name: rng.uniform(-3.1, 3.1, t.shape).astype(np.float32)}


def test_published_archive_runs_on_qemu_stm32(flashed: tuple) -> None:
    entry, project = flashed
    with open_mlf(entry.path) as lib:
        (out,) = lib.module().outputs
        assert out.shape == (1, 1)  # inferred: the archive records none
    rng = np.random.default_rng(18)
    seen = set()
    with project.session() as session:
        model = session.model()
        for _ in range(24):
            feeds = _sample(entry, rng)
            while entry.model.ambiguous(feeds):  # a float rounding tie: take another sample
                feeds = _sample(entry, rng)
            ((_, x),) = feeds.items()
            model.set_input(0, x)
            model.run()
            got = model.get_output(0)
            (want,) = entry.model.reference(feeds)
            assert got.shape == want.shape and got.dtype == want.dtype
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(got, want)
            seen.add(got.tobytes())
    assert len(seen) > 4  # the outputs vary with the inputs: a check that can fail

"""MLPerf Tiny host runner: the benchmark's UART protocol (mlcommons/tiny ``benchmark/api``) from
the host side, over a project's own transport, and the performance and accuracy modes of the
EEMBC EnergyRunner, open, recovering from link faults.

- :mod:`~project_api.tools.mlperftiny.device`: :class:`Device`, the protocol (commands end in ``%``,
  replies are ``\\r\\n`` lines up to ``m-ready``);
- :mod:`~project_api.tools.mlperftiny.data`: data sets (the EnergyRunner's folder or an ``.npz``);
- :mod:`~project_api.tools.mlperftiny.recovery`: :class:`LinkRecovery`, what makes a long run on a
  noisy link finish with every answer checked (the protocol has no integrity check of its own);
- :mod:`~project_api.tools.mlperftiny.modes`: :func:`performance` and :func:`accuracy`, their reports
  and :func:`results_text` (a submission's ``results.txt``).

Everything is importable from here: ``from project_api import mlperftiny as mt; mt.Device``.
"""

from __future__ import annotations

from project_api.tools.mlperftiny.data import ModelFacts, Sample, load_dataset, model_facts
from project_api.tools.mlperftiny.device import (
    CMD_SIZE,
    DB_CHUNK_BYTES,
    DB_PRINT_BYTES,
    Device,
    DeviceError,
    DeviceTimeoutError,
    Expected,
    InferResult,
    IntegrityError,
    LinkClosedError,
    MalformedReplyError,
    MlperfTinyError,
)
from project_api.tools.mlperftiny.modes import (
    ANOMALY_MODELS,
    MIN_WINDOW_SECONDS,
    WARMUPS,
    WINDOWS,
    AccuracyReport,
    PerformanceReport,
    Progress,
    Window,
    accuracy,
    performance,
    recovery_notes,
    results_text,
    roc_auc,
    scores_metrics,
    state_json,
    state_line,
)
from project_api.tools.mlperftiny.recovery import (
    BOOT_LINES,
    LAP_SLACK_SEC,
    NOISY_SYNC_ATTEMPTS,
    PLAUSIBLE_RATIO,
    PROBES,
    WARMUP_SPREAD,
    FailedSample,
    LinkRecovery,
    link_fault_kind,
)

__all__ = [
    "ANOMALY_MODELS",
    "AccuracyReport",
    "BOOT_LINES",
    "CMD_SIZE",
    "DB_CHUNK_BYTES",
    "DB_PRINT_BYTES",
    "Device",
    "DeviceError",
    "DeviceTimeoutError",
    "Expected",
    "FailedSample",
    "InferResult",
    "IntegrityError",
    "LAP_SLACK_SEC",
    "LinkClosedError",
    "LinkRecovery",
    "MIN_WINDOW_SECONDS",
    "MalformedReplyError",
    "MlperfTinyError",
    "ModelFacts",
    "NOISY_SYNC_ATTEMPTS",
    "PLAUSIBLE_RATIO",
    "PROBES",
    "PerformanceReport",
    "Progress",
    "Sample",
    "WARMUPS",
    "WARMUP_SPREAD",
    "WINDOWS",
    "Window",
    "accuracy",
    "link_fault_kind",
    "load_dataset",
    "model_facts",
    "performance",
    "recovery_notes",
    "results_text",
    "roc_auc",
    "scores_metrics",
    "state_json",
    "state_line",
]

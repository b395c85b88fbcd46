"""Children that take Ctrl-C as from a terminal, however the test run was started."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """``preexec_fn`` of a child a test interrupts with SIGINT: SIGINT back to its default
    action, so Python in the child raises KeyboardInterrupt. A test run started as a
    background job of a non-interactive shell (or under ``nohup``) inherits SIGINT ignored,
    and a child would inherit that too and never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)

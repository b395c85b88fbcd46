"""Stopping a child process for good: the one terminate-wait-kill sequence everything uses."""

from __future__ import annotations

import subprocess


def stop_process(proc: subprocess.Popen, grace_sec: float, *, terminate: bool = True) -> None:
    """End ``proc``: SIGTERM (unless ``terminate`` is false, to let it exit by itself first),
    wait up to ``grace_sec``, then SIGKILL and reap it. Safe on a process that already exited."""
    if proc.poll() is not None:
        return
    if terminate:
        proc.terminate()
    try:
        proc.wait(timeout=grace_sec)
        return
    except subprocess.TimeoutExpired:
        pass
    if not terminate:
        proc.terminate()
        try:
            proc.wait(timeout=1.0)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait()

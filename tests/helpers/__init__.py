"""Machinery shared by test modules (importable as ``helpers.<module>``; ``tests`` is on the path
through ``conftest.py``). Their ``assert`` statements are rewritten by pytest like a test's."""

import pytest

pytest.register_assert_rewrite("helpers.emit_parity")

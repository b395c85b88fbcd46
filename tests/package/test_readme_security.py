"""README's security section states the readers' limits and the serial URL schemes as the code
has them: change a constant and this fails until the README says so too."""

from __future__ import annotations

from conftest import REPO_ROOT

from project_api.api import transport
from project_api.archive import facts, unpack
from project_api.system import bounded


def _section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text.split("## Security", 1)[1].split("\n## ", 1)[0]


def test_limits_match_the_code() -> None:
    section = _section()
    for value, env in [
        (unpack.DEFAULT_MAX_MEMBER_BYTES, "PROJECT_API_MLF_MAX_MEMBER_BYTES"),
        (unpack.DEFAULT_MAX_TOTAL_BYTES, "PROJECT_API_MLF_MAX_TOTAL_BYTES"),
        (unpack.DEFAULT_MAX_MEMBERS, "PROJECT_API_MLF_MAX_MEMBERS"),
        (bounded.DEFAULT_MAX_PATH_DEPTH, "PROJECT_API_MLF_MAX_PATH_DEPTH"),
        (bounded.DEFAULT_MAX_PATH_CHARS, "PROJECT_API_MLF_MAX_PATH_CHARS"),
        (bounded.DEFAULT_MAX_JSON_DEPTH, "PROJECT_API_MAX_JSON_DEPTH"),
        (bounded.DEFAULT_MAX_ARRAY_BYTES, "PROJECT_API_MAX_ARRAY_BYTES"),
    ]:
        row = next((line for line in section.splitlines() if f"`{env}`" in line), None)
        assert row is not None, f"README's security section does not name {env}"
        assert f"{value:,}" in row, f"README gives {row!r}; the code's limit is {value:,}"
    assert f"{bounded.MAX_INT_DIGITS} digits" in section
    assert f"{facts.MAX_SIZE_FIELD:,} bytes" in section
    assert f"{bounded.QUOTE_CHARS} characters" in section


def test_serial_schemes_match_the_code() -> None:
    section = _section()
    for scheme in transport.SERIAL_SCHEMES:
        assert f"`{scheme.split(' ')[0]}`" in section, scheme
    assert transport.HWGREP_ENV in section

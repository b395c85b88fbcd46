"""Malicious MLF tars are rejected before anything is written, and nothing lands outside."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from mlf_factory import make_mlf, mlf_files

from project_api.archive.mlf import open_mlf
from project_api.archive.unpack import safe_extract
from project_api.errors import MLFError


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _add(tar: tarfile.TarFile, name: str, kind: bytes, linkname: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    tar.addfile(info)


def _malicious_tar(path: Path, evil: callable) -> Path:
    """A valid-looking MLF whose *first* members are legitimate, then the evil one(s)."""
    with tarfile.open(path, "w") as tar:
        for name, data in mlf_files(7).items():
            _add_file(tar, f"./{name}", data)
        evil(tar)
    return path


CASES = {
    "absolute path": (lambda t: _add_file(t, "/tmp/project_api_evil_abs"), "absolute path"),
    "dot-dot": (lambda t: _add_file(t, "./codegen/../../evil.txt"), r"'\.\.'"),
    "leading dot-dot": (lambda t: _add_file(t, "../evil.txt"), r"'\.\.'"),
    "escaping symlink (..)": (lambda t: _add(t, "./link", tarfile.SYMTYPE, "../../etc"), "symlink"),
    "absolute symlink": (lambda t: _add(t, "./link", tarfile.SYMTYPE, "/etc/passwd"), "absolute"),
    "write through symlink": (
        lambda t: (_add(t, "./sub", tarfile.SYMTYPE, "codegen"), _add_file(t, "./sub/x.c")),
        "goes through the symlink"),
    "hardlink outside": (lambda t: _add(t, "./hl", tarfile.LNKTYPE, "/etc/passwd"), "hard link"),
    "hardlink to non-member": (lambda t: _add(t, "./hl", tarfile.LNKTYPE, "nothere"), "hard link"),
    "character device": (lambda t: _add(t, "./dev", tarfile.CHRTYPE), "device file"),
    "block device": (lambda t: _add(t, "./blk", tarfile.BLKTYPE), "device file"),
    "fifo": (lambda t: _add(t, "./fifo", tarfile.FIFOTYPE), "FIFO"),
    "duplicate member": (lambda t: _add_file(t, "./metadata.json", b"{}"), "more than once"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malicious_member_rejected_and_nothing_written(tmp_path, case):
    evil, message = CASES[case]
    tar = _malicious_tar(tmp_path / "evil.tar", evil)
    dest = tmp_path / "sandbox" / "out"
    dest.parent.mkdir()
    before_outside = _tree(tmp_path)
    with pytest.raises(MLFError, match=message):
        safe_extract(tar, dest)
    # Checked before writing: the destination was not even created, nothing appeared anywhere.
    assert not dest.exists()
    assert _tree(tmp_path) == before_outside
    assert not Path("/tmp/project_api_evil_abs").exists()
    # open_mlf refuses it the same way and cleans its private temp dir.
    with pytest.raises(MLFError, match=message):
        open_mlf(tar)


def test_oversized_member_rejected_with_configurable_cap(tmp_path):
    big = b"\0" * 5000
    tar = _malicious_tar(tmp_path / "big.tar", lambda t: _add_file(t, "./parameters/big.bin", big))
    with pytest.raises(MLFError, match="over the 4096-byte limit"):
        safe_extract(tar, tmp_path / "out", max_member_bytes=4096)
    assert not (tmp_path / "out").exists()
    # The same archive passes with a larger cap, and the member is intact.
    safe_extract(tar, tmp_path / "ok", max_member_bytes=8192)
    assert (tmp_path / "ok" / "parameters" / "big.bin").read_bytes() == big


def test_total_size_cap_and_env_override(tmp_path, monkeypatch):
    tar = make_mlf(tmp_path / "m.tar", 7)
    monkeypatch.setenv("PROJECT_API_MLF_MAX_TOTAL_BYTES", "100")
    with pytest.raises(MLFError, match="over 100 bytes in total"):
        safe_extract(tar, tmp_path / "out")
    monkeypatch.setenv("PROJECT_API_MLF_MAX_MEMBER_BYTES", "nonsense")
    with pytest.raises(MLFError, match="not an integer"):
        safe_extract(tar, tmp_path / "out")


def test_member_count_cap(tmp_path):
    tar = make_mlf(tmp_path / "m.tar", 7)
    with pytest.raises(MLFError, match="more than the limit of 3"):
        safe_extract(tar, tmp_path / "out", max_members=3)


def test_header_lying_about_size_is_caught(tmp_path):
    """A member whose data is larger than its header says cannot bypass the cap."""
    path = tmp_path / "m.tar"
    with tarfile.open(path, "w") as tar:
        _add_file(tar, "./metadata.json", b"{}")
    # tarfile reads exactly `size` bytes, so a lying header just truncates: make sure extraction
    # writes exactly what the header declared and nothing more.
    safe_extract(path, tmp_path / "out")
    assert (tmp_path / "out" / "metadata.json").read_bytes() == b"{}"


def test_internal_links_are_allowed(tmp_path):
    def links(t):
        _add(t, "./codegen/host/src/alias.c", tarfile.SYMTYPE, "default_lib0.c")
        _add(t, "./params_copy", tarfile.LNKTYPE, "./parameters/default.params")

    tar = _malicious_tar(tmp_path / "ok.tar", links)
    written = safe_extract(tar, tmp_path / "out")
    out = tmp_path / "out"
    alias = out / "codegen/host/src/alias.c"
    assert alias.is_symlink() and os.readlink(alias) == "default_lib0.c"
    assert alias.read_bytes() == (out / "codegen/host/src/default_lib0.c").read_bytes()
    assert (out / "params_copy").read_bytes() == (out / "parameters/default.params").read_bytes()
    assert not (out / "params_copy").is_symlink()
    assert all(p.resolve().is_relative_to(out.resolve()) for p in written)


def test_never_overwrites_existing_files_or_follows_existing_links(tmp_path):
    tar = make_mlf(tmp_path / "m.tar", 7)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "metadata.json").write_text("mine")
    with pytest.raises(MLFError, match="refusing to overwrite"):
        safe_extract(tar, dest)
    assert (dest / "metadata.json").read_text() == "mine"
    # A pre-existing symlink in the destination must not redirect writes outside.
    outside = tmp_path / "outside"
    outside.mkdir()
    dest2 = tmp_path / "out2"
    dest2.mkdir()
    (dest2 / "codegen").symlink_to(outside)
    with pytest.raises(MLFError):
        safe_extract(tar, dest2)
    assert list(outside.iterdir()) == []


def test_gzip_tar_is_accepted(tmp_path):
    plain = make_mlf(tmp_path / "m.tar", 7)
    gz = tmp_path / "m.tar.gz"
    with tarfile.open(plain) as src, tarfile.open(gz, "w:gz") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m) if m.isreg() else None)
    with open_mlf(gz) as lib:
        assert lib.version == 7


def test_member_below_a_file_is_rejected_before_writing(tmp_path):
    tar = _malicious_tar(tmp_path / "f.tar", lambda t: _add_file(t, "./metadata.json/inner", b"x"))
    with pytest.raises(MLFError, match="below the file"):
        safe_extract(tar, tmp_path / "out")
    assert not (tmp_path / "out").exists()

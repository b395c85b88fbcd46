"""Is a firmware image a whole ELF file? Read with pyelftools before it is flashed or given to
an emulator, so a truncated or damaged image is refused in one line instead of crashing the
board or QEMU later (a bad vector table shows up as a HardFault, an FPSCR dump, or nothing).

:func:`check_image` reads the ELF header, the program header table and every loadable segment:
each must lie inside the file, there must be something to load, the entry point must be in a
loaded segment, and the section header table (when there is one) must end inside the file
too. ``machine`` (pyelftools' ``e_machine`` name, e.g. ``"EM_ARM"``) also checks
the CPU the image is for.
"""

from __future__ import annotations

import io
from pathlib import Path

from project_api.errors import ServerError

#: What every message ends with: the fix.
REBUILD = "rebuild it with 'project-api build'"


def check_image(image: Path, machine: str | None = None,
                error: type[ServerError] = ServerError) -> bytes:
    """The bytes of ``image`` if it is a whole ELF executable (for ``machine`` when given),
    else ``error`` (a ServerError class) naming what is wrong and the fix."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    def fail(why: str) -> ServerError:
        text = f"{image} {why}; {REBUILD}"
        return error(text) if error is not ServerError else ServerError(message=text)

    image = Path(image)
    try:
        data = image.read_bytes()
    except OSError as exc:
        raise fail(f"cannot be read ({exc.strerror or exc})") from None
    if data[:4] != b"\x7fELF":
        raise fail("is not an ELF file (no ELF magic)")
    try:
        elf = ELFFile(io.BytesIO(data))
        header = elf.header
        if machine is not None and header["e_machine"] != machine:
            raise fail(f"is an ELF file for {header['e_machine']}, not {machine}")
        table_end = header["e_phoff"] + header["e_phnum"] * header["e_phentsize"]
        if header["e_phnum"] == 0:
            raise fail("has no program headers, so nothing would be loaded")
        if table_end > len(data):
            raise fail(f"is truncated: its program header table ends at byte {table_end}, the "
                       f"file holds {len(data)}")
        sections_end = header["e_shoff"] + header["e_shnum"] * header["e_shentsize"]
        if header["e_shoff"] and sections_end > len(data):
            raise fail(f"is truncated: its section header table ends at byte {sections_end}, "
                       f"the file holds {len(data)}")
        loads = [seg for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
    except (ELFError, ValueError, KeyError) as exc:  # pyelftools on a cut or garbled header
        raise fail(f"is not a readable ELF file ({' '.join(str(exc).split())})") from None
    except EOFError:
        raise fail(f"is truncated ({len(data)} bytes)") from None
    if not any(seg["p_filesz"] for seg in loads):
        raise fail("has no loadable segment with contents")
    for seg in loads:
        end = seg["p_offset"] + seg["p_filesz"]
        if end > len(data):
            raise fail(f"is truncated: its segment at 0x{seg['p_vaddr']:08x} ends at byte {end}, "
                       f"the file holds {len(data)}")
    entry = header["e_entry"] & ~1  # a Thumb entry point has its low bit set
    if entry and not any(seg["p_vaddr"] <= entry < seg["p_vaddr"] + seg["p_memsz"]
                         for seg in loads):
        raise fail(f"is damaged: its entry point 0x{header['e_entry']:08x} lies in no loaded "
                   "segment")
    return data

#!/usr/bin/env python3
"""Write fuzz_mlperftiny's seed corpus: command sessions of the MLPerf Tiny protocol.

Usage: mlperftiny_corpus.py OUT_DIR   -> OUT_DIR/seed_*
"""

from __future__ import annotations

import sys
from pathlib import Path

SEEDS = [
    b"\x00name%profile%help%timestamp%",
    b"\x03db load 4%db 01020304%infer 2 1%results%",
    b"\x07db load 24%db 000102030405060708090a0b%db 0c0d0e0f101112131415161718%db print 8 4%",
    b"\x01db load 5%db 0102%db 030405%infer%results%db 00%",
    b"\x0fdb%db load%db load 0%db load 99%db 012%db zz%infer 0%infer 1 x%%frob%",
    b"\x02" + b"x" * 90 + b"%name%",
    b"\x05db crc%db load 12%db 0102030405%db crc%db 060708090a0b0c%db crc%db crc 3%",
    b"\x09db load 24%db crc%db 00ff%%db  crc  %db crcx%db cr%infer 1 0%db crc%",
]


def main(out: str) -> None:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(SEEDS):
        (root / f"seed_{i:02d}").write_bytes(seed)


if __name__ == "__main__":
    main(sys.argv[1])

"""Our base85 codec must be byte-identical to Python's base64.b85encode / b85decode (spec §1.6)."""

from __future__ import annotations

import base64
import random

import pytest

from project_api import server

GOLDEN = [
    (b"foo\x1b", b"W^ZpB"),
    (b"foo", b"W^Zo"),
    (b"\x00", b"00"),
    (b"", b""),
    (bytes.fromhex("fe ff fd 03 00 00 00 00 00 02 66 77"), b"{{Q_00000000L%r"),
]

ENCODERS = [server._b85encode_numpy, server.b85encode]
DECODERS = [server._b85decode_numpy, server.b85decode]


def test_numpy_path_is_available():
    # Otherwise the tests below would only compare the stdlib with itself.
    assert server._numpy() is not None


@pytest.mark.parametrize("encode", ENCODERS)
@pytest.mark.parametrize("data,text", GOLDEN)
def test_golden_encode(encode, data, text):
    assert encode(data) == text


@pytest.mark.parametrize("decode", DECODERS)
@pytest.mark.parametrize("data,text", GOLDEN)
def test_golden_decode(decode, data, text):
    assert decode(text) == data
    assert decode(text.decode("ascii")) == data


def test_alphabet_is_rfc1924():
    assert server.B85_ALPHABET == (
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
    )
    # The last digit of the big-endian word v is value v % 85.
    for value in range(85):
        assert (
            server._b85encode_numpy(value.to_bytes(4, "big"))[-1:]
            == server.B85_ALPHABET[value : value + 1]
        )


def test_random_lengths_match_stdlib():
    rng = random.Random(1924)
    for length in range(0, 1001):
        data = rng.randbytes(length)
        expected = base64.b85encode(data)
        for encode in ENCODERS:
            assert encode(data) == expected, (encode.__name__, length)
        for decode in DECODERS:
            assert decode(expected) == data, (decode.__name__, length)
            assert decode(expected.decode("ascii")) == data


def test_extremes_match_stdlib():
    for data in (b"\xff" * 1003, b"\x00" * 1001, bytes(range(256)) * 5, bytearray(b"\xfe" * 999)):
        expected = base64.b85encode(data)
        assert server._b85encode_numpy(data) == expected
        assert server._b85encode_numpy(memoryview(bytes(data))) == expected
        assert server._b85decode_numpy(expected) == bytes(data)


def test_large_payload_matches_stdlib():
    data = random.Random(7).randbytes((1 << 20) + 3)
    text = base64.b85encode(data)
    assert server.b85encode(data) == text
    assert server.b85decode(text) == data


def _stdlib_error(text):
    try:
        base64.b85decode(text)
    except ValueError as exc:
        return str(exc)
    return None


def test_decode_errors_match_stdlib():
    rng = random.Random(85)
    cases = [
        b"abc\x00",
        b"~~~~~",
        b"~",
        b"|NsC1",
        b"0000~~~~~~",
        b"abc\x00~~~~~",
        b"~~~~~abc\x00",
        b"0 000",
    ]
    for _ in range(300):
        length = rng.randrange(1, 700)
        text = bytearray(base64.b85encode(rng.randbytes(length)))
        for _ in range(rng.randrange(1, 3)):
            text[rng.randrange(len(text))] = rng.choice(b" \"',.[]\\\x00\xff~|")
        cases.append(bytes(text))
    failures = 0
    for text in cases:
        expected = _stdlib_error(text)
        for decode in DECODERS:
            if expected is None:
                assert decode(text) == base64.b85decode(text)
            else:
                failures += 1
                with pytest.raises(ValueError) as info:
                    decode(text)
                assert str(info.value) == expected, text
    assert failures > 100


def test_non_ascii_str_is_rejected_like_stdlib():
    for decode in DECODERS:
        with pytest.raises(
            ValueError, match="string argument should contain only ASCII characters"
        ):
            decode("é" * 400)


@pytest.mark.parametrize("length", [4092, 4095, 4096, 4097, 4100, 5001, 65537])
def test_both_encoder_strategies_match_stdlib(length):
    # Up to 1024 words the encoder divides by a vector of powers; beyond, column by column.
    data = random.Random(length).randbytes(length)
    text = base64.b85encode(data)
    assert server._b85encode_numpy(data) == text
    assert server._b85decode_numpy(text) == data

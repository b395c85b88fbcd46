"""The constant tables TFLM's signal-library Python ops compute when they build an audio front
end (``tflite_micro.signal.ops``): the window weights, the mel filter bank's weights and channel
tables, the PCAN gain lookup table, and the spectral subtraction's fixed-point coefficients.

The builder (:mod:`.builder`) uses them to write models shaped like TFLM's
``audio_preprocessor`` from code. They follow the published algorithms in float32 where TFLM's
helpers compute in C ``float`` (numpy's float32 ``log1p``/``power`` may differ from the C
library's by an ulp, which changes a table entry at most; the emitter reads whatever tables a
model holds, so this only shapes the test models).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "FilterBankTables",
    "filter_bank_tables",
    "freq_to_mel",
    "hann_window",
    "pcan_gain_lut",
    "spectral_subtraction_coefficients",
]

#: Entries of the PCAN gain table: 4 per bit of a uint32 noise estimate, less 3.
PCAN_LUT_SIZE = 4 * 32 - 3


def hann_window(length: int, shift: int) -> np.ndarray:
    """Hann window weights in Q``shift``: ``round((0.5 - 0.5 cos(2 pi (i + 0.5) / n)) 2^shift)``."""
    index = np.arange(length)
    w = 0.5 - 0.5 * np.cos(np.pi * 2 / length * (index + 0.5))
    return np.round(w * (1 << shift)).astype(np.int16)


def freq_to_mel(freq: float) -> np.float32:
    """``1127 log(1 + f / 700)`` in float32, as TFLM's ``FreqToMel``."""
    f = np.float32(freq)
    return np.float32(np.float32(1127.0) * np.log1p(f / np.float32(700.0)))


class FilterBankTables:
    """The inputs 1..5 of SignalFilterBank and the energy range it reads."""

    def __init__(self, start: int, end: int, weights: np.ndarray, unweights: np.ndarray,
                 freq_starts: np.ndarray, weight_starts: np.ndarray, widths: np.ndarray):
        self.start, self.end = start, end
        self.weights, self.unweights = weights, unweights
        self.freq_starts, self.weight_starts, self.widths = freq_starts, weight_starts, widths


def filter_bank_tables(spectrum_size: int, sample_rate: float, num_channels: int,
                       lower_hz: float, upper_hz: float, alignment: int = 4,
                       block_size: int = 4, scaling_bits: int = 12) -> FilterBankTables:
    """The mel filter bank of ``num_channels`` triangular channels over a spectrum of
    ``spectrum_size`` bins (DC excluded, HTK style), laid out as TFLM's
    ``_init_filter_bank_weights``: each channel's weights padded to ``block_size`` from an
    ``alignment``-aligned start, channels without a bin pointed at a block of zero weights."""
    if not 0 <= lower_hz <= upper_hz:
        raise ValueError("the band limits must satisfy 0 <= lower <= upper")
    index_alignment = 1 if alignment < 2 else alignment // 2
    n = num_channels + 1
    freq_starts = np.zeros(n, np.int16)
    weight_starts = np.zeros(n, np.int16)
    widths = np.zeros(n, np.int16)
    actual_starts = np.zeros(n, np.int64)
    actual_widths = np.zeros(n, np.int64)
    mel_lo, mel_hi = freq_to_mel(lower_hz), freq_to_mel(upper_hz)
    spacing = (mel_hi - mel_lo) / np.float32(n)
    centers = mel_lo + spacing * np.arange(1, n + 1, dtype=np.float32)
    hz_per_bin = (sample_rate / 2) / (spectrum_size - 1)
    start_index = round(1 + lower_hz / hz_per_bin)
    chan_start, weight_index, needs_zeros = start_index, 0, False
    for chan in range(n):
        freq = chan_start
        while freq_to_mel(freq * hz_per_bin) <= centers[chan]:
            freq += 1
        width = freq - chan_start
        actual_starts[chan], actual_widths[chan] = chan_start, width
        if width == 0:
            freq_starts[chan], weight_starts[chan], widths[chan] = 0, 0, block_size
            if not needs_zeros:
                needs_zeros = True
                weight_starts[:chan] += block_size
                weight_index += block_size
        else:
            aligned = chan_start // index_alignment * index_alignment
            padded = ((chan_start - aligned + width - 1) // block_size + 1) * block_size
            freq_starts[chan], weight_starts[chan], widths[chan] = aligned, weight_index, padded
            weight_index += padded
        chan_start = freq
    weights = np.zeros(weight_index, np.int16)
    unweights = np.zeros(weight_index, np.int16)
    end_index = 0
    for chan in range(n):
        freq = int(actual_starts[chan])
        offset = freq - int(freq_starts[chan])
        denom = mel_lo if chan == 0 else centers[chan - 1]
        for j in range(int(actual_widths[chan])):
            num = np.float32(centers[chan] - freq_to_mel(freq * hz_per_bin))
            w = num / np.float32(centers[chan] - denom)
            k = int(weight_starts[chan]) + offset + j
            weights[k] = int(w * (1 << scaling_bits))
            unweights[k] = int((1 - w) * (1 << scaling_bits))
            freq += 1
        end_index = max(end_index, freq)
    if end_index >= spectrum_size:
        raise ValueError("the upper band limit reaches past the spectrum")
    return FilterBankTables(start_index, end_index, weights, unweights, freq_starts,
                            weight_starts, widths)


def pcan_gain_lut(strength: float, offset: float, input_bits: int, gain_bits: int) -> np.ndarray:
    """PCAN's gain table (``wide_dynamic_func_lut``): for each power-of-two interval of a
    uint32 noise estimate, a quadratic through the gain ``2^gain_bits (x + offset)^-strength``
    at the interval's start, middle and end (x in Q``input_bits``), int16."""

    def gain(x: int) -> int:
        xf = np.float32(x) / np.float32(1 << input_bits)
        g = np.float32(1 << gain_bits) * np.power(np.float32(xf + np.float32(offset)),
                                                  np.float32(-strength))
        if g > 32767:
            return 32767
        return int(np.float32(g + np.float32(0.5)))

    lut = np.zeros(PCAN_LUT_SIZE + 1, np.int64)
    lut[0], lut[1] = gain(0), gain(1)
    for interval in range(2, 33):
        x0 = 1 << (interval - 1)
        x1 = x0 + (x0 >> 1)
        x2 = x0 + (x0 - 1) if interval == 32 else 2 * x0
        y0, y1, y2 = gain(x0), gain(x1), gain(x2)
        a1 = 4 * (y1 - y0) - (y2 - y0)
        a2 = (y2 - y0) - a1
        base = 4 * interval - 6
        lut[base:base + 4] = (y0, a1, a2, 0)
    return ((lut[:PCAN_LUT_SIZE] + 32768) % 65536 - 32768).astype(np.int16)


def spectral_subtraction_coefficients(smoothing: float, alternate_smoothing: float,
                                      min_signal_remaining: float, bits: int = 14
                                      ) -> dict[str, int]:
    """The integer attributes of SignalFilterBankSpectralSubtraction in Q``bits``, as TFLM's
    wrapper computes them (an ``alternate_smoothing`` of 0 means the even one)."""
    if alternate_smoothing == 0:
        alternate_smoothing = smoothing
    one = 1 << bits
    s = int(smoothing * one)
    a = int(alternate_smoothing * one)
    return {"smoothing": s, "one_minus_smoothing": one - s, "alternate_smoothing": a,
            "alternate_one_minus_smoothing": one - a,
            "min_signal_remaining": int(min_signal_remaining * one)}


def fft_length_for(samples: int) -> int:
    """The power-of-two FFT length TFLM's front end picks for a window of ``samples``."""
    return 1 << math.ceil(math.log2(samples))

"""Building TFLM's signal-library operators (window, FFT, energy, filter bank, PCAN, framer,
stacker, delay, overlap-add), the audio front end's custom ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from flatbuffers import flexbuffers

from project_api.tflite import signal_tables
from project_api.tflite.tensors import TENSOR_TYPES, TensorRef, _OpSpec


class SignalOps:
    """The signal-library custom operators of :class:`~project_api.tflite.builder.ModelBuilder`."""

    def signal_op(self, name: str, inputs: Sequence[TensorRef],
                  outputs: Sequence[tuple[Sequence[int], str]],
                  options: dict[str, Any] | bytes) -> list[TensorRef]:
        """Custom operator ``name`` of TFLM's signal library, written as TFLite's converter
        writes a TensorFlow custom op: plain (unquantized) outputs ``(shape, dtype)`` named
        after the op, the op's attributes as a FlexBuffers map in ``custom_options`` (or
        ``options`` bytes as they are)."""
        stem = "signal_" + "".join("_" + c.lower() if c.isupper() else c
                                   for c in name[len("Signal"):]).lstrip("_")
        outs = [self._add_tensor(self._name(stem), shape, dtype) for shape, dtype in outputs]
        raw = options if isinstance(options, bytes) else bytes(flexbuffers.Dumps(options))
        self._ops.append(_OpSpec("CUSTOM", [t.index for t in inputs], [t.index for t in outs],
                                 {}, name, raw))
        return outs

    def _int16_constant(self, values: np.ndarray | Sequence[int], stem: str) -> TensorRef:
        return self._add_tensor(self._name(stem), np.shape(values), "int16",
                                data=np.asarray(values, np.int16))

    def signal_window(self, x: TensorRef, weights: np.ndarray | TensorRef | None = None,
                      shift: int = 12) -> TensorRef:
        """SignalWindow: ``(x * w) >> shift`` saturated to int16 along the innermost
        dimension; ``weights`` default to a Hann window in Q``shift``."""
        if weights is None:
            weights = signal_tables.hann_window(x.shape[-1], shift)
        w = weights if isinstance(weights, TensorRef) else self._int16_constant(weights, "window")
        return self.signal_op("SignalWindow", [x, w], [(x.shape, "int16")], {"shift": shift})[0]

    def signal_fft_auto_scale(self, x: TensorRef) -> tuple[TensorRef, TensorRef]:
        """SignalFftAutoScale: ``x`` shifted left as far as its largest magnitude allows, and
        the shift (an int32 scalar)."""
        y, s = self.signal_op("SignalFftAutoScale", [x], [(x.shape, "int16"), ((), "int32")], {})
        return y, s

    def _fft_options(self, x: TensorRef, fft_length: int) -> dict[str, Any]:
        return {"T": TENSOR_TYPES[x.dtype], "fft_length": int(fft_length)}

    def signal_rfft(self, x: TensorRef, fft_length: int) -> TensorRef:
        """SignalRfft of the innermost dimension (zero-padded to ``fft_length``): the
        ``fft_length / 2 + 1`` complex bins as (real, imaginary) pairs, of ``x``'s type."""
        shape = (*x.shape[:-1], (fft_length // 2 + 1) * 2)
        return self.signal_op("SignalRfft", [x], [(shape, x.dtype)],
                            self._fft_options(x, fft_length))[0]

    def signal_irfft(self, x: TensorRef, fft_length: int) -> TensorRef:
        """SignalIrfft: ``fft_length`` real samples from ``fft_length / 2 + 1`` complex bins."""
        shape = (*x.shape[:-1], int(fft_length))
        return self.signal_op("SignalIrfft", [x], [(shape, x.dtype)],
                            self._fft_options(x, fft_length))[0]

    def signal_energy(self, x: TensorRef, start_index: int = 0,
                      end_index: int | None = None) -> TensorRef:
        """SignalEnergy: ``re^2 + im^2`` (uint32) of the complex bins ``[start, end)``."""
        bins = x.shape[0] // 2
        end = bins if end_index is None else end_index
        return self.signal_op("SignalEnergy", [x], [((bins,), "uint32")],
                            {"end_index": int(end), "start_index": int(start_index)})[0]

    def signal_filter_bank(self, x: TensorRef, num_channels: int = 40,
                           sample_rate: float = 16000.0, lower_band_limit: float = 125.0,
                           upper_band_limit: float = 7500.0,
                           tables: signal_tables.FilterBankTables | None = None) -> TensorRef:
        """SignalFilterBank: ``num_channels`` mel channels (uint64) of the energy spectrum
        ``x``, the weight and channel tables from :func:`.signal_tables.filter_bank_tables`
        unless ``tables`` are given."""
        if tables is None:
            tables = signal_tables.filter_bank_tables(x.shape[0], sample_rate, num_channels,
                                                      lower_band_limit, upper_band_limit)
        consts = [self._int16_constant(v, f"signal_filter_bank/{stem}") for v, stem in (
            (tables.weights, "weights"), (tables.unweights, "unweights"),
            (tables.freq_starts, "channel_frequency_starts"),
            (tables.weight_starts, "channel_weight_starts"), (tables.widths, "channel_widths"))]
        return self.signal_op("SignalFilterBank", [x, *consts], [((num_channels,), "uint64")],
                            {"num_channels": int(num_channels)})[0]

    def signal_filter_bank_square_root(self, x: TensorRef,
                                       scale_bits: int | TensorRef = 0) -> TensorRef:
        """SignalFilterBankSquareRoot: ``sqrt(x) >> scale_bits`` (uint32); ``scale_bits`` an
        int32 scalar tensor (the FFT auto scale's shift) or a constant."""
        s = scale_bits if isinstance(scale_bits, TensorRef) else self._add_tensor(
            self._name("scale_bits"), (), "int32", data=np.int32(scale_bits))
        return self.signal_op("SignalFilterBankSquareRoot", [x, s], [(x.shape, "uint32")], {})[0]

    def signal_filter_bank_spectral_subtraction(
            self, x: TensorRef, smoothing: float = 0.025, alternate_smoothing: float = 0.06,
            smoothing_bits: int = 10, min_signal_remaining: float = 0.05,
            clamping: bool = False, spectral_subtraction_bits: int = 14,
            coefficients: dict[str, int] | None = None) -> tuple[TensorRef, TensorRef]:
        """SignalFilterBankSpectralSubtraction: the channels less their running noise
        estimate, and the estimate (both uint32); the coefficients in
        Q``spectral_subtraction_bits`` as TFLM's wrapper computes them, or ``coefficients``."""
        coeffs = coefficients or signal_tables.spectral_subtraction_coefficients(
            smoothing, alternate_smoothing, min_signal_remaining, spectral_subtraction_bits)
        opts = {**coeffs, "num_channels": int(x.shape[0]), "smoothing_bits": int(smoothing_bits),
                "clamping": bool(clamping),
                "spectral_subtraction_bits": int(spectral_subtraction_bits)}
        y, noise = self.signal_op("SignalFilterBankSpectralSubtraction", [x],
                                [(x.shape, "uint32"), (x.shape, "uint32")], opts)
        return y, noise

    def signal_pcan(self, x: TensorRef, noise_estimate: TensorRef, strength: float = 0.95,
                    offset: float = 80.0, gain_bits: int = 21, smoothing_bits: int = 10,
                    input_correction_bits: int = 3, snr_shift: int = 6,
                    gain_lut: np.ndarray | None = None) -> TensorRef:
        """SignalPCAN: per-channel gain control of ``x`` by ``noise_estimate`` through the
        gain table of :func:`.signal_tables.pcan_gain_lut` (or ``gain_lut``); ``snr_shift`` 6
        as TFLM's wrapper writes it."""
        if gain_lut is None:
            gain_lut = signal_tables.pcan_gain_lut(strength, offset,
                                                   smoothing_bits - input_correction_bits,
                                                   gain_bits)
        lut = self._int16_constant(gain_lut, "signal_pcan/gain_lut")
        return self.signal_op("SignalPCAN", [x, noise_estimate, lut], [(x.shape, "uint32")],
                            {"snr_shift": int(snr_shift)})[0]

    def signal_filter_bank_log(self, x: TensorRef, output_scale: int = 64,
                               input_correction_bits: int = 3) -> TensorRef:
        """SignalFilterBankLog: ``log(x << input_correction_bits) * output_scale`` (int16)."""
        return self.signal_op("SignalFilterBankLog", [x], [(x.shape, "int16")],
                            {"input_correction_bits": int(input_correction_bits),
                             "output_scale": int(output_scale)})[0]

    def signal_framer(self, x: TensorRef, frame_size: int, frame_step: int,
                      prefill: bool = False) -> tuple[TensorRef, TensorRef]:
        """SignalFramer: overlapping frames of ``frame_size`` every ``frame_step`` samples of
        the innermost dimension (state kept across invocations), and whether they are valid."""
        shape = (*x.shape[:-1], x.shape[-1] // frame_step, frame_size)
        y, valid = self.signal_op("SignalFramer", [x], [(shape, "int16"), ((), "bool")],
                                {"frame_size": int(frame_size), "frame_step": int(frame_step),
                                 "prefill": bool(prefill)})
        return y, valid

    def signal_stacker(self, x: TensorRef, left_context: int = 0, right_context: int = 0,
                       step: int = 1) -> tuple[TensorRef, TensorRef]:
        """SignalStacker: ``left + 1 + right`` successive frames ``x`` stacked (state kept
        across invocations), and whether the output is valid."""
        n = x.shape[0]
        shape = (n * (left_context + 1 + right_context),)
        y, valid = self.signal_op("SignalStacker", [x], [(shape, "int16"), ((), "bool")],
                                {"num_channels": int(n),
                                 "stacker_left_context": int(left_context),
                                 "stacker_right_context": int(right_context),
                                 "stacker_step": int(step)})
        return y, valid

    def signal_delay(self, x: TensorRef, delay_length: int) -> TensorRef:
        """SignalDelay: the innermost dimension delayed by ``delay_length`` samples."""
        return self.signal_op("SignalDelay", [x], [(x.shape, "int16")],
                            {"delay_length": int(delay_length)})[0]

    def signal_overlap_add(self, x: TensorRef, frame_step: int) -> TensorRef:
        """SignalOverlapAdd: frames ``[..., n, size]`` overlapped every ``frame_step`` samples
        and added, ``[..., n * frame_step]`` (state kept across invocations)."""
        shape = (*x.shape[:-2], x.shape[-2] * frame_step)
        return self.signal_op("SignalOverlapAdd", [x], [(shape, x.dtype)],
                            {"T": TENSOR_TYPES[x.dtype], "frame_step": int(frame_step)})[0]

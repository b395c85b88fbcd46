"""Samples streamed through one session: every sample's inputs in, the model run, its outputs
out, with requests kept in flight and, with recovery on, resumed where a link fault cut them.

:func:`stream_samples` is what ``validate`` and each place of ``validate --places`` run. Per
sample the requests are, in the order the device runs them: the model's state reset (a stateful
model), each input copied in (in blocks that fit the device's packets), a stream sync (a device
that is no CPU), the run, each output copied out, a sync. Each request has a *position*,
``(sample, stage, tensor, byte offset)``, ordered as the device runs them.

After a link fault the session is reopened (:class:`~project_api.micro.recovery.Recovery`) and
streaming goes on from the first request whose reply had not arrived. It starts that sample
again from its beginning unless the device is known to have kept its memory
(:attr:`Session.memory_kept <project_api.micro.Session.memory_kept>`, from the boot mark our
runtime keeps) *and* nothing the device may have run after that request overwrote what the rest
of the sample needs: for a request before the run, no input copy of a later sample; after the
run, no later run. A reply counts only when it arrived whole and fits its request; our runtime
says at once when it drops a damaged request (see ``DROPPED_FRAME_NOTICE``), so a later reply is
never taken for a dropped request's. Without that runtime (TVM's own firmware) a sample is
always sent again whole, which is safe however replies shifted.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from project_api.errors import (
    ProjectAPIError,
    RetriesExhaustedError,
    RPCError,
    SessionDesyncError,
    SessionError,
    SessionTimeoutError,
    ValidationError,
)
from project_api.micro.api import RESET_STATE_FUNCTION
from project_api.micro.recovery import MIN_BLOCK_BYTES, fault_kind
from project_api.micro.rpc import (
    CPU,
    DLTensor,
    FunctionHandle,
    NDArray,
    OpaqueHandle,
    RPCClient,
    RPCCode,
    TypeCode,
    call_func_packet,
    copy_from_remote_packet,
    copy_overhead_bytes,
    copy_to_remote_packet,
    decode_reply,
    return_value,
    syscall_packet,
)

if TYPE_CHECKING:
    from project_api.micro.api import Model, Session

__all__ = ["OWED_REPLY_BYTES", "SMALL_REPLY_BYTES", "OutputSpec", "Partial", "stream_samples"]

_LOG = logging.getLogger(__name__)

#: Replies the device may owe at once beyond the first, in bytes (the framed reply can double
#: with escaping): kept well inside a default 64 KiB pipe so neither side ever blocks the other.
OWED_REPLY_BYTES = 16 * 1024

#: How long releasing our tensor views waits for each reply (as ``Session.close`` does).
CLEANUP_WAIT_SEC = 2.0

#: Size of a small reply (kReturn of a copy-to or a call), for the owed-bytes bound.
SMALL_REPLY_BYTES = 64

Progress = Callable[[int], None]  #: called with how many more samples are done

#: The stages of a sample, in the order the device runs them (a position's second field).
RESET, INPUT, SYNC_IN, RUN, OUTPUT, SYNC_OUT = range(6)

Position = tuple[int, int, int, int]  #: (sample, stage, tensor, byte offset)


class OutputSpec(Protocol):
    """What streaming needs to know of an output (``project_api.tools.validate.TensorSpec`` is one)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    @property
    def nbytes(self) -> int: ...


def _checked(raw: bytes) -> Any:
    """Decode a reply; an exception reply raises (as :meth:`RPCClient.request` does)."""
    reply = decode_reply(raw)
    if reply.code == RPCCode.EXCEPTION:
        if reply.message.startswith("RPCSessionTimeoutError: "):
            raise SessionTimeoutError(reply.message)
        raise RPCError(f"Error caught from RPC call:\n{reply.message}")
    return reply


@dataclass
class _Request:
    packet: bytes
    reply_bytes: int  #: how large the reply may be (for the owed-bytes bound)
    on_reply: Callable[[Any], None]
    at: Position  #: where it stands in the stream

    @property
    def sample(self) -> int:
        return self.at[0]


@dataclass
class _Attempt:
    """What one attempt at streaming did, read after it ended (by a fault or not)."""

    done: int = 0  #: samples whose every reply has arrived, in order
    streaming: bool = False  #: the setup is done and the samples' requests go out
    in_flight: deque[_Request] = field(default_factory=deque)  #: sent, not answered, oldest first
    last: Position | None = None  #: the last request answered
    furthest: Position = (-1, 0, 0, 0)  #: the furthest request ever answered (all attempts)
    progressed: bool = False  #: this attempt got a reply further than any before it

    def answered(self, request: _Request) -> None:
        self.last = request.at
        if request.at > self.furthest:
            self.furthest = request.at
            self.progressed = True


class _TensorViews:
    """The device's views of a model's input and output tensors (their DLTensors), released by
    :meth:`close`. Their data live in the model's static buffers, so after a link fault on a
    device that kept its memory the DLTensors still hold (:meth:`keep_over_reopen`): only the
    view handles are gone, released by the device when the new session started."""

    def __init__(self, session: Session, model: Model):
        self.session = session
        self._handles: list[tuple[int, int]] = []
        try:
            self.inputs = [self._view(model.function("get_input"), i)
                           for i in range(model.num_inputs)]
            self.outputs = [self._view(model.function("get_output"), i)
                            for i in range(model.num_outputs)]
        except BaseException:
            self.close()
            raise

    def _view(self, fn: FunctionHandle, index: int) -> DLTensor:
        arr = self.session.rpc.call(fn, index)
        if not isinstance(arr, NDArray):
            raise SessionError(f"the executor returned {arr!r} for tensor {index}, not an NDArray")
        self._handles.append((int(arr.handle), TypeCode.NDARRAY_HANDLE))
        return arr.tensor

    def keep_over_reopen(self) -> None:
        """The session was reopened on a device that kept its memory: keep the DLTensors,
        forget the handles (the device released them)."""
        self._handles = []

    def close(self) -> None:
        handles, self._handles = self._handles, []
        if not getattr(self.session, "usable", True):
            return  # a reply timed out: the device is not in step, freeing would only wait
        for handle, code in reversed(handles):
            try:
                self.session.rpc.free_handle(handle, code, CLEANUP_WAIT_SEC)
            except (SessionError, OSError) as err:
                _LOG.debug("releasing handle %#x failed: %s", handle, err)
                break


def _block_bytes(session: Session, tensor: DLTensor, total: int, stuck: int = 0) -> int:
    """The bytes of data per copy request of ``tensor``: what fits the device's packets, less
    on a link that was measured to be noisy (:meth:`Recovery.block_bytes
    <project_api.micro.recovery.Recovery.block_bytes>`), and halved for each fault in a row
    after the first that brought nothing (``stuck``), down to :data:`MIN_BLOCK_BYTES`."""
    rpc = session.rpc
    limit = rpc.max_packet_bytes
    if limit is None:
        block = max(total, 1)
        rpc.channel.set_max_payload_bytes(max(block + 64, 64 * 1024))
    else:
        block = limit - copy_overhead_bytes(tensor.ndim)
        if block <= 0:
            raise SessionError(f"the device's packet size ({limit} B) cannot carry a "
                               f"{tensor.ndim}-d tensor copy")
    if session.recovery.enabled:
        block = min(block, session.recovery.block_bytes(block))
        if stuck > 1:
            block = min(block, max(MIN_BLOCK_BYTES, block >> min(stuck - 1, 16)))
    return block


def _at(tensor: DLTensor, offset: int) -> DLTensor:
    return DLTensor(tensor.data, tensor.device, tensor.dtype, tensor.shape,
                    tensor.byte_offset + offset)


def _expect_return(what: str) -> Callable[[Any], None]:
    def check(reply: Any) -> None:
        if reply.code != RPCCode.RETURN:
            raise SessionDesyncError(f"{what}: expected a return, got {reply.code.name}")
    return check


def _collect(dest: np.ndarray, sample: int, offset: int, size: int) -> Callable[[Any], None]:
    """A reply handler that stores a kCopyFromRemote piece in ``dest[sample, offset:]``."""
    def got(reply: Any) -> None:
        if reply.code != RPCCode.COPY_ACK or len(reply.data) != size:
            raise SessionDesyncError(f"kCopyFromRemote: expected {size} bytes of CopyAck, got "
                                     f"{reply.code.name} with {len(reply.data)} bytes")
        dest[sample, offset:offset + size] = np.frombuffer(reply.data, np.uint8)
    return got


@dataclass
class Partial:
    """What a stream that stopped early got: the outputs (each ``(samples, *shape)``) and which
    samples they hold (``answered[i]``: every reply of sample i arrived)."""

    outputs: list[np.ndarray]
    answered: np.ndarray


def stream_samples(session: Session, model: Any, inputs: Sequence[np.ndarray],
                   output_specs: Sequence[OutputSpec], progress: Progress | None = None,
                   pipeline: bool = True, reset: bool = False, *,
                   carries_state: bool = False,
                   give_up_samples: bool = False) -> tuple[list[np.ndarray], int]:
    """Run every sample of ``inputs`` (each ``(samples, *shape)``, in model input order) on
    ``model`` (a :class:`~project_api.micro.Model` or its name) in ``session``; return the
    outputs (each ``(samples, *shape)``) and the number of requests that were kept in flight.

    ``reset`` resets the model's state before each sample (the device's
    ``project_api.reset_state``). With ``pipeline`` up to :attr:`RPCClient.pipeline_depth`
    requests are in flight (replies come back in order), bounded also by
    :data:`OWED_REPLY_BYTES` of owed reply data; a device error stops sending, the owed replies
    are drained (the session stays usable) and it is raised naming the sample.

    With recovery on (``Session(retry=...)``) a link fault reopens the session and streaming
    goes on where it stopped (see the module doc); the samples done before are kept and a
    sample's outputs count once its last reply came. ``carries_state`` (a stateful model whose
    state is not reset between samples) turns recovery off: after a lost reply nobody knows
    whether the device's state took the sample. With ``give_up_samples`` a sample that used up
    its retries is left out (``session.recovery.stats.failed_samples`` names it, its outputs
    are not set) and the run goes on with the next one; else it ends the run. A run that ends
    early on recovery's :class:`~project_api.errors.RetriesExhaustedError` carries what it got
    in the error's ``partial`` (a :class:`Partial`).
    """
    recovery = session.recovery
    n = int(inputs[0].shape[0]) if inputs else 0
    name = model if isinstance(model, str) else model.name
    outs = [np.empty((n, *spec.shape), dtype=spec.dtype) for spec in output_specs]
    attempt = _Attempt()
    resume: Position = (0, RESET, 0, 0)
    stuck = 0  # recoveries in a row that brought no reply further than any before
    setup = 0  # faults in a row before any sample was sent (counted apart from ``stuck``)
    views: _TensorViews | None = None
    skipped: set[int] = set()  # samples given up

    def stopped(err: RetriesExhaustedError) -> RetriesExhaustedError:
        answered = np.arange(n) < attempt.done
        answered[list(skipped)] = False
        err.partial = Partial(outs, answered)
        return err

    try:
        while True:
            attempt.streaming, attempt.progressed, attempt.last = False, False, None
            attempt.in_flight.clear()
            try:
                device_model = session.model(name)  # a reopened session may have new handles
                if recovery.enabled:
                    session.ensure_boot_mark()
                if views is None:
                    views = _TensorViews(session, device_model)
                return _stream_from(session, device_model, views, inputs, output_specs,
                                    progress, pipeline, reset, outs, resume, attempt,
                                    stuck), _depth(session, pipeline)
            except RPCError:
                if not (recovery.enabled and session.same_boot):
                    raise
                # A handle kept over the reopen was refused (the device restarted unseen
                # after all): look everything up again, once.
                _LOG.info("a device handle kept over a session reopen was refused; looking "
                          "the model up again")
                session.forget_handles()
                views = None
            except (ProjectAPIError, OSError) as err:
                kind = fault_kind(err)
                if not recovery.enabled or kind is None or carries_state:
                    raise
                try:
                    resume, stuck, setup = _recover(session, err, attempt, resume, stuck, setup,
                                                    n)
                except RetriesExhaustedError as gave_up:
                    if not (give_up_samples and gave_up.sample is not None):
                        raise stopped(gave_up) from err
                    skipped.add(gave_up.sample)
                    _LOG.warning("%s", str(gave_up).splitlines()[0])
                    attempt.done = gave_up.sample + 1
                    if attempt.done >= n:
                        return outs, _depth(session, pipeline) if session.usable else 1
                    try:
                        session.reopen(reason=f"sample {gave_up.sample} was given up")
                    except RetriesExhaustedError as dead:
                        raise stopped(dead) from err
                    resume, stuck, setup = (attempt.done, RESET, 0, 0), 0, 0
                if views is not None and session.memory_kept:
                    views.keep_over_reopen()
                else:
                    views = None
    finally:
        if views is not None:
            views.close()


def _recover(session: Session, err: BaseException, attempt: _Attempt, resume: Position,
             stuck: int, setup: int, n: int) -> tuple[Position, int, int]:
    """Recover from ``err``, a link fault that ended ``attempt``; the position to go on from
    and the counts of faults in a row (``stuck``, ``setup``) afterwards."""
    recovery = session.recovery
    kind = fault_kind(err)
    waited = session.last_wait_sec if kind == "timeout" else 0.0
    if not attempt.streaming:
        # The handshake or the model's setup was hit: its own count, so that a noisy link
        # hitting the setup several times in a row does not use up a sample's.
        setup += 1
        recovery.recover(session, err, sample=resume[0] if resume[0] < n else None,
                         wait_sec=waited, setup=setup)
        return resume, stuck, setup
    stuck = 1 if attempt.progressed else stuck + 1
    in_flight = list(attempt.in_flight)
    first = in_flight[0].at if in_flight else (attempt.done, RESET, 0, 0)
    if attempt.progressed:
        recovery.progress()
    recovery.recover(session, err, sample=first[0] if first[0] < n else None, stuck=stuck,
                     wait_sec=waited)
    resume = _resume_point(first, in_flight, session.memory_kept)
    if resume[1:] > (INPUT, 0, 0):  # past the sample's first input byte
        recovery.stats.resumed += 1
        _LOG.debug("resuming sample %d at stage %d, tensor %d, byte %d", *resume)
    return resume, stuck, 0


def _depth(session: Session, pipeline: bool) -> int:
    return session.rpc.pipeline_depth if pipeline else 1


def _spoils(request: _Request, in_flight: Sequence[_Request]) -> bool:
    """Whether running ``request`` now could force an earlier sample in flight to be sent
    again whole after a fault (the rules of :func:`_resume_point`)."""
    stage = request.at[1]
    if stage not in (INPUT, RUN):
        return False
    for earlier in in_flight:
        if earlier.sample < request.sample and (
                (stage == INPUT and earlier.at[1] < RUN) or
                (stage == RUN and earlier.at[1] > RUN)):
            return True
    return False


def _resume_point(first: Position, in_flight: Sequence[_Request], memory_kept: bool) -> Position:
    """Where streaming goes on after a fault: at ``first`` (the first request not answered) when
    the device kept its memory and none of the ``in_flight`` requests after it, which the device
    may have run, overwrote what the rest of its sample needs; else at that sample's start."""
    sample, stage = first[0], first[1]
    whole = (sample, RESET, 0, 0)
    if not memory_kept:
        return whole
    for request in in_flight:
        later = request.sample > sample
        if later and stage <= RUN and request.at[1] == INPUT:
            return whole  # a later sample's input may have replaced this one's
        if later and stage > RUN and request.at[1] == RUN:
            return whole  # a later run may have replaced this sample's outputs
    return first


def _stream_from(session: Session, model: Model, views: _TensorViews,
                 inputs: Sequence[np.ndarray], output_specs: Sequence[OutputSpec],
                 progress: Progress | None, pipeline: bool, reset: bool,
                 outs: list[np.ndarray], resume: Position, attempt: _Attempt,
                 stuck: int = 0) -> list[np.ndarray]:
    """:func:`stream_samples` from position ``resume`` on into ``outs`` (returned), telling
    ``attempt`` what it does; ``stuck`` faults in a row brought nothing (blocks shrink)."""
    n = int(inputs[0].shape[0]) if inputs else 0
    _check_model(model.name, views, inputs, output_specs)
    in_block = [_block_bytes(session, t, t.nbytes, stuck) for t in views.inputs]
    out_block = [_block_bytes(session, t, t.nbytes, stuck) for t in views.outputs]
    in_bytes = [x.reshape(x.shape[0], -1).view(np.uint8) for x in
                (np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")) for x in inputs)]
    out_bytes = [o.reshape(n, -1).view(np.uint8) for o in outs]
    syncs = list(dict.fromkeys(t.device for t in (*views.inputs, *views.outputs)
                               if t.device.device_type != CPU.device_type))
    sync_packets = [syscall_packet(RPCCode.DEV_STREAM_SYNC, [d, OpaqueHandle(0)]) for d in syncs]
    run_packet = call_func_packet(model.function("run"), [])
    reset_packet = call_func_packet(_reset_function(session, model.name), [model.name]) \
        if reset else None

    def ran(reply: Any) -> None:
        _expect_return("run")(reply)
        return_value(reply.values)

    def sample_requests(s: int) -> Iterator[_Request]:
        if reset_packet is not None:
            yield _Request(reset_packet, SMALL_REPLY_BYTES, _expect_return(RESET_STATE_FUNCTION),
                           (s, RESET, 0, 0))
        for k, (t, data) in enumerate(zip(views.inputs, in_bytes, strict=True)):
            row = memoryview(data[s])
            start = resume[3] if resume[:3] == (s, INPUT, k) else 0
            for off in range(start, t.nbytes, in_block[k]):
                size = min(in_block[k], t.nbytes - off)
                yield _Request(copy_to_remote_packet(_at(t, off), row[off:off + size]),
                               SMALL_REPLY_BYTES, _expect_return("kCopyToRemote"),
                               (s, INPUT, k, off))
        for j, packet in enumerate(sync_packets):
            yield _Request(packet, SMALL_REPLY_BYTES, _expect_return("kDevStreamSync"),
                           (s, SYNC_IN, j, 0))
        yield _Request(run_packet, SMALL_REPLY_BYTES, ran, (s, RUN, 0, 0))
        for k, t in enumerate(views.outputs):
            start = resume[3] if resume[:3] == (s, OUTPUT, k) else 0
            for off in range(start, t.nbytes, out_block[k]):
                size = min(out_block[k], t.nbytes - off)
                yield _Request(copy_from_remote_packet(_at(t, off), size), size + 64,
                               _collect(out_bytes[k], s, off, size), (s, OUTPUT, k, off))
        for j, packet in enumerate(sync_packets):
            yield _Request(packet, SMALL_REPLY_BYTES, _expect_return("kDevStreamSync"),
                           (s, SYNC_OUT, j, 0))

    def finished(first: Callable[[Any], None], s: int) -> Callable[[Any], None]:
        def both(reply: Any) -> None:
            first(reply)
            attempt.done = s + 1
            if progress is not None:
                progress(1)
        return both

    def requests() -> Iterator[_Request]:
        for s in range(resume[0], n):
            sample = [r for r in sample_requests(s) if r.at >= resume]
            last = sample[-1]
            sample[-1] = _Request(last.packet, last.reply_bytes, finished(last.on_reply, s),
                                  last.at)
            yield from sample

    attempt.done = resume[0]
    attempt.streaming = True
    _pipelined(session.rpc, requests(), _depth(session, pipeline), attempt)
    return outs


def _check_model(name: str, dev: _TensorViews, inputs: Sequence[np.ndarray],
                 output_specs: Sequence[OutputSpec]) -> None:
    """The device's model takes these inputs and gives these outputs, or a ValidationError."""
    if len(dev.inputs) != len(inputs) or len(dev.outputs) != len(output_specs):
        raise ValidationError(
            f"the device's model {name!r} has {len(dev.inputs)} inputs and "
            f"{len(dev.outputs)} outputs, the model archive {len(inputs)} and "
            f"{len(output_specs)}; rebuild and flash the project")
    for k, (t, x) in enumerate(zip(dev.inputs, inputs, strict=True)):
        want = t.dtype.to_numpy()
        if x.dtype.newbyteorder("<") != want or x[0].nbytes != t.nbytes:
            raise ValidationError(f"input {k} on the device is {want}{list(t.shape)}, the data "
                                  f"{x.dtype}{list(x.shape[1:])}; rebuild and flash the project")
    for k, (t, spec) in enumerate(zip(dev.outputs, output_specs, strict=True)):
        want = t.dtype.to_numpy()
        if t.nbytes != spec.nbytes or want != spec.dtype:
            raise ValidationError(f"output {k} on the device is {want}{list(t.shape)}, the "
                                  f"archive says {spec.dtype}{list(spec.shape)}; rebuild and "
                                  "flash the project")


def _reset_function(session: Session, name: str) -> FunctionHandle:
    """The device's ``project_api.reset_state``, which a stateful model's firmware has."""
    try:
        return session.get_function(RESET_STATE_FUNCTION)
    except SessionError as err:
        if "no global function" in str(err):
            raise ValidationError(
                f"model {name!r} keeps state, but the device's firmware cannot reset it (no "
                f"{RESET_STATE_FUNCTION}): rebuild and flash the project, or carry the state "
                "from sample to sample (--no-reset)") from None
        raise


def _pipelined(rpc: RPCClient, requests: Iterator[_Request], depth: int,
               attempt: _Attempt) -> None:
    """Send ``requests`` with up to ``depth`` in flight (and at most :data:`OWED_REPLY_BYTES`
    of replies owed beyond the first); handle the replies in order. ``attempt.in_flight``
    holds the requests sent (or being sent) and not answered, oldest first, also when this
    raises; a request counts as answered once its reply fits it.

    What would spoil a resumption after a fault (see :func:`_resume_point`) is held back: a
    sample's input copies while an earlier sample's input copies are unanswered, its run while
    an earlier sample's outputs are. (A fault on a run itself, a short request, may still send
    its sample again whole: holding the next inputs back until each run is answered would cost
    every sample the run's time.) On QEMU's UART this order is also the faster one (with the
    next sample's inputs sent at once, micro_speech streamed about a quarter slower).

    As in ``RPCClient.copy_to_remote``: an error reply stops sending, the replies still owed
    are read so the next request meets its own reply, then the first error is raised, prefixed
    with the sample it belongs to.
    """
    channel = rpc.channel
    waiting = attempt.in_flight
    owed = 0
    error: tuple[Exception, int] | None = None
    pending: _Request | None = None
    while True:
        if error is None:
            if pending is None:
                pending = next(requests, None)
            if pending is not None and (not waiting or (
                    len(waiting) < depth and owed + pending.reply_bytes <= OWED_REPLY_BYTES
                    and not _spoils(pending, waiting))):
                waiting.append(pending)  # before sending: a half-sent request may still run
                channel.send(pending.packet)
                owed += pending.reply_bytes
                pending = None
                continue
        if not waiting:
            break
        request = waiting[0]
        raw = channel.receive()
        try:
            reply = _checked(raw)
            if error is None:
                request.on_reply(reply)
        except SessionDesyncError as err:
            rpc.lose_step(str(err))  # later replies would answer other requests
            raise SessionDesyncError(f"sample {request.sample}: {err}") from err
        except (RPCError, SessionError) as err:
            error = error or (err, request.sample)
        waiting.popleft()
        owed -= request.reply_bytes
        attempt.answered(request)
    if error is not None:
        err, sample = error
        raise type(err)(f"sample {sample}: {err}") from err

"""High-level host API: a session with a device and the AOT models it runs.

::

    with Session(project.transport()) as session:
        model = session.model("default")
        model.set_input("input_1", x)
        model.run()
        y = model.get_output(0)
        print(session.time(model, number=10, repeat=3).mean)
"""

from __future__ import annotations

import logging
import math
import random
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from project_api.errors import RetriesExhaustedError, RPCError, SessionError
from project_api.micro.recovery import NOISY_REOPEN_ATTEMPTS, Recovery, RetryPolicy
from project_api.micro.rpc import (
    CPU,
    DataType,
    DLTensor,
    FunctionHandle,
    ModuleHandle,
    NDArray,
    RPCClient,
    TypeCode,
)
from project_api.micro.session import SessionChannel, TimeoutsLike

if TYPE_CHECKING:
    from collections.abc import Callable

    from project_api.api.transport import Transport
from project_api.micro.timing import TIMING_WAIT_FACTOR, TimingResult, _check_timing

_LOG = logging.getLogger(__name__)


#: How long :meth:`Session.close` waits for each cleanup reply before giving up on the device.
CLEANUP_WAIT_SEC = 2.0

#: The executor functions a Model looks up (the reference's AOT executor registry names).
EXECUTOR_FUNCTIONS = (
    "set_input",
    "run",
    "get_output",
    "get_input",
    "get_num_outputs",
    "get_input_index",
    "get_num_inputs",
    "get_input_name",
)

#: The device global function that resets a model's state (crt/src/aot_executor).
RESET_STATE_FUNCTION = "project_api.reset_state"

#: The device global function that stores a host's mark and answers the one stored before, 0
#: after a boot (crt/src/rpc_server): how a host tells whether the device kept its memory.
BOOT_MARK_FUNCTION = "project_api.boot_mark"


def _tensor_shape_text(t: DLTensor) -> str:
    return f"{t.dtype.to_numpy()}{list(t.shape)}"


class Model:
    """An AOT model on the device, driven through its executor module.

    Created by :meth:`Session.model`; valid while the session is open.
    """

    def __init__(
        self,
        session: Session,
        name: str,
        module: ModuleHandle,
        functions: dict[str, FunctionHandle],
    ):
        self.session = session
        self.name = name
        self.module = module
        self._functions = functions
        self._input_names: list[str] | None = None
        self._num_inputs: int | None = None
        self._num_outputs: int | None = None
        # Device views of the model's static tensors, asked once and reused: the executor's
        # get_input/get_output return views of buffers that live as long as the executor
        # (crt/src/aot_executor), so the handle and its DLTensor stay valid until close().
        self._inputs: dict[str | int, NDArray] = {}
        self._outputs: dict[int, NDArray] = {}

    def function(self, name: str) -> FunctionHandle:
        """The handle of executor function ``name`` (one of :data:`EXECUTOR_FUNCTIONS`), for
        callers that pack their own requests (:func:`project_api.micro.stream.stream_samples`)."""
        return self._functions[name]

    def _call(self, function: str, *args: Any, timeout_sec: float | None = None) -> Any:
        return self.session.rpc.call(
            self._functions[function], *args, timeout_sec=timeout_sec,
            what=f"{function} of model {self.name!r}",
        )

    def _key(self, key: str | int) -> str | int:
        if isinstance(key, str):
            return key
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            n = self.num_inputs
            if not 0 <= int(key) < n:
                raise SessionError(
                    f"model {self.name!r} has {n} inputs; input index {key} is out of range"
                )
            return int(key)
        raise TypeError(f"input key must be a name or an index, not {type(key).__name__}")

    def _input_array(self, key: str | int) -> NDArray:
        key = self._key(key)
        if isinstance(key, str) and self._input_names is not None and key in self._input_names:
            key = self._input_names.index(key)  # one cached handle per input, however named
        cached = self._inputs.get(key)
        if cached is not None:
            return cached
        try:
            arr = self._call("get_input", key)
        except RPCError as err:
            raise RPCError(
                f"model {self.name!r} has no input {key!r} (inputs: {self.input_names}): {err}"
            ) from err
        if not isinstance(arr, NDArray):
            if isinstance(key, str):
                raise SessionError(
                    f"model {self.name!r} has no input {key!r} (inputs: {self.input_names})"
                )
            raise SessionError(f"get_input({key!r}) returned {arr!r}, not an NDArray")
        self._inputs[key] = arr
        return arr

    @property
    def num_inputs(self) -> int:
        """Number of model inputs (asked once, then cached: it cannot change)."""
        if self._num_inputs is None:
            self._num_inputs = int(self._call("get_num_inputs"))
        return self._num_inputs

    @property
    def num_outputs(self) -> int:
        """Number of model outputs (asked once, then cached)."""
        if self._num_outputs is None:
            self._num_outputs = int(self._call("get_num_outputs"))
        return self._num_outputs

    @property
    def input_names(self) -> list[str]:
        if self._input_names is None:
            self._input_names = [
                str(self._call("get_input_name", i)) for i in range(self.num_inputs)
            ]
        return list(self._input_names)

    def get_input_index(self, name: str) -> int:
        return int(self._call("get_input_index", name))

    def _sync(self, tensor: DLTensor) -> None:
        # On a CPU the device does the copy before it replies, so there is nothing to wait for.
        if tensor.device.device_type != CPU.device_type:
            self.session.rpc.stream_sync(tensor.device)

    def _read(self, arr: NDArray) -> np.ndarray:
        data = self.session.rpc.copy_from_remote(arr.tensor)
        self._sync(arr.tensor)
        return (
            np.frombuffer(data, dtype=arr.tensor.dtype.to_numpy()).reshape(arr.tensor.shape).copy()
        )

    def set_input(self, key: str | int, value: np.ndarray, *, reshape: bool = False) -> None:
        """Copy ``value`` into the device's input tensor ``key`` (a name or an index).

        The dtype and shape must match the device tensor; a mismatch is refused before anything
        is sent. ``reshape=True`` accepts any shape with the right number of elements.
        """
        value = np.asarray(value)
        tensor = self._input_array(key).tensor
        want = tensor.dtype.to_numpy()
        if value.dtype.newbyteorder("<") != want:
            raise SessionError(
                f"input {key!r} of model {self.name!r} is {_tensor_shape_text(tensor)}; got dtype "
                f"{value.dtype}. Convert it with .astype(np.{want.name})"
            )
        if tuple(value.shape) != tuple(tensor.shape):
            if value.size != math.prod(tensor.shape):
                raise SessionError(
                    f"input {key!r} of model {self.name!r} is {_tensor_shape_text(tensor)}; got shape "
                    f"{list(value.shape)} ({value.nbytes} bytes, the device holds {tensor.nbytes})"
                )
            if not reshape:
                raise SessionError(
                    f"input {key!r} of model {self.name!r} has shape {list(tensor.shape)}; got "
                    f"shape {list(value.shape)} (same size): reshape it, or pass reshape=True"
                )
        data = np.ascontiguousarray(value, dtype=want).tobytes()
        self.session.rpc.copy_to_remote(tensor, data)
        self._sync(tensor)

    def get_input(self, key: str | int) -> np.ndarray:
        """Read back the device's input tensor ``key``."""
        return self._read(self._input_array(key))

    def run(self, *, timeout_sec: float | None = None) -> None:
        """Run the model once on the device.

        ``timeout_sec`` is how long to wait for it (0: forever); by default the session's
        per-reply wait (``Session(timeout_sec=)``, else the transport's
        ``session_established_timeout_sec``).
        """
        self._call("run", timeout_sec=timeout_sec)

    def reset_state(self, *, timeout_sec: float | None = None) -> bool:
        """Restore the model's state (what a sequence model keeps from one run to the next:
        LSTM/SVDF state, resource variables) to its values at boot, through the device's
        ``project_api.reset_state``. True when the firmware reset it; False when the firmware
        holds no model with state (it then has no such function: nothing to reset)."""
        try:
            handle = self.session.get_function(RESET_STATE_FUNCTION)
        except SessionError as err:
            if "no global function" in str(err):
                return False
            raise
        self.session.rpc.call(handle, self.name, timeout_sec=timeout_sec,
                              what=f"{RESET_STATE_FUNCTION} of model {self.name!r}")
        return True

    def get_output(self, index: int) -> np.ndarray:
        """Read output ``index`` (dtype and shape from the device's tensor)."""
        n = self.num_outputs
        if not 0 <= int(index) < n:
            raise SessionError(
                f"model {self.name!r} has {n} outputs; output index {index} is out of range"
            )
        arr = self._outputs.get(int(index))
        if arr is None:
            arr = self._call("get_output", int(index))
            if not isinstance(arr, NDArray):
                raise SessionError(f"get_output({index}) returned {arr!r}, not an NDArray")
            self._outputs[int(index)] = arr
        return self._read(arr)

    def close(self, max_wait_sec: float | None = None) -> None:
        """Release this model's handles on the device: its cached tensor views, its functions
        and its executor module.

        Called by :meth:`Session.close`, so a later session can create the executor again.
        """
        rpc = self.session.rpc
        if self.session._models.get(self.name) is self:
            del self.session._models[self.name]
        arrays = [*self._inputs.values(), *self._outputs.values()]
        self._inputs, self._outputs = {}, {}
        for arr in arrays:
            rpc.free_handle(arr.handle, TypeCode.NDARRAY_HANDLE, max_wait_sec)
        functions, self._functions = self._functions, {}
        for handle in functions.values():
            rpc.free_handle(handle, TypeCode.PACKED_FUNC_HANDLE, max_wait_sec)
        rpc.free_handle(self.module, TypeCode.MODULE_HANDLE, max_wait_sec)


@dataclass(frozen=True)
class _Timeouts:
    session_start_retry_timeout_sec: float
    session_start_timeout_sec: float
    session_established_timeout_sec: float
    #: How a late reply's message names the per-reply limit.
    established_limit_name: str = "Session timeout_sec, the per-reply limit"


class Session:
    """An RPC session with a device over ``transport`` (a ``project_api.api.transport.Transport``).

    ``timeouts`` overrides ``transport.timeouts()``; ``timeout_sec`` replaces only their
    per-reply wait (``session_established_timeout_sec``; 0 waits forever) for every call, timing
    included. ``timeout_advice`` is how a timeout message tells the user to raise that limit
    (a command line names its flag; default ``Session(timeout_sec=SECONDS)``). Entering opens the transport (unless it
    says it is open through a true ``is_open`` attribute) and runs the handshake; leaving
    releases the models, ends the session and closes the transport if the session opened it.
    Device log frames become INFO records on the ``project_api.device`` logger.

    ``retry`` (a :class:`~project_api.micro.recovery.RetryPolicy`) turns recovery on: waits are
    sized from measured times (a lost reply is noticed in about the time the request takes), a
    frame damaged while a reply is owed is reported at once, and :attr:`recovery` counts faults
    and reopens the session (:meth:`reopen`) for the runners that retry a sample
    (:func:`project_api.micro.stream.stream_samples`, :meth:`time`). Without it a fault is only
    reported, as microTVM did. ``verify`` is called with the session after it opens and after
    every reopen on a device that may have restarted (e.g. to check the firmware's build hash);
    what it raises ends the run, but a link fault in it (or in the handshake) is recovered from
    like any other request's (:meth:`Recovery.opening
    <project_api.micro.recovery.Recovery.opening>`).
    """

    def __init__(
        self,
        transport: Transport,
        timeouts: TimeoutsLike | None = None,
        name: str = "micro-rpc",
        *,
        timeout_sec: float | None = None,
        timeout_advice: str | None = None,
        retry: RetryPolicy | None = None,
        verify: Callable[[Session], None] | None = None,
    ):
        if timeout_sec is not None and not (timeout_sec >= 0 and math.isfinite(timeout_sec)):
            raise ValueError(f"timeout_sec must be None or >= 0 seconds; got {timeout_sec}")
        self.transport = transport
        self.name = name
        self.timeout_sec = timeout_sec
        self.timeout_advice = timeout_advice
        self._timeouts = timeouts
        self._opened_transport = False
        self._channel: SessionChannel | None = None
        self._rpc: RPCClient | None = None
        self._models: dict[str, Model] = {}
        self._globals: dict[str, FunctionHandle] = {}
        self._syslib: ModuleHandle | None = None
        #: Recovery from link faults (its policy is disabled unless ``retry`` was given).
        self.recovery = Recovery(retry if retry is not None else RetryPolicy.disabled())
        self.verify = verify
        #: True after a :meth:`reopen` that kept the device handles of the session before.
        self.same_boot = False
        #: True after a :meth:`reopen` when the device is known to have kept its memory since
        #: :meth:`ensure_boot_mark` (the mark came back): what was copied to it still holds.
        self.memory_kept = False
        #: The channel last started (or tried): what it heard tells a dead device from a
        #: noisy link.
        self._last_started: SessionChannel | None = None
        #: The RPC client of the session before a reopen (what it learned of the device).
        self._earlier_rpc: RPCClient | None = None
        #: Marks sent to the device and not yet confirmed (None: its firmware keeps none).
        self._marks: list[int] | None = []
        self._mark_confirmed = False
        self._rng = random.Random()
        #: Ids of the sessions this object ran on the link (a new one never reuses them).
        self._used_ids: set[int] = set()

    # --- lifecycle ------------------------------------------------------------------------

    def open(self) -> Session:
        if self._channel is not None:
            return self
        if not getattr(self.transport, "is_open", False):
            self.transport.open()
            self._opened_transport = True
        try:
            # One policy from the first byte: the handshake and the checks at open are
            # requests like any other (a fault in them is mended by a reopen).
            self.recovery.opening(self, self._open_checked, self._heard)
        except BaseException:
            self._drop_channel()
            self._close_transport()
            raise
        return self

    def _open_checked(self) -> None:
        self._start_channel()
        if self.verify is not None:
            self.verify(self)

    def _heard(self) -> bool:
        """Whether the device sent any byte to the session last started (or tried)."""
        return self._last_started is not None and self._last_started.bytes_received > 0

    def _start_channel(self, retry_sec: float | None = None,
                       limit_sec: float | None = None) -> None:
        """Run a handshake on the transport and make the channel and client of the session."""
        timeouts = self._timeouts if self._timeouts is not None else self.transport.timeouts()
        if self.timeout_sec is not None:
            timeouts = _Timeouts(
                timeouts.session_start_retry_timeout_sec,
                timeouts.session_start_timeout_sec,
                self.timeout_sec,
            )
        channel = SessionChannel(self.transport, timeouts, name=self.name,
                                 timeout_advice=self.timeout_advice,
                                 avoid_session_ids=self._used_ids)
        if self.recovery.enabled:
            channel.detect_loss = True
            if self.recovery.policy.quick_waits:
                channel.waits = self.recovery.waits
        self._last_started = channel
        channel.start(retry_sec, limit_sec)
        self._used_ids.add(channel.protocol.session_id)
        self._channel = channel
        self._rpc = RPCClient(channel, block_sizer=self.recovery.block_bytes
                              if self.recovery.enabled else None)

    def _drop_channel(self, keep_handles: bool = False) -> None:
        """Forget the channel (no cleanup: it may be out of step) and the device handles of it;
        with ``keep_handles`` the function and module handles are kept (the device did not
        restart: they live as long as its boot) and only tensor views are forgotten (a device
        releases the tensors of an earlier session when a new one starts)."""
        channel = self._channel
        if self._rpc is not None:
            self._earlier_rpc = self._rpc
        self._channel, self._rpc = None, None
        if keep_handles:
            for model in self._models.values():
                model._inputs, model._outputs = {}, {}
        else:
            self.forget_handles()
        if channel is not None:
            channel.close()

    def forget_handles(self) -> None:
        """Forget every device handle: the models, functions and system library are looked up
        again (after a device restart, or when a kept handle was refused)."""
        self._models.clear()
        self._globals.clear()
        self._syslib = None
        self.same_boot = False

    def reopen(self, *, restart: bool = False, reason: str = "",
               same_boot: bool = False) -> None:
        """Start a new session after a link fault; every :class:`Model` and handle of the old
        one is invalid (ask :meth:`model` again). New sessions are tried on the open link
        (until ``reopen_attempts`` of them heard nothing from the device, or
        :data:`~project_api.micro.recovery.NOISY_REOPEN_ATTEMPTS` failed on a garbled link);
        when none starts, or ``restart`` is set (the link closed), the transport itself is closed and opened again, up to ``restart_attempts``
        times: the template's ``open_transport`` starts the emulator again, resets the board or
        reopens the serial port. :attr:`verify` runs after each reopen unless the device is known
        to have kept its memory since it last ran (a board that came back with other firmware is
        refused). Raises :class:`RetriesExhaustedError` when nothing
        worked.

        ``same_boot`` says the device did not restart (a reply was lost or damaged): the
        handles of its functions and models are kept when no link reopen was needed, which
        spares the lookups (and keeps TVM's own C runtime, which creates an executor once per
        boot, usable); :attr:`same_boot` tells afterwards whether they were kept."""
        policy = self.recovery.policy
        stats = self.recovery.stats
        keep = same_boot and not restart
        self._drop_channel(keep_handles=keep)
        # On a link whose device is up a handshake is one short round trip: retry it after a
        # few of them, and give up on the link after a few retries (then reopen the link, whose
        # device may need its full start-up time).
        latency = self.recovery.waits.latency
        retry_sec = max(policy.wait_floor_sec, policy.wait_margin * 4 * latency) if latency else None
        limit_sec = max(1.0, 5 * retry_sec) if retry_sec is not None else None
        last: BaseException | None = None
        for restarting in range(policy.restart_attempts + 1):
            if restarting or restart:
                restart = False
                if keep:
                    keep = False
                    self.forget_handles()
                stats.restarts += 1
                _LOG.info("%s: reopening the device link (%s)", self.name, reason or "no session")
                try:
                    self.transport.close()
                except Exception as err:  # noqa: BLE001 - it is being replaced anyway
                    _LOG.debug("%s: closing the transport failed: %s", self.name, err)
                try:
                    self.transport.open()
                except Exception as err:  # noqa: BLE001 - reported below if nothing works
                    last = err
                    continue
            silent = noisy = 0
            while silent < policy.reopen_attempts and noisy < NOISY_REOPEN_ATTEMPTS:
                stats.reopens += 1
                self._last_started = None
                try:
                    self._start_channel(retry_sec, None if restarting else limit_sec)
                    self.same_boot = keep
                    if keep and self._earlier_rpc is not None:
                        self.rpc.learn_limits(self._earlier_rpc)
                    self._check_memory()
                    # A device that kept its memory (our mark came back) did not restart,
                    # so it runs the firmware checked before.
                    if self.verify is not None and not self.memory_kept:
                        self.verify(self)
                except (SessionError, OSError) as err:
                    last = err
                    if isinstance(err, RPCError):
                        keep = False  # a kept handle refused: look everything up again
                    # A device that answered, if garbled, is up behind a noisy link: only
                    # silence counts towards reopening the link itself.
                    heard = self._heard()
                    if heard:
                        noisy += 1
                    else:
                        silent += 1
                    self._drop_channel(keep_handles=keep)
                    continue
                return
        raise RetriesExhaustedError(
            f"{self.name}: no new session could be started after a link fault ({reason}); the "
            f"last attempt: {last}", stats) from last

    def _check_memory(self) -> None:
        """After a reopen: mark the device again and set :attr:`memory_kept`; a device whose
        mark is gone restarted, so handles kept from before it are forgotten."""
        self.memory_kept = False
        if not (self._marks and self._mark_confirmed):
            return
        kept = self._mark_boot()
        if not kept and self.same_boot:
            _LOG.info("%s: the device restarted (its boot mark is gone); looking everything up "
                      "again", self.name)
            self.forget_handles()
        self.memory_kept = bool(kept)

    def ensure_boot_mark(self) -> None:
        """Leave a mark on the device (``project_api.boot_mark``) unless one is in place, so
        that after a link fault :meth:`reopen` can tell whether the device kept its memory
        (:attr:`memory_kept`). Firmware without the function (TVM's own) keeps no mark; then
        nothing is ever known to be kept."""
        if self._marks is not None and not self._mark_confirmed:
            self._mark_boot()

    def _mark_boot(self) -> bool | None:
        """Send a new mark; True when the device answered one of ours (it kept its memory
        since), False when not, None when its firmware keeps no marks."""
        if self._marks is None:
            return None
        try:
            handle = self.get_function(BOOT_MARK_FUNCTION)
        except SessionError as err:
            if "no global function" not in str(err):
                raise
            self._marks = None
            return None
        mark = self._rng.getrandbits(62) | 1
        self._marks.append(mark)  # before the call: its reply may be lost after it took
        previous = self.rpc.call(handle, mark, what=BOOT_MARK_FUNCTION)
        kept = self._mark_confirmed and previous in self._marks
        self._marks, self._mark_confirmed = [mark], True
        return kept

    def close(self) -> None:
        """Release the models, end the session and close the transport if the session opened it."""
        channel = self._channel
        # After a timeout or a Ctrl-C a reply may still be owed: cleanup would only wait for it.
        if channel is not None and channel.usable:
            for model in list(self._models.values()):
                try:
                    model.close(max_wait_sec=CLEANUP_WAIT_SEC)
                except (SessionError, OSError) as err:
                    _LOG.debug("%s: releasing model %r failed: %s", self.name, model.name, err)
                    break
        self._drop_channel()
        self._close_transport()

    def _close_transport(self) -> None:
        if self._opened_transport:
            self._opened_transport = False
            try:
                self.transport.close()
            except Exception as err:  # noqa: BLE001 - closing must not mask the real outcome
                _LOG.debug("%s: closing the transport failed: %s", self.name, err)

    def __enter__(self) -> Session:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- low level ------------------------------------------------------------------------

    @property
    def rpc(self) -> RPCClient:
        if self._rpc is None:
            raise SessionError(f"{self.name}: the session is not open; use 'with Session(...)'")
        return self._rpc

    def get_function(self, name: str) -> FunctionHandle:
        """The handle of device global function ``name`` (cached)."""
        if name not in self._globals:
            handle = self.rpc.get_global_func(name)
            if handle is None:
                raise SessionError(f"the device has no global function {name!r}")
            self._globals[name] = handle
        return self._globals[name]

    def call(self, name: str, *args: Any, timeout_sec: float | None = None) -> Any:
        """Call device global function ``name`` (``timeout_sec`` as for :meth:`Model.run`)."""
        return self.rpc.call(self.get_function(name), *args, timeout_sec=timeout_sec, what=name)

    @property
    def usable(self) -> bool:
        """True while the session is open and in step (no reply timed out or was interrupted)."""
        return self._channel is not None and self._channel.usable

    @property
    def replies(self) -> int:
        """Replies received in the current session (since the last open or reopen)."""
        return self._channel.replies if self._channel is not None else 0

    @property
    def last_wait_sec(self) -> float:
        """How long the last failed wait for a reply lasted (what a lost reply cost)."""
        return self._channel.last_wait_sec if self._channel is not None else 0.0

    def _release_quietly(self, handle: int, type_code: int) -> None:
        """Free ``handle`` if the session is still in step; never raise (an error path)."""
        if not self.usable:
            return
        try:
            self.rpc.free_handle(handle, type_code, CLEANUP_WAIT_SEC)
        except (SessionError, OSError) as err:
            _LOG.debug("%s: releasing handle %#x failed: %s", self.name, handle, err)

    def system_lib(self) -> ModuleHandle:
        if self._syslib is None:
            lib = self.call("runtime.SystemLib")
            if not isinstance(lib, ModuleHandle):
                raise SessionError(f"runtime.SystemLib returned {lib!r}, not a module")
            self._syslib = lib
        return self._syslib

    def empty(self, shape: tuple[int, ...], dtype: Any) -> DLTensor:
        """Allocate an uninitialised device tensor."""
        return self.rpc.alloc(shape, DataType.from_numpy(dtype))

    # --- models ---------------------------------------------------------------------------

    def model(self, name: str = "default") -> Model:
        """The AOT model ``name`` on the device (created once per session). With recovery on,
        a link fault in the lookup is mended like any other request's: the session is reopened
        and the model looked up again."""
        if name in self._models:
            return self._models[name]
        if self.recovery.enabled:
            return self.recovery.call(self, lambda: self._look_up(name),
                                      f"looking up model {name!r}")
        return self._look_up(name)

    def _look_up(self, name: str) -> Model:
        if name in self._models:
            return self._models[name]
        syslib = self.system_lib()
        try:
            module = self.call("tvm.aot_executor.create", syslib, CPU, name)
        except RPCError as err:
            raise _create_failed(name, err) from err
        if not isinstance(module, ModuleHandle) or not module:
            raise SessionError(f"the device has no AOT model {name!r}")
        get_function = self.get_function("tvm.rpc.server.ModuleGetFunction")
        functions: dict[str, FunctionHandle] = {}
        for fname in EXECUTOR_FUNCTIONS:
            handle = self.rpc.call(get_function, module, fname, 1)
            if not handle:
                raise SessionError(f"the executor of model {name!r} has no function {fname!r}")
            functions[fname] = FunctionHandle(handle)
        model = Model(self, name, module, functions)
        self._models[name] = model
        return model

    def time(
        self,
        model: Model,
        number: int = 10,
        repeat: int = 3,
        min_repeat_ms: int = 0,
        *,
        timeout_sec: float | None = None,
    ) -> TimingResult:
        """Time ``model.run()`` on the device: ``repeat`` rounds of ``number`` runs each.

        The device's own timer measures (``runtime.RPCTimeEvaluator``); link latency is not in
        the figures. Each result is the mean seconds per run of one round. ``number`` may be
        1..MAX_TIMING_NUMBER and ``repeat`` 1..MAX_TIMING_REPEAT (the device's limits).

        ``timeout_sec`` is how long to wait for the whole measurement (0: forever). By default
        (and without ``Session(timeout_sec=)``) one run is timed on the device first and the wait
        is TIMING_WAIT_FACTOR x that per-run time x the runs asked for, plus the usual per-reply
        wait; so a long measurement does not time out, and a hung device still does.

        With recovery on (``Session(retry=...)``) a measurement cut by a link fault is made
        again, whole, once the session is reopened; the figures are always of one complete
        measurement.
        """
        _check_timing(number, repeat, min_repeat_ms)
        if timeout_sec is not None and not (timeout_sec >= 0 and math.isfinite(timeout_sec)):
            raise ValueError(f"timeout_sec must be None or >= 0 seconds; got {timeout_sec}")
        name = model.name

        def measure() -> TimingResult:
            # After a reopen the model may have new handles: ask for it again.
            timed = self.model(name) if self.recovery.enabled else model
            wait = timeout_sec if timeout_sec is not None else self.timeout_sec
            note = ""
            if wait is None:
                wait, note = self._timing_wait(timed, number, repeat, min_repeat_ms)
            return TimingResult(self._evaluate(timed, number, repeat, min_repeat_ms, wait, note))

        return self.recovery.call(self, measure, f"timing model {name!r}")

    def _timing_wait(self, model: Model, number: int, repeat: int,
                     min_repeat_ms: int) -> tuple[float, str]:
        """The wait for a timing call (the work it asks for, from one run measured first) and
        how it was made, for the timeout message."""
        channel = self._channel
        base = float(channel.timeouts.session_established_timeout_sec or 0) if channel else 0.0
        if not base:
            return 0.0, ""  # the session waits forever anyway
        (per_run,) = self._evaluate(model, 1, 1, 0, None)
        per_run = per_run if math.isfinite(per_run) and per_run > 0 else 0.0
        # One warm-up run, then the rounds; a round lasts at least min_repeat_ms, and its
        # growing batches may add up to about 2.7 times that (crt time_evaluator.c).
        work = per_run * (1 + number * repeat) + repeat * 2.7 * min_repeat_ms / 1000.0
        wait = base + TIMING_WAIT_FACTOR * work
        _LOG.debug("%s: one run of %r takes %.3gs on the device; waiting up to %.3gs for %d x %d",
                   self.name, model.name, per_run, wait, repeat, number)
        note = (f"the limit is the {base:g}s per-reply wait plus {TIMING_WAIT_FACTOR:g} x the "
                f"{work:.3g}s of device time these runs take at {per_run:.3g}s per run, "
                "measured first")
        return wait, note

    def _evaluate(
        self, model: Model, number: int, repeat: int, min_repeat_ms: int, wait: float | None,
        note: str = "",
    ) -> tuple[float, ...]:
        evaluator = self.call(
            "runtime.RPCTimeEvaluator",
            model.module,
            "run",
            1,
            0,
            int(number),
            int(repeat),
            int(min_repeat_ms),
            100,
            0,
            1,
            0,
            "",
        )
        if not isinstance(evaluator, FunctionHandle) or not evaluator:
            raise SessionError(f"runtime.RPCTimeEvaluator returned {evaluator!r}, not a function")
        what = f"timing model {model.name!r} ({repeat} x {number} runs)"
        if note:
            what += f" ({note})"
        try:
            raw = self.rpc.call(evaluator, timeout_sec=wait, what=what)
        except BaseException:
            # Never let the cleanup's own failure (or its wait) hide why the call failed.
            self._release_quietly(evaluator, TypeCode.PACKED_FUNC_HANDLE)
            raise
        self.rpc.free_handle(evaluator, TypeCode.PACKED_FUNC_HANDLE)
        if not isinstance(raw, bytes) or len(raw) != 8 * repeat:
            raise SessionError(f"the time evaluator returned {raw!r}; expected {repeat} doubles")
        return struct.unpack(f"<{repeat}d", raw)


def _create_failed(name: str, err: RPCError) -> RPCError:
    """A clear error for a failed ``tvm.aot_executor.create``."""
    message = str(getattr(err, "device_message", "") or "").strip()
    if "no model named" in message:
        return RPCError(f"the device has no AOT model {name!r} ({message}); check the model name")
    said = f"it says {message!r}" if message else "it gave no reason"
    return RPCError(
        f"the device could not create the AOT executor of model {name!r} ({said}); a device "
        "running TVM's own C runtime creates it only once per boot, so an earlier session "
        "probably did (its message may be stale), and the host cannot get that executor's "
        "handle back safely: reset the device (power-cycle or re-flash it) and open a new session"
    )

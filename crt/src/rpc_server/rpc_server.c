/*!
 * \file rpc_server/rpc_server.c
 * \brief MicroTVMRpcServerInit/Loop/Feed: unframer -> session -> MinRPC packets, and the globals
 *     the host needs for RPC (spec §4.5, §4.7). All storage is static.
 */
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/random_fill.h>
#include <tvm/runtime/crt/rpc_common/frame_buffer.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>
#include <tvm/runtime/crt/time_evaluator.h>

#include "../common/module_table.h"
#include "rpc_packet.h"

/* The 11 bytes a frame adds around an RPC packet: start 2 + length 4 + session header 3 + CRC 2. */
#define TVM_CRT_FRAME_OVERHEAD_BYTES 11

struct TVMCrtRpcServer {
  microtvm_rpc_channel_write_t write_func;
  void* write_func_ctx;
  TVMCrtWriteStream channel;
  TVMCrtFramer framer;
  TVMCrtUnframer unframer;
  TVMCrtSession session;
  TVMCrtFrameBuffer receive_buffer;
  TVMCrtRpcArena arena;
  /* The unframer's sink: the session's receiver, watched for frames the line damaged. */
  TVMCrtWriteStream receive_tap;
  /* What the host last stored with project_api.boot_mark (0 after a boot or a restart). */
  int64_t boot_mark;
  int is_shutdown;
};

static struct TVMCrtRpcServer g_server;
static uint8_t g_receive_storage[TVM_CRT_MAX_PACKET_SIZE_BYTES];
/* uint64_t elements keep the arena 8-byte aligned. */
static uint64_t g_arena_storage[(TVM_CRT_RPC_ARENA_SIZE_BYTES + 7) / 8];

static tvm_crt_error_t ChannelWrite(void* context, const uint8_t* data, size_t size_bytes,
                                    size_t* out_written_bytes) {
  struct TVMCrtRpcServer* s = (struct TVMCrtRpcServer*)context;
  ptrdiff_t n = s->write_func(s->write_func_ctx, data, size_bytes);
  if (n < 0) {
    *out_written_bytes = 0;
    return (tvm_crt_error_t)n;
  }
  *out_written_bytes = (size_t)n;
  return kTvmErrorNoError;
}

static void HandleMessage(void* context, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buffer) {
  struct TVMCrtRpcServer* s = (struct TVMCrtRpcServer*)context;
  if (buffer == NULL) {
    if (type == kTvmSessionStartSessionReply) {
      /* A new session: the host of any earlier one is gone (it timed out or was killed) and
       * will never free its handles, so its tensors would otherwise stay until the next boot. */
      size_t stale = TVMCrtNDArray_ReleaseAll();
      if (stale > 0) {
        TVMLogf("released %u tensors of the previous session", (unsigned)stale);
      }
    }
    return;
  }
  if (type == kTvmSessionNormal && !s->is_shutdown) { /* nothing runs after kShutdown */
    const uint8_t* message;
    size_t size = TVMCrtFrameBuffer_Peek(buffer, &message);
    TVMCrtRpcRequest request;
    const char* error = TVMCrtRpcPacket_DecodeRequest(message, size, &s->arena, &request);
    if (error != NULL) {
      TVMCrtRpcPacket_SendException(&s->session, error);
    } else if (TVMCrtRpcPacket_ExecuteRequest(&request, &s->session)) {
      s->is_shutdown = 1;
    }
  }
  TVMCrtSession_ClearReceiveBuffer(&s->session);
}

/*
 * A frame the line damaged is dropped, as the reference does, and the host would learn of it
 * only by waiting out its timeout. While a session is up, one log message
 * (TVM_CRT_DROPPED_FRAME_NOTICE) tells it at once, and before anything that follows the damaged
 * frame is answered: a host that keeps requests in flight never takes a later reply for the
 * dropped request's, and can send the request again after a new handshake.
 */
static void NoticeDroppedFrame(struct TVMCrtRpcServer* s, const char* why) {
  if (TVMCrtSession_IsEstablished(&s->session)) {
    TVMLogf(TVM_CRT_DROPPED_FRAME_NOTICE " (%s)", why);
  }
}

/* The receive tap: what the unframer delivers goes to the session's receiver unchanged; a
 * packet whose CRC failed is noticed on the way. */
static TVMCrtWriteStream* SessionReceiver(void* context) {
  return TVMCrtSession_Receiver(&((struct TVMCrtRpcServer*)context)->session);
}

static tvm_crt_error_t TapWrite(void* context, const uint8_t* data, size_t size_bytes,
                                size_t* out_written_bytes) {
  TVMCrtWriteStream* receiver = SessionReceiver(context);
  return receiver->write(receiver->context, data, size_bytes, out_written_bytes);
}

static void TapPacketStart(void* context, uint32_t payload_size_bytes) {
  TVMCrtWriteStream* receiver = SessionReceiver(context);
  receiver->packet_start(receiver->context, payload_size_bytes);
}

static void TapPacketDone(void* context, bool is_valid) {
  TVMCrtWriteStream* receiver = SessionReceiver(context);
  if (!is_valid) {
    struct TVMCrtRpcServer* s = (struct TVMCrtRpcServer*)context;
    NoticeDroppedFrame(s, "bad CRC");
  }
  receiver->packet_done(receiver->context, is_valid);
}

/*
 * A packet larger than the receive buffer never completes, so the host would wait for a reply
 * forever. If its header shows a request of our session, answer it with an exception;
 * otherwise say so in a log line. The rest of the packet is skipped by the unframer.
 */
static void RefuseOversizedPacket(struct TVMCrtRpcServer* s) {
  const uint8_t* header;
  size_t size = TVMCrtFrameBuffer_Peek(&s->receive_buffer, &header);
  int ours = size >= TVM_CRT_SESSION_HEADER_SIZE_BYTES && header[2] == kTvmSessionNormal &&
             (uint16_t)(header[0] | (header[1] << 8)) == s->session.session_id &&
             TVMCrtSession_IsEstablished(&s->session);
  TVMCrtSession_ClearReceiveBuffer(&s->session);
  if (ours) {
    TVMCrtRpcPacket_SendException(&s->session,
                                  "RPC packet larger than the device receive buffer "
                                  "(TVM_CRT_MAX_PACKET_SIZE_BYTES)");
  } else {
    NoticeDroppedFrame(s, "larger than the receive buffer");
  }
}

static void LogSink(void* context, const char* message, size_t size_bytes) {
  struct TVMCrtRpcServer* s = (struct TVMCrtRpcServer*)context;
  /* Never interleave with a reply being framed. */
  if (s->framer.state != kTvmFramerTransmitting) {
    (void)TVMCrtSession_SendMessage(&s->session, kTvmSessionLog, (const uint8_t*)message,
                                    size_bytes);
  }
}

/* tvm.rpc.server.GetCRTMaxPacketSize() -> int: the largest RPC packet the device accepts. */
static int GetCRTMaxPacketSize(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret,
                               int* out_ret_tcode, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)resource_handle;
  out_ret->v_int64 = TVM_CRT_MAX_PACKET_SIZE_BYTES - TVM_CRT_FRAME_OVERHEAD_BYTES;
  *out_ret_tcode = kDLInt;
  return 0;
}

/*
 * project_api.boot_mark(int mark) -> int: store mark and return the one stored before, 0 when
 * none was since the device booted (or the server restarted). A host that marks the device
 * after each session start can tell, after a link fault, whether the device kept its memory
 * (its own mark comes back) or started again, and so whether what it sent before still holds.
 */
static int BootMark(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret,
                    int* out_ret_tcode, void* resource_handle) {
  (void)resource_handle;
  if (num_args != 1 || (type_codes[0] != kDLInt && type_codes[0] != kDLUInt)) {
    TVMAPISetLastError("project_api.boot_mark: expected (int)");
    return kTvmErrorFunctionCallWrongArgType;
  }
  out_ret->v_int64 = g_server.boot_mark;
  *out_ret_tcode = kDLInt;
  g_server.boot_mark = args[0].v_int64;
  return 0;
}

/* tvm.rpc.server.ModuleGetFunction(Module, str name, int query_imports) -> PackedFunc or null. */
static int ModuleGetFunction(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret,
                             int* out_ret_tcode, void* resource_handle) {
  TVMFunctionHandle func = NULL;
  (void)resource_handle;
  if (num_args != 3 || (type_codes[0] != kTVMModuleHandle && type_codes[0] != kTVMOpaqueHandle) ||
      type_codes[1] != kTVMStr || (type_codes[2] != kDLInt && type_codes[2] != kDLUInt)) {
    TVMAPISetLastError("ModuleGetFunction: expected (Module, str, int)");
    return kTvmErrorFunctionCallWrongArgType;
  }
  if (TVMModGetFunction(args[0].v_handle, args[1].v_str, (int)args[2].v_int64, &func) != 0) {
    return -1;
  }
  if (func == NULL && TVMCrtGraphModel_Match != NULL &&
      TVMCrtSystemLib_IsHandle(args[0].v_handle)) {
    /* TVM's host-side graph executor (tvm.micro.create_local_graph_executor) looks up
     * _lookup_linked_param and each fused function here; the lowered models do not export
     * them by name. One clear error instead of a missing function deep in TVM. */
    TVMAPIErrorf("%s is not in this firmware's system library: project-api lowered its graph "
                 "models to static C, so TVM's host-side graph executor "
                 "(tvm.micro.create_local_graph_executor) cannot call their functions one by one; "
                 "create the executor on the device with tvm.contrib.graph_executor.create("
                 "graph_json, session.get_system_lib(), session.device), or use project-api's "
                 "client (project-api run, Project.session().model())",
                 args[1].v_str);
    return kTvmErrorFunctionNameNotFound;
  }
  out_ret->v_handle = func;
  *out_ret_tcode = func != NULL ? kTVMPackedFuncHandle : kTVMNullptr;
  return 0;
}

/*
 * What the host reaches besides the server's own globals: the core, then each module, which
 * registers its globals itself. A table of calls rather than constructor attributes, which a
 * linker drops along with an object nothing else refers to. The order fixes the handles of the
 * globals (0x80028000 + registration index), which stay those of earlier releases.
 */
static tvm_crt_error_t (*const kRuntimeModules[])(void) = {
    TVMInitializeRuntime,
    TVMCrtTimeEvaluator_Register,
    TVMCrtRandomFill_Register,
    TVMAotExecutorModule_Register,
};

static void CheckOrAbort(tvm_crt_error_t err) {
  if (err != kTvmErrorNoError) {
    TVMLogf("MicroTVMRpcServerInit failed: error 0x%x", (unsigned)err);
    TVMPlatformAbort(err);
  }
}

microtvm_rpc_server_t MicroTVMRpcServerInit(microtvm_rpc_channel_write_t write_func,
                                            void* write_func_ctx) {
  struct TVMCrtRpcServer* s = &g_server;
  uint8_t nonce = 0;
  memset(s, 0, sizeof(*s));
  s->write_func = write_func;
  s->write_func_ctx = write_func_ctx;
  s->channel.write = ChannelWrite;
  s->channel.context = s;
  s->arena.base = (uint8_t*)g_arena_storage;
  s->arena.size_bytes = sizeof(g_arena_storage);

  TVMCrtFrameBuffer_Init(&s->receive_buffer, g_receive_storage, sizeof(g_receive_storage));
  TVMCrtFramer_Init(&s->framer, &s->channel);
  TVMCrtSession_Init(&s->session, &s->framer, &s->receive_buffer, HandleMessage, s);
  s->receive_tap.write = TapWrite;
  s->receive_tap.packet_start = TapPacketStart;
  s->receive_tap.packet_done = TapPacketDone;
  s->receive_tap.context = s;
  TVMCrtUnframer_Init(&s->unframer, &s->receive_tap);
  /* From here on TVMLogf reaches the host, also while the runtime starts. */
  TVMCrtLog_SetSink(LogSink, s);

  for (size_t i = 0; i < sizeof(kRuntimeModules) / sizeof(kRuntimeModules[0]); i++) {
    CheckOrAbort(kRuntimeModules[i]());
  }
  CheckOrAbort(
      TVMCrtRuntime_RegisterGlobal("tvm.rpc.server.ModuleGetFunction", ModuleGetFunction, 1));
  CheckOrAbort(
      TVMCrtRuntime_RegisterGlobal("tvm.rpc.server.GetCRTMaxPacketSize", GetCRTMaxPacketSize, 1));
  CheckOrAbort(TVMCrtRuntime_RegisterGlobal("project_api.boot_mark", BootMark, 1));
  CheckOrAbort(TVMPlatformGenerateRandom(&nonce, 1));
  CheckOrAbort(TVMCrtSession_Reset(&s->session, nonce));
  return s;
}

/* One step: hand bytes to the unframer; *consumed says how many it took. */
static tvm_crt_error_t ServerReceive(struct TVMCrtRpcServer* s, const uint8_t* data,
                                     size_t size_bytes, size_t* consumed) {
  tvm_crt_error_t err;
  *consumed = 0;
  if (s->is_shutdown) {
    return kTvmErrorPlatformShutdown;
  }
  err = TVMCrtUnframer_Write(&s->unframer, data, size_bytes, consumed);
  if (err == kTvmErrorSessionReceiveBufferShortWrite) {
    RefuseOversizedPacket(s);
  } else if (err == kTvmErrorFramingInvalidEscape) {
    NoticeDroppedFrame(s, "bad escape");
  } else if (err == kTvmErrorFramingShortPacket) {
    NoticeDroppedFrame(s, "cut short");
  }
  return s->is_shutdown ? kTvmErrorPlatformShutdown : err;
}

tvm_crt_error_t MicroTVMRpcServerLoop(microtvm_rpc_server_t server, uint8_t** new_data,
                                      size_t* new_data_size_bytes) {
  size_t consumed;
  tvm_crt_error_t err = ServerReceive(server, *new_data, *new_data_size_bytes, &consumed);
  *new_data += consumed;
  *new_data_size_bytes -= consumed;
  return err;
}

/* Errors caused by the bytes on the line, after which the unframer and session start over. */
static int IsLineError(tvm_crt_error_t err) {
  int category = TVM_CRT_ERROR_CATEGORY(err);
  return err > 0 && (category == kTvmErrorCategoryFraming || category == kTvmErrorCategorySession);
}

tvm_crt_error_t TVMCrtRpcServer_Feed(microtvm_rpc_server_t server, const uint8_t* data,
                                     size_t size_bytes, TVMCrtRpcServerStats* stats) {
  TVMCrtRpcServerStats unused = {0, 0, 0, kTvmErrorNoError};
  int stalled = 0;
  if (stats == NULL) {
    stats = &unused;
  }
  while (size_bytes > 0) {
    size_t consumed;
    tvm_crt_error_t err = ServerReceive(server, data, size_bytes, &consumed);
    if (err != kTvmErrorNoError && !IsLineError(err)) {
      stats->bytes_consumed += consumed;
      return err; /* shutdown, or fatal */
    }
    if (err != kTvmErrorNoError) {
      stats->errors_recovered++;
      stats->last_error = err;
    }
    if (consumed > 0) {
      stalled = 0;
    } else if (stalled) {
      /* A second step without progress from a fresh unframer state: the byte is noise. */
      consumed = 1;
      stats->bytes_dropped++;
      stalled = 0;
    } else {
      /* The error reset the unframer (e.g. FF FD restarted a packet at the first byte): the
       * next step starts from the same byte. */
      stalled = 1;
    }
    data += consumed;
    size_bytes -= consumed;
    stats->bytes_consumed += consumed;
  }
  return kTvmErrorNoError;
}

/*
 * fuzz_rpc_server.c: libFuzzer target for the whole device server (session, MinRPC decoder,
 * executor, reply encoder) behind TVMCrtRpcServer_Feed, over a stand-in runtime.
 *
 * The harness is the host: it handshakes, then sends each input record as one kNormal request
 * in a valid frame, and reads the device's replies with its own unframer and session.
 * Input: byte 0 = host nonce, then records [u16 LE size][bytes]. With bit 15 of the size set,
 * the (size & 0x7fff) bytes are line noise, fed to the device as they are (then one 0xFE, so
 * an escape left open by the noise cannot swallow the next frame's start). Requests that make
 * the device copy through host-given pointers (kCopyFromRemote, kCopyToRemote,
 * kCopyAmongRemote) are skipped: the protocol trusts the host with those addresses.
 * Checks: Feed consumes every byte and returns only kTvmErrorNoError or, after kShutdown,
 * kTvmErrorPlatformShutdown; until the first noise record, every request gets exactly one
 * well-formed reply (none for kShutdown and empty packets) and the session stays established
 * (noise may hold a valid frame that ends the session, so afterwards the run only goes on
 * while the host's session is up); nothing crashes or leaks.
 *
 * The stand-in runtime below answers TVMFuncCall with every return type in turn (chosen by
 * the function handle), so every reply encoding is reached.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/random_fill.h>
#include <tvm/runtime/crt/rpc_common/session.h>
#include <tvm/runtime/crt/time_evaluator.h>

#include "../src/common/module_table.h"
#include "../src/rpc_server/rpc_packet.h"

/* ---- Stand-in runtime and platform ------------------------------------------------------ */

static char g_last_error[64] = "";
static int64_t g_shape[2] = {2, 3};
static float g_tensor_data[6];
static DLTensor g_tensor = {g_tensor_data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, g_shape, NULL, 0};
static const char g_bytes_data[5] = {1, 2, 3, 4, 5};
static TVMByteArray g_bytes = {g_bytes_data, sizeof(g_bytes_data)};
static uint64_t g_pool[64];
static TVMCrtLogSink g_sink;
static void* g_sink_ctx;

void TVMAPISetLastError(const char* msg) {
  strncpy(g_last_error, msg, sizeof(g_last_error) - 1);
}
void TVMAPIErrorf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(g_last_error, sizeof(g_last_error), fmt, args);
  va_end(args);
}
const char* TVMGetLastError(void) { return g_last_error; }
/* The stand-in has no system library (rpc_server.c asks before refusing a lookup). */
int TVMCrtSystemLib_IsHandle(TVMModuleHandle handle) {
  (void)handle;
  return 0;
}
tvm_crt_error_t TVMInitializeRuntime(void) { return kTvmErrorNoError; }
/* The modules the server's init registers: nothing to do over the stand-in runtime. */
tvm_crt_error_t TVMCrtTimeEvaluator_Register(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtRandomFill_Register(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMAotExecutorModule_Register(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtRuntime_RegisterGlobal(const char* name, TVMBackendPackedCFunc func, int o) {
  (void)name;
  (void)func;
  (void)o;
  return kTvmErrorNoError;
}
void TVMCrtLog_SetSink(TVMCrtLogSink sink, void* ctx) {
  g_sink = sink;
  g_sink_ctx = ctx;
}
void TVMLogf(const char* fmt, ...) {
  if (g_sink != NULL) g_sink(g_sink_ctx, fmt, strlen(fmt));
}
void TVMPlatformAbort(tvm_crt_error_t code) {
  (void)code;
  abort();
}
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t n) {
  memset(buffer, 0x5a, n);
  return kTvmErrorNoError;
}
int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  *out = (TVMFunctionHandle)(uintptr_t)strlen(name);
  return 0;
}
int TVMModGetFunction(TVMModuleHandle mod, const char* name, int q, TVMFunctionHandle* out) {
  (void)mod;
  (void)q;
  *out = (TVMFunctionHandle)(uintptr_t)strlen(name);
  return 0;
}
int TVMFuncFree(TVMFunctionHandle f) { return f == NULL ? -1 : 0; }
int TVMModFree(TVMModuleHandle m) { return m == NULL ? -1 : 0; }
int TVMArrayFree(TVMArrayHandle a) { return a == NULL ? -1 : 0; }
/* The stand-in hands out no tensors, so a new session has none to release. */
size_t TVMCrtNDArray_ReleaseAll(void) { return 0; }
int TVMByteArrayFree(TVMByteArray* b) {
  if (b != &g_bytes) abort(); /* only what TVMFuncCall returned */
  return 0;
}
int TVMDeviceAllocDataSpace(DLDevice dev, size_t n, size_t align, DLDataType t, void** out) {
  (void)dev;
  (void)align;
  (void)t;
  *out = n <= sizeof(g_pool) ? (void*)g_pool : NULL;
  return *out == NULL ? -1 : 0;
}
int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape, DLDataType t,
                                     const char* scope, void** out) {
  (void)ndim;
  (void)shape;
  (void)scope;
  return TVMDeviceAllocDataSpace(dev, 8, 8, t, out);
}
int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr) {
  (void)dev;
  return ptr == NULL ? -1 : 0;
}

/* Every return type, chosen by the function handle. Reads all arguments it is given. */
int TVMFuncCall(TVMFunctionHandle func, TVMValue* args, int* codes, int n, TVMValue* ret,
                int* ret_code) {
  static const int kCodes[] = {kDLInt,         kDLFloat,          kTVMStr,         kTVMBytes,
                               kTVMNDArrayHandle, kTVMModuleHandle, kTVMPackedFuncHandle,
                               kTVMNullptr,    kDLDevice,         kTVMDataType,    kTVMDLTensorHandle,
                               kTVMOpaqueHandle, kTVMObjectHandle, -1, -2};
  uintptr_t h = (uintptr_t)func;
  int i;
  for (i = 0; i < n; ++i) {
    if (codes[i] == kTVMStr) (void)strlen(args[i].v_str);
    if (codes[i] == kTVMDLTensorHandle) (void)((DLTensor*)args[i].v_handle)->shape;
  }
  *ret_code = kCodes[h % (sizeof(kCodes) / sizeof(kCodes[0]))];
  switch (*ret_code) {
    case kTVMStr: ret->v_str = "result"; break;
    case kTVMBytes: ret->v_handle = &g_bytes; break;
    case kTVMNDArrayHandle:
    case kTVMDLTensorHandle: ret->v_handle = &g_tensor; break;
    case kDLDevice: ret->v_device = g_tensor.device; break;
    case kTVMDataType: ret->v_type = g_tensor.dtype; break;
    case -1: TVMAPISetLastError("stand-in error"); return -1;
    case -2: *ret_code = kTVMNDArrayHandle; ret->v_handle = NULL; break; /* a buggy callee */
    default: ret->v_int64 = (int64_t)h; break;
  }
  return 0;
}

/* ---- Host side ---------------------------------------------------------------------------- */

static uint8_t g_to_device[8192];
static size_t g_to_device_size;
static uint8_t g_from_device[16384];
static size_t g_from_device_size;
static int g_replies;

static ptrdiff_t DeviceWrite(void* ctx, const uint8_t* data, size_t n) {
  (void)ctx;
  if (n > sizeof(g_from_device) - g_from_device_size) abort(); /* the host never lags that far */
  memcpy(g_from_device + g_from_device_size, data, n);
  g_from_device_size += n;
  return (ptrdiff_t)n;
}

static tvm_crt_error_t HostWrite(void* ctx, const uint8_t* data, size_t n, size_t* written) {
  (void)ctx;
  if (n > sizeof(g_to_device) - g_to_device_size) abort();
  memcpy(g_to_device + g_to_device_size, data, n);
  g_to_device_size += n;
  *written = n;
  return kTvmErrorNoError;
}

static TVMCrtSession g_host;

static void HostOnMessage(void* ctx, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buf) {
  (void)ctx;
  if (buf == NULL) return;
  if (type == kTvmSessionNormal) {
    const uint8_t* reply;
    size_t n = TVMCrtFrameBuffer_Peek(buf, &reply);
    uint64_t len = 0;
    int i;
    if (n < 12) abort(); /* u64 length + i32 code at least */
    for (i = 7; i >= 0; --i) len = (len << 8) | reply[i];
    if (len != n - 8) abort(); /* the length prefix matches the reply */
    g_replies++;
  }
  TVMCrtSession_ClearReceiveBuffer(&g_host);
}

static microtvm_rpc_server_t g_server;

static int Exchange(TVMCrtUnframer* host_unframer) {
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  size_t consumed;
  int shutdown = 0;
  tvm_crt_error_t err = TVMCrtRpcServer_Feed(g_server, g_to_device, g_to_device_size, &stats);
  if (err == kTvmErrorPlatformShutdown) {
    shutdown = 1;
  } else if (err != kTvmErrorNoError || stats.bytes_consumed != g_to_device_size) {
    abort(); /* line errors are recovered inside Feed, and it takes every byte */
  }
  g_to_device_size = 0;
  if (TVMCrtUnframer_Write(host_unframer, g_from_device, g_from_device_size, &consumed) !=
      kTvmErrorNoError) {
    abort(); /* the device's output always frames cleanly */
  }
  g_from_device_size = 0;
  return shutdown;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint8_t host_rx_storage[16384];
  static TVMCrtFrameBuffer host_rx;
  static TVMCrtFramer host_framer;
  static TVMCrtUnframer host_unframer;
  static uint64_t arena_storage[1024];
  TVMCrtWriteStream host_out = {HostWrite, NULL, NULL, NULL};
  int noisy = 0;
  if (size < 1) return 0;
  g_to_device_size = g_from_device_size = 0;
  g_replies = 0;
  g_server = MicroTVMRpcServerInit(DeviceWrite, NULL);
  TVMCrtFrameBuffer_Init(&host_rx, host_rx_storage, sizeof(host_rx_storage));
  TVMCrtFramer_Init(&host_framer, &host_out);
  TVMCrtSession_Init(&g_host, &host_framer, &host_rx, HostOnMessage, NULL);
  TVMCrtUnframer_Init(&host_unframer, TVMCrtSession_Receiver(&g_host));
  TVMCrtSession_Reset(&g_host, data[0]);
  TVMCrtSession_Start(&g_host);
  Exchange(&host_unframer);
  if (!TVMCrtSession_IsEstablished(&g_host)) abort();
  ++data;
  --size;
  while (size >= 2) {
    size_t n = (size_t)(data[0] | (data[1] << 8));
    TVMCrtRpcArena arena = {(uint8_t*)arena_storage, sizeof(arena_storage), 0};
    TVMCrtRpcRequest q;
    const char* error;
    int expect_reply, before = g_replies;
    data += 2;
    size -= 2;
    if (n & 0x8000u) { /* line noise */
      n &= 0x7fffu;
      if (n > size) n = size;
      if (n > sizeof(g_to_device) - 1) n = sizeof(g_to_device) - 1;
      memcpy(g_to_device, data, n);
      g_to_device[n] = 0xfe;
      g_to_device_size = n + 1;
      noisy = 1;
      if (Exchange(&host_unframer) || !TVMCrtSession_IsEstablished(&g_host)) break;
      data += n;
      size -= n;
      continue;
    }
    if (n > size) n = size;
    if (n > 2000) n = 2000; /* fits the device's receive buffer with its headers */
    error = TVMCrtRpcPacket_DecodeRequest(data, n, &arena, &q);
    if (error == NULL && (q.code == kTvmRpcCopyFromRemote || q.code == kTvmRpcCopyToRemote ||
                          q.code == kTvmRpcCopyAmongRemote)) {
      data += n;
      size -= n;
      continue;
    }
    expect_reply = error != NULL || (q.code != kTvmRpcNone && q.code != kTvmRpcShutdown);
    if (TVMCrtSession_SendMessage(&g_host, kTvmSessionNormal, data, n) != kTvmErrorNoError) abort();
    if (Exchange(&host_unframer)) {
      if (!noisy && (error != NULL || q.code != kTvmRpcShutdown)) abort(); /* only kShutdown */
      break;
    }
    if (noisy) {
      if (!TVMCrtSession_IsEstablished(&g_host)) break;
    } else {
      if (g_replies != before + expect_reply) abort(); /* one reply per request, always */
      if (!TVMCrtSession_IsEstablished(&g_host)) abort();
    }
    data += n;
    size -= n;
  }
  return 0;
}

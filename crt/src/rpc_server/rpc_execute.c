/*!
 * \file rpc_server/rpc_execute.c
 * \brief Executing decoded MinRPC requests on the C runtime and encoding the replies.
 *
 * Every request is answered: errors become ReturnException replies (the reference spins
 * forever instead), and the session keeps working.
 */
#include <string.h>
#include <tvm/runtime/c_runtime_api.h>

#include "rpc_packet.h"

/* ---- Reply encoding ------------------------------------------------------------------------ */

/* Replies are encoded twice: once to count their size (for the headers), once to send. */
typedef struct {
  TVMCrtSession* session;
  size_t size_bytes;
  tvm_crt_error_t error;
  int counting;
} rpc_writer_t;

static void WriteBytes(rpc_writer_t* w, const void* data, size_t size_bytes) {
  if (w->counting) {
    w->size_bytes += size_bytes;
  } else if (w->error == kTvmErrorNoError && size_bytes > 0) {
    w->error = TVMCrtSession_SendBodyChunk(w->session, (const uint8_t*)data, size_bytes);
  }
}

/* size_bytes first: the 64-bit value then travels in registers r2:r3 on 32-bit Arm. */
static void WriteLe(rpc_writer_t* w, size_t size_bytes, uint64_t value) {
  uint8_t b[8];
  size_t i;
  for (i = 0; i < size_bytes; ++i, value >>= 8) { /* constant shifts: cheap on 32-bit cores */
    b[i] = (uint8_t)value;
  }
  WriteBytes(w, b, size_bytes);
}

static void WriteU32(rpc_writer_t* w, uint32_t value) { WriteLe(w, 4, value); }

static uint32_t DTypeWord(DLDataType t) {
  return t.code | ((uint32_t)t.bits << 8) | ((uint32_t)t.lanes << 16);
}

static void WriteTensor(rpc_writer_t* w, const DLTensor* t) {
  int32_t i;
  WriteLe(w, 8, (uint64_t)(uintptr_t)t->data);
  WriteU32(w, (uint32_t)t->device.device_type);
  WriteU32(w, (uint32_t)t->device.device_id);
  WriteU32(w, (uint32_t)t->ndim);
  WriteU32(w, DTypeWord(t->dtype));
  for (i = 0; i < t->ndim; ++i) {
    WriteLe(w, 8, (uint64_t)t->shape[i]);
  }
  WriteLe(w, 8, t->byte_offset);
}

static void WriteValue(rpc_writer_t* w, int type_code, const TVMValue* v) {
  switch (type_code) {
    case kTVMNullptr:
      break;
    case kTVMStr: {
      size_t n = strlen(v->v_str);
      WriteLe(w, 8, n);
      WriteBytes(w, v->v_str, n);
      break;
    }
    case kTVMBytes: {
      const TVMByteArray* b = (const TVMByteArray*)v->v_handle;
      WriteLe(w, 8, b->size);
      WriteBytes(w, b->data, b->size);
      break;
    }
    case kTVMDLTensorHandle:
      WriteTensor(w, (const DLTensor*)v->v_handle);
      break;
    case kTVMDataType:
      WriteLe(w, 8, DTypeWord(v->v_type));
      break;
    case kDLDevice:
      WriteU32(w, (uint32_t)v->v_device.device_type);
      WriteU32(w, (uint32_t)v->v_device.device_id);
      break;
    case kTVMOpaqueHandle:
      WriteLe(w, 8, (uint64_t)(uintptr_t)v->v_handle);
      break;
    default: /* kDLInt, kDLUInt, kDLFloat: the 8 bytes of the union */
      WriteLe(w, 8, (uint64_t)v->v_int64);
      break;
  }
}

/* A reply: code kTvmRpcReturn/kTvmRpcException with a packed sequence, or kTvmRpcCopyAck. */
typedef struct {
  int32_t code;
  int32_t num_values;
  int type_codes[3];
  TVMValue values[3];
  const uint8_t* ack_data;
  size_t ack_size_bytes;
} rpc_reply_t;

static void EncodeReply(rpc_writer_t* w, const rpc_reply_t* r) {
  int32_t i;
  WriteU32(w, (uint32_t)r->code);
  if (r->code == kTvmRpcCopyAck) {
    WriteBytes(w, r->ack_data, r->ack_size_bytes);
    return;
  }
  WriteU32(w, (uint32_t)r->num_values);
  for (i = 0; i < r->num_values; ++i) {
    WriteU32(w, (uint32_t)r->type_codes[i]);
  }
  for (i = 0; i < r->num_values; ++i) {
    WriteValue(w, r->type_codes[i], &r->values[i]);
  }
}

static void SendReply(TVMCrtSession* session, const rpc_reply_t* reply) {
  rpc_writer_t w;
  w.session = session;
  w.size_bytes = 0;
  w.error = kTvmErrorNoError;
  w.counting = 1;
  EncodeReply(&w, reply);
  w.counting = 0;
  if (TVMCrtSession_StartMessage(session, kTvmSessionNormal, w.size_bytes + 8u) !=
      kTvmErrorNoError) {
    return;
  }
  WriteLe(&w, 8, w.size_bytes);
  EncodeReply(&w, reply);
  if (w.error == kTvmErrorNoError) {
    (void)TVMCrtSession_FinishMessage(session);
  }
}

static void SetReply1(rpc_reply_t* r, int32_t code, int type_code) {
  memset(r, 0, sizeof(*r));
  r->code = code;
  r->num_values = 1;
  r->type_codes[0] = type_code;
}

void TVMCrtRpcPacket_SendException(TVMCrtSession* session, const char* message) {
  rpc_reply_t r;
  SetReply1(&r, kTvmRpcException, kTVMStr);
  r.values[0].v_str = message;
  SendReply(session, &r);
}

/* ---- Execution ----------------------------------------------------------------------------- */

/*
 * Argument signatures: per argument, the set of type codes it accepts as a bit mask; the
 * list ends at the first 0 (or after 4 arguments). The number of arguments must match.
 */
#define kArgInt ((1u << kDLInt) | (1u << kDLUInt))
#define kArgHandle ((1u << kTVMOpaqueHandle) | (1u << kTVMNullptr)) /* handle or null */
#define kArgDevice (1u << kDLDevice)
#define kArgTensor (1u << kTVMDLTensorHandle)
#define kArgDType (1u << kTVMDataType)
#define kArgStr (1u << kTVMStr)
#define kArgStrOrNull ((1u << kTVMStr) | (1u << kTVMNullptr))
#define kMaxSignatureArgs 4

static int ArgsMatch(const TVMCrtRpcRequest* q, const uint16_t* sig) {
  int32_t i;
  for (i = 0; i < kMaxSignatureArgs && sig[i] != 0; ++i) {
    if (i >= q->num_args || (unsigned)q->type_codes[i] >= 16u ||
        ((sig[i] >> q->type_codes[i]) & 1u) == 0) {
      return 0;
    }
  }
  return i == q->num_args;
}

/* Address of [byte_offset, byte_offset + num_bytes) of a CPU tensor, or NULL if out of range. */
static uint8_t* TensorRange(const DLTensor* t, uint64_t num_bytes) {
  int ok;
  uint64_t size = TVMCrtRpcPacket_TensorNumBytes(t, &ok);
  if (!ok || (uint64_t)(uintptr_t)size != size || t->data == NULL ||
      t->device.device_type != kDLCPU || t->byte_offset > size || num_bytes > size - t->byte_offset) {
    return NULL;
  }
  return (uint8_t*)t->data + (uintptr_t)t->byte_offset;
}

/* Argument signatures of syscalls 9..20 (see ArgsMatch); an empty one takes anything. */
static const uint16_t kSyscallSignatures[][kMaxSignatureArgs] = {
    {kArgStr},                                  /* 9 GetGlobalFunc(name) */
    {kArgHandle, kArgInt},                      /* 10 FreeHandle(handle, type code) */
    {0},                                        /* 11 DevSetDevice */
    {0},                                        /* 12 DevGetAttr */
    {kArgDevice, kArgInt, kArgInt, kArgDType},  /* 13 DevAllocData(device, nbytes, align, dtype) */
    {kArgDevice, kArgHandle},                   /* 14 DevFreeData(device, ptr) */
    {kArgDevice, kArgHandle},                   /* 15 DevStreamSync(device, stream) */
    {kArgTensor, kArgTensor, kArgHandle},       /* 16 CopyAmongRemote(from, to, stream) */
    {kArgTensor, kArgStrOrNull},                /* 17 DevAllocDataWithScope(template, scope) */
    {kArgDevice},                               /* 18 DevCreateStream(device) */
    {kArgDevice, kArgHandle},                   /* 19 DevFreeStream(device, stream) */
    {kArgDevice, kArgHandle},                   /* 20 DevSetStream(device, stream) */
};

/*
 * r arrives as a Return of kTVMNullptr, which syscalls without a result send as it is. Kept out
 * of TVMCrtRpcPacket_ExecuteRequest: inlined there, it makes the whole function spill more
 * registers.
 */
TVM_CRT_NOINLINE static const char* ExecuteSyscall(const TVMCrtRpcRequest* q, rpc_reply_t* r) {
  const TVMValue* a = q->values;
  void* handle = NULL;
  int err = 0;
  int returns_handle = 1;
  if (q->code > kTvmRpcDevSetStream) {
    return "Syscall not recognized";
  }
  if (kSyscallSignatures[q->code - kTvmRpcGetGlobalFunc][0] != 0 &&
      !ArgsMatch(q, kSyscallSignatures[q->code - kTvmRpcGetGlobalFunc])) {
    return "syscall: wrong argument count or types";
  }
  switch (q->code) {
    case kTvmRpcGetGlobalFunc:
      if (TVMFuncGetGlobal(a[0].v_str, &handle) != 0) {
        handle = NULL; /* not found: the host sees a null handle */
      }
      break;
    case kTvmRpcFreeHandle:
      if (a[1].v_int64 == kTVMNDArrayHandle) {
        err = TVMArrayFree((TVMArrayHandle)a[0].v_handle);
      } else if (a[1].v_int64 == kTVMPackedFuncHandle) {
        err = TVMFuncFree(a[0].v_handle);
      } else if (a[1].v_int64 == kTVMModuleHandle) {
        err = TVMModFree(a[0].v_handle);
      }
      returns_handle = 0;
      break;
    case kTvmRpcDevSetDevice:
      return "SetDevice not supported";
    case kTvmRpcDevGetAttr:
      return "GetAttr not supported";
    case kTvmRpcDevAllocData:
      if (a[1].v_int64 < 0 || (uint64_t)a[1].v_int64 != (size_t)a[1].v_int64 ||
          a[2].v_int64 < 0 || (uint64_t)a[2].v_int64 != (size_t)a[2].v_int64) {
        return "AllocData: size or alignment out of range";
      }
      err = TVMDeviceAllocDataSpace(a[0].v_device, (size_t)a[1].v_int64, (size_t)a[2].v_int64,
                                    a[3].v_type, &handle);
      break;
    case kTvmRpcDevAllocDataWithScope: {
      const DLTensor* t = (const DLTensor*)a[0].v_handle;
      err = TVMDeviceAllocDataSpaceWithScope(t->device, t->ndim, t->shape, t->dtype,
                                             q->type_codes[1] == kTVMStr ? a[1].v_str : NULL,
                                             &handle);
      break;
    }
    case kTvmRpcDevFreeData:
      err = TVMDeviceFreeDataSpace(a[0].v_device, a[1].v_handle);
      returns_handle = 0;
      break;
    case kTvmRpcDevCreateStream:
      /* The CPU runs synchronously: its stream is the null stream. */
      break;
    case kTvmRpcCopyAmongRemote: {
      const DLTensor* from = (const DLTensor*)a[0].v_handle;
      const DLTensor* to = (const DLTensor*)a[1].v_handle;
      int ok;
      uint64_t size = TVMCrtRpcPacket_TensorNumBytes(from, &ok);
      uint8_t* src = TensorRange(from, size);
      uint8_t* dst = TensorRange(to, size);
      if (src == NULL || dst == NULL) {
        return "CopyAmongRemote: tensors out of range or not on the CPU";
      }
      memmove(dst, src, (size_t)size);
      returns_handle = 0;
      break;
    }
    default: /* DevFreeStream, DevStreamSync, DevSetStream: nothing to do on the CPU */
      returns_handle = 0;
      break;
  }
  if (err != 0) {
    return TVMGetLastError();
  }
  if (returns_handle) {
    r->type_codes[0] = kTVMOpaqueHandle;
    r->values[0].v_handle = handle;
  }
  return NULL;
}

/* kCallFunc: reply [kDLInt type_code][value...] (spec §4.6 return-value convention). */
static const char* ExecuteCallFunc(const TVMCrtRpcRequest* q, rpc_reply_t* r, TVMValue* ret,
                                   int* ret_tcode) {
  void* func = (void*)(uintptr_t)q->func_handle;
  if ((uint64_t)(uintptr_t)func != q->func_handle) {
    return "CallFunc: bad function handle";
  }
  ret->v_handle = NULL;
  *ret_tcode = kTVMNullptr;
  if (TVMFuncCall(func, q->values, q->type_codes, q->num_args, ret, ret_tcode) != 0) {
    return TVMGetLastError();
  }
  memset(r, 0, sizeof(*r));
  r->code = kTvmRpcReturn;
  r->num_values = 2;
  r->type_codes[0] = kDLInt;
  r->values[0].v_int64 = *ret_tcode;
  r->values[1] = *ret;
  switch (*ret_tcode) {
    case kTVMModuleHandle:
    case kTVMPackedFuncHandle:
      r->type_codes[1] = kTVMOpaqueHandle;
      break;
    case kTVMNDArrayHandle:
      /* [kDLInt 13][the DLTensor][the handle, later released with kFreeHandle 13] */
      if (ret->v_handle == NULL) return "CallFunc: null result";
      r->num_values = 3;
      r->type_codes[1] = kTVMDLTensorHandle;
      r->type_codes[2] = kTVMOpaqueHandle;
      r->values[2] = *ret;
      break;
    case kDLInt:
    case kDLUInt:
    case kDLFloat:
    case kTVMOpaqueHandle:
    case kTVMNullptr:
    case kTVMDataType:
    case kDLDevice:
      r->type_codes[1] = *ret_tcode;
      break;
    case kTVMDLTensorHandle:
    case kTVMStr:
    case kTVMBytes:
      if (ret->v_handle == NULL) return "CallFunc: null result";
      r->type_codes[1] = *ret_tcode;
      break;
    default:
      return "CallFunc: return type not supported";
  }
  return NULL;
}

int TVMCrtRpcPacket_ExecuteRequest(const TVMCrtRpcRequest* q, TVMCrtSession* session) {
  rpc_reply_t r;
  TVMValue ret;
  int ret_tcode = kTVMNullptr;
  const char* error = NULL;
  SetReply1(&r, kTvmRpcReturn, kTVMNullptr);
  switch (q->code) {
    case kTvmRpcNone:
      return 0;
    case kTvmRpcShutdown:
      return 1;
    case kTvmRpcInitServer:
      break;
    case kTvmRpcCallFunc:
      error = ExecuteCallFunc(q, &r, &ret, &ret_tcode);
      break;
    case kTvmRpcCopyFromRemote:
    case kTvmRpcCopyToRemote: {
      uint8_t* p = TensorRange(q->tensor, q->num_bytes);
      if (p == NULL) {
        error = "Copy: range outside the tensor, or the tensor is not on the CPU";
      } else if (q->code == kTvmRpcCopyToRemote) {
        memcpy(p, q->data, (size_t)q->num_bytes);
      } else {
        r.code = kTvmRpcCopyAck;
        r.ack_data = p;
        r.ack_size_bytes = (size_t)q->num_bytes;
      }
      break;
    }
    default:
      error = ExecuteSyscall(q, &r);
      break;
  }
  if (error != NULL) {
    TVMCrtRpcPacket_SendException(session, error);
  } else {
    SendReply(session, &r);
  }
  if (ret_tcode == kTVMBytes && error == NULL) {
    (void)TVMByteArrayFree((TVMByteArray*)ret.v_handle);
  }
  return 0;
}

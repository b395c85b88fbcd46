/*!
 * \file rpc_server/rpc_decode.c
 * \brief Bounds-checked decoding of MinRPC request packets (spec §4.6).
 */
#include <string.h>
#include <tvm/runtime/crt/config.h>

#include "rpc_packet.h"

typedef struct {
  const uint8_t* pos;
  size_t left;
  const char* error; /* first problem seen; later reads return zeros */
} rpc_reader_t;

static const char kTruncated[] = "packet truncated";
static const char kNoMemory[] = "RPC arena exhausted (TVM_CRT_RPC_ARENA_SIZE_BYTES)";

/* size_bytes from the arena (8-aligned), or NULL with kNoMemory as the reader's first error. */
static void* ArenaAlloc(rpc_reader_t* r, TVMCrtRpcArena* arena, size_t size_bytes) {
  size_t start = (arena->used_bytes + 7u) & ~(size_t)7u;
  void* out;
  if (start > arena->size_bytes || size_bytes > arena->size_bytes - start) {
    if (r->error == NULL) {
      r->error = kNoMemory;
    }
    return NULL;
  }
  out = arena->base + start;
  arena->used_bytes = start + size_bytes;
  return out;
}

static const uint8_t* ReadRaw(rpc_reader_t* r, uint64_t size_bytes) {
  const uint8_t* out = r->pos;
  if (r->error != NULL) {
    return NULL;
  }
  if (size_bytes > r->left) {
    r->error = kTruncated;
    return NULL;
  }
  r->pos += size_bytes;
  r->left -= (size_t)size_bytes;
  return out;
}

/* Little-endian unsigned of size_bytes (<= 8); 0 after an error. */
static uint64_t ReadLe(rpc_reader_t* r, size_t size_bytes) {
  const uint8_t* p = ReadRaw(r, size_bytes);
  uint64_t v = 0;
  if (p != NULL) {
    while (size_bytes-- > 0) {
      v = (v << 8) | p[size_bytes];
    }
  }
  return v;
}

static int32_t ReadI32(rpc_reader_t* r) { return (int32_t)(uint32_t)ReadLe(r, 4); }

/* Out of line: it has two callers. */
TVM_CRT_NOINLINE static void* ReadHandle(rpc_reader_t* r) {
  uint64_t v = ReadLe(r, 8);
  if ((uint64_t)(uintptr_t)v != v && r->error == NULL) {
    r->error = "handle wider than a device pointer";
  }
  return (void*)(uintptr_t)v;
}

static DLDataType ReadDataType(rpc_reader_t* r) {
  DLDataType t;
  t.code = (uint8_t)ReadLe(r, 1);
  t.bits = (uint8_t)ReadLe(r, 1);
  t.lanes = (uint16_t)ReadLe(r, 2);
  return t;
}

static DLDevice ReadDevice(rpc_reader_t* r) {
  DLDevice d;
  d.device_type = (DLDeviceType)ReadI32(r);
  d.device_id = ReadI32(r);
  return d;
}

uint64_t TVMCrtRpcPacket_TensorNumBytes(const DLTensor* tensor, int* ok) {
  /* bits * lanes + 7 fits 32 bits: no 64-bit multiply needed for the element size. */
  uint64_t n = ((uint32_t)tensor->dtype.bits * tensor->dtype.lanes + 7u) / 8u;
  int32_t i;
  *ok = 1;
  for (i = 0; i < tensor->ndim; ++i) {
    int64_t dim = tensor->shape[i];
    if (dim < 0 || (dim != 0 && n > UINT64_MAX / (uint64_t)dim)) {
      *ok = 0;
      return 0;
    }
    n *= (uint64_t)dim;
  }
  return n;
}

static DLTensor* ReadTensor(rpc_reader_t* r, TVMCrtRpcArena* arena) {
  DLTensor* t = (DLTensor*)ArenaAlloc(r, arena, sizeof(DLTensor));
  int32_t i;
  int ok;
  if (t == NULL) {
    return NULL;
  }
  memset(t, 0, sizeof(*t));
  t->data = ReadHandle(r);
  t->device = ReadDevice(r);
  t->ndim = ReadI32(r);
  t->dtype = ReadDataType(r);
  if (r->error != NULL) {
    return NULL;
  }
  if (t->ndim < 0 || t->ndim > TVM_CRT_MAX_NDIM) {
    r->error = "tensor ndim out of range (TVM_CRT_MAX_NDIM)";
    return NULL;
  }
  t->shape = (int64_t*)ArenaAlloc(r, arena, sizeof(int64_t) * (size_t)t->ndim + 1u);
  if (t->shape == NULL) {
    return NULL;
  }
  for (i = 0; i < t->ndim; ++i) {
    t->shape[i] = (int64_t)ReadLe(r, 8);
  }
  t->byte_offset = ReadLe(r, 8);
  if (r->error == NULL && (t->dtype.lanes == 0 || (TVMCrtRpcPacket_TensorNumBytes(t, &ok), !ok))) {
    r->error = "bad tensor shape or dtype";
  }
  return r->error == NULL ? t : NULL;
}

/* The packed sequence: i32 n, i32 type_codes[n], values. */
static void ReadPackedSeq(rpc_reader_t* r, TVMCrtRpcArena* arena, TVMCrtRpcRequest* out) {
  int32_t n = ReadI32(r);
  int32_t i;
  if (r->error != NULL) {
    return;
  }
  /* Each argument needs at least its 4-byte type code, which bounds n by the packet. */
  if (n < 0 || (uint64_t)n > r->left / 4u) {
    r->error = "argument count out of range";
    return;
  }
  out->num_args = n;
  out->type_codes = (int*)ArenaAlloc(r, arena, sizeof(int) * (size_t)n + 1u);
  out->values = (TVMValue*)ArenaAlloc(r, arena, sizeof(TVMValue) * (size_t)n + 1u);
  if (out->type_codes == NULL || out->values == NULL) {
    return;
  }
  for (i = 0; i < n; ++i) {
    out->type_codes[i] = ReadI32(r);
  }
  for (i = 0; i < n && r->error == NULL; ++i) {
    TVMValue* v = &out->values[i];
    memset(v, 0, sizeof(*v));
    switch (out->type_codes[i]) {
      case kDLInt:
      case kDLUInt:
      case kDLFloat: /* a float arrives as the bits of a double, which the union reinterprets */
        v->v_int64 = (int64_t)ReadLe(r, 8);
        break;
      case kTVMDataType:
        v->v_type = ReadDataType(r);
        (void)ReadLe(r, 4);
        break;
      case kDLDevice:
        v->v_device = ReadDevice(r);
        break;
      case kTVMOpaqueHandle:
      case kTVMModuleHandle:
      case kTVMPackedFuncHandle:
        v->v_handle = ReadHandle(r);
        break;
      case kTVMNullptr:
        break;
      case kTVMStr:
      case kTVMBytes: {
        /* A str is copied and NUL-terminated; bytes are borrowed from the message. */
        int is_str = out->type_codes[i] == kTVMStr;
        uint64_t len = ReadLe(r, 8);
        const uint8_t* src = ReadRaw(r, len);
        void* p = src != NULL ? ArenaAlloc(r, arena, is_str ? (size_t)len + 1u
                                                            : sizeof(TVMByteArray))
                              : NULL;
        if (p != NULL && is_str) {
          memcpy(p, src, (size_t)len);
          ((char*)p)[len] = '\0';
          v->v_str = (const char*)p;
        } else if (p != NULL) {
          TVMByteArray* b = (TVMByteArray*)p;
          b->data = (const char*)src;
          b->size = (size_t)len;
          v->v_handle = b;
        }
        break;
      }
      case kTVMDLTensorHandle:
        v->v_handle = ReadTensor(r, arena);
        break;
      default:
        r->error = "argument type code not supported";
        break;
    }
  }
}

const char* TVMCrtRpcPacket_DecodeRequest(const uint8_t* message, size_t size_bytes,
                                          TVMCrtRpcArena* arena, TVMCrtRpcRequest* out) {
  rpc_reader_t r;
  uint64_t packet_nbytes;
  r.pos = message;
  r.left = size_bytes;
  r.error = NULL;
  memset(out, 0, sizeof(*out));
  arena->used_bytes = 0;
  packet_nbytes = ReadLe(&r, 8);
  if (r.error != NULL) {
    return r.error;
  }
  if (packet_nbytes != r.left) {
    return "packet length does not match the message";
  }
  if (packet_nbytes == 0) {
    return NULL; /* kTvmRpcNone: nothing to do */
  }
  out->code = ReadI32(&r);
  switch (out->code) {
    case kTvmRpcShutdown:
      break;
    case kTvmRpcInitServer:
      (void)ReadRaw(&r, ReadLe(&r, 8)); /* protocol version; not compared, as in MinRPC */
      ReadPackedSeq(&r, arena, out);
      if (r.error == NULL && out->num_args != 0) {
        r.error = "InitServer takes no arguments";
      }
      break;
    case kTvmRpcCallFunc:
      out->func_handle = ReadLe(&r, 8);
      ReadPackedSeq(&r, arena, out);
      break;
    case kTvmRpcCopyFromRemote:
    case kTvmRpcCopyToRemote:
      out->tensor = ReadTensor(&r, arena);
      out->num_bytes = ReadLe(&r, 8);
      if (out->code == kTvmRpcCopyToRemote) {
        out->data = ReadRaw(&r, out->num_bytes);
      }
      break;
    default:
      if (out->code < kTvmRpcGetGlobalFunc) {
        return "unknown RPC code";
      }
      ReadPackedSeq(&r, arena, out);
      break;
  }
  if (r.error == NULL && r.left != 0) {
    r.error = "packet has trailing bytes";
  }
  return r.error;
}

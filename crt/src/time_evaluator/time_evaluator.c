/*
 * runtime.RPCTimeEvaluator (time_evaluator.h): a module of its own. It registers the global and a
 * function space for the evaluators it creates; the core knows nothing of it.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/time_evaluator.h>

#include "../common/module_table.h"

/* Module index of the evaluators' function handles: TVM's value, so handles stay the same. */
#define kTimeEvaluatorModuleIndex ((uint16_t)0x7fff)

/* Upper bounds that keep the arithmetic finite; far beyond any useful measurement. */
#define kMaxNumber ((int64_t)1000000000)
#define kMaxRepeat ((int64_t)65536)
#define kMaxNumberText "1000000000" /* the same limits, for the error message */
#define kMaxRepeatText "65536"

typedef struct {
  uint16_t k; /* handle index of the live evaluator; 0 = none */
  TVMFunctionHandle func;
  /* Validated in Create: number <= kMaxNumber and repeat <= kMaxRepeat fit 32 bits. */
  uint32_t number;
  uint32_t repeat;
  /* r % repeats_to_cooldown for r < repeat; values above kMaxRepeat act as kMaxRepeat. */
  uint32_t repeats_to_cooldown;
  int64_t limit_zero_time_iterations;
  /* Only ever compared with elapsed times in doubles: converted once. */
  double min_repeat_ms;
  double cooldown_interval_ms;
} TimeEvaluator;

static TimeEvaluator g_evaluator;
static uint16_t g_last_k;

static int Create(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                  int* out_ret_tcode, void* resource_handle) {
  (void)resource_handle;
  if (num_args < 12) {
    TVMAPIErrorf("runtime.RPCTimeEvaluator: expected 12 arguments, got %d", num_args);
    return kTvmErrorFunctionCallNumArguments;
  }
  if (type_codes[0] != kTVMModuleHandle || type_codes[1] != kTVMStr ||
      (type_codes[11] != kTVMStr && type_codes[11] != kTVMNullptr)) {
    TVMAPISetLastError(
        "runtime.RPCTimeEvaluator: expected (Module, str name, 9 ints, str f_preproc)");
    return kTvmErrorFunctionCallWrongArgType;
  }
  for (int i = 2; i < 11; i++) {
    if (type_codes[i] != kTVMArgInt && type_codes[i] != kDLUInt) {
      TVMAPIErrorf("runtime.RPCTimeEvaluator: argument %d must be an int (type code %d)", i,
                   type_codes[i]);
      return kTvmErrorFunctionCallWrongArgType;
    }
  }
  /* args[2], args[3]: device type and id (the CPU); args[10]: cache_flush_bytes (ignored). */
  const int64_t number = args[4].v_int64;
  const int64_t repeat = args[5].v_int64;
  const int64_t min_repeat_ms = args[6].v_int64;
  const int64_t cooldown_interval_ms = args[8].v_int64;
  int64_t repeats_to_cooldown = args[9].v_int64;
  TimeEvaluator te;
  te.limit_zero_time_iterations = args[7].v_int64;
  if (number < 1 || number > kMaxNumber || repeat < 1 || repeat > kMaxRepeat ||
      min_repeat_ms < 0 || te.limit_zero_time_iterations < 0 || cooldown_interval_ms < 0 ||
      repeats_to_cooldown < 0) {
    TVMAPISetLastError("runtime.RPCTimeEvaluator: need 1 <= number <= " kMaxNumberText
                       ", 1 <= repeat <= " kMaxRepeatText " and non-negative times");
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (repeats_to_cooldown == 0) {
    repeats_to_cooldown = 1;
  } else if (repeats_to_cooldown > kMaxRepeat) {
    repeats_to_cooldown = kMaxRepeat; /* r < repeat <= kMaxRepeat: r % it is r either way */
  }
  te.number = (uint32_t)number;
  te.repeat = (uint32_t)repeat;
  te.repeats_to_cooldown = (uint32_t)repeats_to_cooldown;
  te.min_repeat_ms = (double)min_repeat_ms;
  te.cooldown_interval_ms = (double)cooldown_interval_ms;
  TVMFunctionHandle func = NULL;
  int err = TVMModGetFunction(args[0].v_handle, args[1].v_str, 1, &func);
  if (err != 0) {
    return err;
  }
  if (func == NULL) {
    TVMAPIErrorf("runtime.RPCTimeEvaluator: no function named %s in the module", args[1].v_str);
    return kTvmErrorFunctionNameNotFound;
  }
  te.func = func;
  g_last_k = (uint16_t)(g_last_k >= 0x7fffu ? 1u : g_last_k + 1u); /* 1..0x7fff, cycling */
  te.k = g_last_k;
  g_evaluator = te;
  out_ret_value->v_handle = TVMCrtModule_FunctionHandle(kTimeEvaluatorModuleIndex, te.k);
  *out_ret_tcode = kTVMPackedFuncHandle;
  return 0;
}

/* Release what a timed call returned, so repeated calls do not leak. */
static void discard_result(TVMValue* value, int tcode) {
  if (tcode == kTVMBytes) {
    TVMByteArrayFree((TVMByteArray*)value->v_handle);
  } else if (tcode == kTVMNDArrayHandle) {
    TVMArrayFree((TVMArrayHandle)value->v_handle);
  }
}

static int call_once(TVMValue* args, int* type_codes, int num_args) {
  TVMValue ret;
  int ret_tcode = kTVMNullptr;
  int err = TVMFuncCall(g_evaluator.func, args, type_codes, num_args, &ret, &ret_tcode);
  if (err == 0) {
    discard_result(&ret, ret_tcode);
  }
  return err;
}

/* Idle for ms milliseconds, measured with the platform timer. */
static tvm_crt_error_t cooldown(double ms) {
  double waited = 0;
  while (waited * 1000.0 < ms) {
    double elapsed = 0;
    tvm_crt_error_t err = TVMPlatformTimerStart();
    if (err == kTvmErrorNoError) {
      err = TVMPlatformTimerStop(&elapsed);
    }
    if (err != kTvmErrorNoError) {
      return err;
    }
    waited += elapsed;
  }
  return kTvmErrorNoError;
}

static int platform_failed(const char* hook, int err) {
  TVMAPIErrorf("runtime.RPCTimeEvaluator: %s failed (0x%x)", hook, (unsigned)err);
  return err;
}

/* One timed batch of `number` calls; *elapsed_seconds receives its duration. */
static int timed_batch(uint32_t number, TVMValue* args, int* type_codes, int num_args,
                       double* elapsed_seconds) {
  int err = TVMPlatformBeforeMeasurement();
  if (err != 0) {
    return platform_failed("TVMPlatformBeforeMeasurement", err);
  }
  err = TVMPlatformTimerStart();
  if (err != 0) {
    TVMPlatformAfterMeasurement();
    return platform_failed("TVMPlatformTimerStart", err);
  }
  int call_err = 0;
  for (uint32_t i = 0; i < number && call_err == 0; i++) {
    call_err = call_once(args, type_codes, num_args);
  }
  err = TVMPlatformTimerStop(elapsed_seconds);
  int after_err = TVMPlatformAfterMeasurement();
  if (call_err != 0) {
    return call_err;
  }
  if (err != 0) {
    return platform_failed("TVMPlatformTimerStop", err);
  }
  if (after_err != 0) {
    return platform_failed("TVMPlatformAfterMeasurement", after_err);
  }
  return 0;
}

static int Call(uint16_t k, TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                int* out_ret_tcode) {
  if (k == 0 || k != g_evaluator.k) {
    TVMAPISetLastError("time evaluator handle is stale or invalid; call RPCTimeEvaluator again");
    return kTvmErrorTimeEvaluatorBadHandle;
  }
  TimeEvaluator te = g_evaluator;
  size_t result_bytes = sizeof(double) * (size_t)te.repeat;
  void* mem = NULL;
  DLDevice cpu = {kDLCPU, 0};
  int err = TVMPlatformMemoryAllocate(sizeof(TVMByteArray) + result_bytes, cpu, &mem);
  if (err != 0) {
    TVMAPIErrorf("runtime.RPCTimeEvaluator: no memory for %lu results", (unsigned long)te.repeat);
    return err;
  }
  TVMByteArray* result = (TVMByteArray*)mem;
  char* data = (char*)mem + sizeof(TVMByteArray);
  result->data = data;
  result->size = result_bytes;

  err = call_once(args, type_codes, num_args); /* warm-up */
  uint32_t number = te.number;
  for (uint32_t r = 0; r < te.repeat && err == 0; r++) {
    double elapsed = 0;
    double elapsed_ms = 0; /* elapsed * 1000.0, computed once per batch */
    int64_t zero_batches = 0;
    for (;;) {
      if (elapsed_ms > 0) {
        double per_call_ms = elapsed_ms / (double)number;
        double wanted = te.min_repeat_ms / per_call_ms + 1.0;
        double grown = (double)number * 1.618;
        double next = wanted > grown ? wanted : grown;
        number = next >= (double)kMaxNumber ? (uint32_t)kMaxNumber : (uint32_t)next;
      }
      err = timed_batch(number, args, type_codes, num_args, &elapsed);
      if (err != 0) {
        break;
      }
      if (elapsed <= 0) {
        elapsed = 0;
        zero_batches++;
      }
      elapsed_ms = elapsed * 1000.0;
      if (!(elapsed_ms < te.min_repeat_ms &&
            zero_batches < te.limit_zero_time_iterations)) {
        break;
      }
    }
    if (err != 0) {
      break;
    }
    double seconds_per_call = elapsed / (double)number;
    memcpy(data + sizeof(double) * (size_t)r, &seconds_per_call, sizeof(double));
    if (te.cooldown_interval_ms > 0 && r % te.repeats_to_cooldown == 0) {
      err = cooldown(te.cooldown_interval_ms);
    }
  }
  if (err != 0) {
    TVMPlatformMemoryFree(mem, cpu);
    return err;
  }
  out_ret_value->v_handle = result;
  *out_ret_tcode = kTVMBytes;
  return 0;
}

static int Release(uint16_t k) {
  if (k != 0 && k == g_evaluator.k) {
    g_evaluator.k = 0;
  }
  return 0;
}

static TVMCrtFunctionSpace g_evaluator_handles = {kTimeEvaluatorModuleIndex, Call, Release, NULL};

tvm_crt_error_t TVMCrtTimeEvaluator_Register(void) {
  static int registered;
  tvm_crt_error_t err = kTvmErrorNoError;
  if (!registered) {
    err = TVMCrtModule_RegisterFunctionSpace(&g_evaluator_handles);
    if (err == kTvmErrorNoError) {
      err = TVMCrtRuntime_RegisterGlobal("runtime.RPCTimeEvaluator", Create, 0);
    }
    registered = err == kTvmErrorNoError;
  }
  return err;
}

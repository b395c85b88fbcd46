/*
 * Host-driven "device" for the host template: an RPC server on stdin/stdout.
 *
 * The host (project_api.micro.Session) speaks the microTVM RPC protocol over this process's
 * stdin and stdout; its stderr carries human-readable diagnostics only. Calling the global
 * "tvm.testing.reset_server" re-executes the program, which is how tests simulate a device reset.
 *
 * Throughput: output is collected in a buffer and written out before the loop waits for input
 * again (so a reply never waits in it), the framer's many small writes become a few large
 * ones, and on Linux both pipes are enlarged so a megabyte frame passes without stalls.
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* F_SETPIPE_SZ */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

/*! Bytes read from stdin per read(): whatever is available, up to this much. */
#ifndef TVM_HOST_READ_CHUNK_BYTES
#define TVM_HOST_READ_CHUNK_BYTES (256 * 1024)
#endif
/*! Output collected before it is written to stdout (larger writes go out directly). */
#ifndef TVM_HOST_WRITE_BUFFER_BYTES
#define TVM_HOST_WRITE_BUFFER_BYTES (256 * 1024)
#endif
/*! Pipe size asked for on stdin and stdout when they are pipes or FIFOs (Linux; best effort). */
#ifndef TVM_HOST_PIPE_BYTES
#define TVM_HOST_PIPE_BYTES (1024 * 1024)
#endif

static uint8_t g_host_model_workspace[TVM_HOST_MODEL_WORKSPACE_BYTES] __attribute__((aligned(16)));
static uint8_t g_host_read_buffer[TVM_HOST_READ_CHUNK_BYTES];
static uint8_t g_host_write_buffer[TVM_HOST_WRITE_BUFFER_BYTES];
static size_t g_host_write_pending;
static char** g_host_argv;

/* Write all of data to stdout; -1 on error (the host went away). */
static int host_write_all(const uint8_t* data, size_t num_bytes) {
  size_t written = 0;
  while (written < num_bytes) {
    ssize_t n = write(STDOUT_FILENO, data + written, num_bytes - written);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    if (n == 0) {
      return -1;
    }
    written += (size_t)n;
  }
  return 0;
}

/* Write out the buffered output. A failed write drops it: the next read sees the host gone. */
static void host_flush(void) {
  size_t pending = g_host_write_pending;
  g_host_write_pending = 0;
  if (pending > 0 && host_write_all(g_host_write_buffer, pending) != 0) {
    fprintf(stderr, "microTVM host device: write to the host failed: %s\n", strerror(errno));
  }
}

static ssize_t host_write_stdout(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  if (num_bytes > sizeof(g_host_write_buffer) - g_host_write_pending) {
    host_flush();
  }
  if (num_bytes >= sizeof(g_host_write_buffer)) {
    return host_write_all(data, num_bytes) == 0 ? (ssize_t)num_bytes : -1;
  }
  memcpy(g_host_write_buffer + g_host_write_pending, data, num_bytes);
  g_host_write_pending += num_bytes;
  return (ssize_t)num_bytes;
}

static void host_enlarge_pipes(void) {
#ifdef F_SETPIPE_SZ
  /* Fails harmlessly on a terminal, a file or above /proc/sys/fs/pipe-max-size. */
  (void)fcntl(STDIN_FILENO, F_SETPIPE_SZ, TVM_HOST_PIPE_BYTES);
  (void)fcntl(STDOUT_FILENO, F_SETPIPE_SZ, TVM_HOST_PIPE_BYTES);
#endif
}

static int host_reset_server(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value,
                             int* ret_type_code, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)ret_value;
  (void)ret_type_code;
  (void)resource_handle;
  fprintf(stderr, "microTVM host device: reset requested, re-executing %s\n", g_host_argv[0]);
  host_flush();
  execv(g_host_argv[0], g_host_argv);
  fprintf(stderr, "microTVM host device: execv failed: %s\n", strerror(errno));
  TVMAPISetLastError("tvm.testing.reset_server: execv failed");
  return -1;
}

/* Framing and session errors come from bytes on the line (noise, a host restarting a session);
 * the server has already dropped the bad packet, so the device keeps listening. */
static int host_error_is_recoverable(tvm_crt_error_t err) {
  unsigned category = ((unsigned)err >> 8) & 0xffu;
  return err == kTvmErrorNoError || category == 2u || category == 4u;
}

int main(int argc, char** argv) {
  microtvm_rpc_server_t server;
  tvm_crt_error_t err;
  (void)argc;
  g_host_argv = argv;

  /* A host that goes away must show up as a write error, not kill us silently mid-reply. */
  signal(SIGPIPE, SIG_IGN);
  host_enlarge_pipes();
  atexit(host_flush); /* whatever was answered before an exit still goes out */

  err = TVMPlatformInitialize();
  if (err != kTvmErrorNoError) {
    fprintf(stderr, "microTVM host device: platform init failed: 0x%08x\n", (unsigned)err);
    return 2;
  }
  err = TVMBackendWorkspaceInit(g_host_model_workspace, sizeof(g_host_model_workspace));
  if (err != kTvmErrorNoError) {
    fprintf(stderr, "microTVM host device: workspace init failed: 0x%08x\n", (unsigned)err);
    return 2;
  }
  server = MicroTVMRpcServerInit(host_write_stdout, NULL);
  if (server == NULL) {
    fprintf(stderr, "microTVM host device: RPC server init failed\n");
    return 2;
  }
  if (TVMFuncRegisterGlobal("tvm.testing.reset_server", (TVMFunctionHandle)&host_reset_server,
                            0) != 0) {
    fprintf(stderr, "microTVM host device: cannot register tvm.testing.reset_server\n");
    return 2;
  }

  for (;;) {
    uint8_t* data;
    size_t data_size_bytes;
    ssize_t n;
    host_flush(); /* everything answered so far goes out before we wait */
    n = read(STDIN_FILENO, g_host_read_buffer, sizeof(g_host_read_buffer));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      fprintf(stderr, "microTVM host device: read failed: %s\n", strerror(errno));
      return 2;
    }
    if (n == 0) {
      fprintf(stderr, "microTVM host device: end of input, exiting\n");
      return 0;
    }
    data = g_host_read_buffer;
    data_size_bytes = (size_t)n;
    while (data_size_bytes > 0) {
      size_t before = data_size_bytes;
      err = MicroTVMRpcServerLoop(server, &data, &data_size_bytes);
      if (err == kTvmErrorPlatformShutdown) {
        host_flush();
        fprintf(stderr, "microTVM host device: shutdown requested, exiting\n");
        return 0;
      }
      if (!host_error_is_recoverable(err)) {
        fprintf(stderr, "microTVM host device: RPC server error 0x%08x, exiting\n", (unsigned)err);
        return 2;
      }
      if (data_size_bytes == before) {
        if (err == kTvmErrorNoError) {
          fprintf(stderr, "microTVM host device: RPC server consumed no input, exiting\n");
          return 2;
        }
        /* No progress on an error: drop one byte so noise can never stall the loop. */
        data++;
        data_size_bytes--;
      }
    }
  }
}

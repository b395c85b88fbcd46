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
 *
 * Lifetime: the device dies with the process that started it (the template server). On Linux
 * the kernel sends it SIGTERM when that process exits (PR_SET_PDEATHSIG), even in the middle of
 * a long request such as a time evaluator run of a billion iterations; elsewhere, and with
 * -DTVM_HOST_PARENT_POLL=1, it waits for input with poll() and checks getppid() whenever the
 * wait times out or returns (a request that is running is finished first). It also exits,
 * with status 0, at end of input, on EIO from stdin and when writing to stdout fails: the
 * host's end of the link is gone. Status 2 means a start-up or internal error.
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* F_SETPIPE_SZ */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

/*! Bytes read from the link per read(): whatever is available, up to this much. */
#ifndef TVM_RPC_READ_CHUNK_BYTES
#define TVM_RPC_READ_CHUNK_BYTES (256 * 1024)
#endif
/*! Output collected before it is written to the link (larger writes go out directly). */
#ifndef TVM_RPC_WRITE_BUFFER_BYTES
#define TVM_RPC_WRITE_BUFFER_BYTES (256 * 1024)
#endif
/*! Pipe size asked for on stdin and stdout when they are pipes or FIFOs (Linux; best effort). */
#ifndef TVM_HOST_PIPE_BYTES
#define TVM_HOST_PIPE_BYTES (1024 * 1024)
#endif
/*! 1: notice the parent's death by polling getppid() while waiting for input; 0: by
 * PR_SET_PDEATHSIG (Linux only, the default there). */
#ifndef TVM_HOST_PARENT_POLL
#ifdef __linux__
#define TVM_HOST_PARENT_POLL 0
#else
#define TVM_HOST_PARENT_POLL 1
#endif
#endif
/*! With TVM_HOST_PARENT_POLL: the longest wait for input between two getppid() checks. */
#ifndef TVM_HOST_PARENT_POLL_MS
#define TVM_HOST_PARENT_POLL_MS 500
#endif

#if TVM_RPC_READ_CHUNK_BYTES < 1 || TVM_RPC_READ_CHUNK_BYTES > (64 * 1024 * 1024)
#error "TVM_RPC_READ_CHUNK_BYTES must be between 1 and 64 MiB"
#endif
#if TVM_RPC_WRITE_BUFFER_BYTES < 64 || TVM_RPC_WRITE_BUFFER_BYTES > (64 * 1024 * 1024)
#error "TVM_RPC_WRITE_BUFFER_BYTES must be between 64 and 64 MiB"
#endif
#if TVM_HOST_PIPE_BYTES < 4096 || TVM_HOST_PIPE_BYTES > (256 * 1024 * 1024)
#error "TVM_HOST_PIPE_BYTES must be between 4096 and 256 MiB"
#endif
#if TVM_HOST_PARENT_POLL != 0 && TVM_HOST_PARENT_POLL != 1
#error "TVM_HOST_PARENT_POLL must be 0 or 1"
#endif
#if !TVM_HOST_PARENT_POLL && !defined(__linux__)
#error "TVM_HOST_PARENT_POLL=0 needs Linux (PR_SET_PDEATHSIG)"
#endif
#if TVM_HOST_PARENT_POLL_MS < 10 || TVM_HOST_PARENT_POLL_MS > 60000
#error "TVM_HOST_PARENT_POLL_MS must be between 10 and 60000"
#endif

/*! read() result of host_read when the parent died. */
#define HOST_PARENT_GONE (-2)

static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES] __attribute__((aligned(16)));
static uint8_t g_read_buffer[TVM_RPC_READ_CHUNK_BYTES];
static uint8_t g_write_buffer[TVM_RPC_WRITE_BUFFER_BYTES];
static size_t g_write_pending;
static int g_host_write_errno; /* errno of the first failed write to stdout; 0: none */
static pid_t g_host_parent;
static char** g_host_argv;
static TVMCrtRpcServerStats g_stats;

/* Write all of data to stdout; -1 (and g_host_write_errno set) on error: the host went away. */
static int host_write_all(const uint8_t* data, size_t num_bytes) {
  size_t written = 0;
  while (written < num_bytes && g_host_write_errno == 0) {
    ssize_t n = write(STDOUT_FILENO, data + written, num_bytes - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      g_host_write_errno = n < 0 ? errno : EPIPE;
      break;
    }
    written += (size_t)n;
  }
  return g_host_write_errno == 0 ? 0 : -1;
}

/* Write out the buffered output. After a failed write nothing more goes out: the main loop
 * sees g_host_write_errno and exits. */
static void host_flush(void) {
  size_t pending = g_write_pending;
  g_write_pending = 0;
  if (pending > 0) {
    (void)host_write_all(g_write_buffer, pending);
  }
}

static ptrdiff_t host_write_stdout(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  if (num_bytes > sizeof(g_write_buffer) - g_write_pending) {
    host_flush();
  }
  if (num_bytes >= sizeof(g_write_buffer)) {
    return host_write_all(data, num_bytes) == 0 ? (ptrdiff_t)num_bytes : -1;
  }
  memcpy(g_write_buffer + g_write_pending, data, num_bytes);
  g_write_pending += num_bytes;
  return (ptrdiff_t)num_bytes;
}

static void host_enlarge_pipes(void) {
#ifdef F_SETPIPE_SZ
  /* Fails harmlessly on a terminal, a file or above /proc/sys/fs/pipe-max-size. */
  (void)fcntl(STDIN_FILENO, F_SETPIPE_SZ, TVM_HOST_PIPE_BYTES);
  (void)fcntl(STDOUT_FILENO, F_SETPIPE_SZ, TVM_HOST_PIPE_BYTES);
#endif
}

/* Die with the process that started us. 0, or -1 if it is already gone. */
static int host_follow_parent(void) {
  g_host_parent = getppid();
#if !TVM_HOST_PARENT_POLL
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
    fprintf(stderr, "microTVM host device: PR_SET_PDEATHSIG failed: %s\n", strerror(errno));
  }
#endif
  /* The parent may have died before the request took effect: then no signal comes. */
  return getppid() == g_host_parent ? 0 : -1;
}

/* read() from stdin, restarted on EINTR; HOST_PARENT_GONE once the parent died (polling). */
static ssize_t host_read(uint8_t* buffer, size_t size_bytes) {
  for (;;) {
    ssize_t n;
#if TVM_HOST_PARENT_POLL
    struct pollfd input = {STDIN_FILENO, POLLIN, 0};
    int ready = poll(&input, 1, TVM_HOST_PARENT_POLL_MS);
    if (getppid() != g_host_parent) {
      return HOST_PARENT_GONE;
    }
    if (ready == 0 || (ready < 0 && errno == EINTR)) {
      continue; /* timed out: look again */
    }
#endif
    n = read(STDIN_FILENO, buffer, size_bytes);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    return n;
  }
}

/* Why the device stops, with what the server recovered from on the way; returns status. */
static int host_exit(int status, const char* why) {
  host_flush();
  fprintf(stderr,
          "microTVM host device: %s, exiting (%lu bytes in, %lu line errors recovered, "
          "%lu bytes dropped)\n",
          why, (unsigned long)g_stats.bytes_consumed, (unsigned long)g_stats.errors_recovered,
          (unsigned long)g_stats.bytes_dropped);
  return status;
}

static int host_reset_server(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_value,
                             int* ret_type_code, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)resource_handle;
  ret_value->v_handle = NULL;
  *ret_type_code = kTVMNullptr;
  if (num_args != 0) {
    TVMAPISetLastError("tvm.testing.reset_server takes no arguments");
    return -1;
  }
  fprintf(stderr, "microTVM host device: reset requested, re-executing %s\n", g_host_argv[0]);
  host_flush();
  execv(g_host_argv[0], g_host_argv);
  fprintf(stderr, "microTVM host device: execv failed: %s\n", strerror(errno));
  TVMAPISetLastError("tvm.testing.reset_server: execv failed");
  return -1;
}

/* Start-up failure: say which step, with its error code. */
static int host_init_failed(const char* what, unsigned code) {
  fprintf(stderr, "microTVM host device: %s failed: 0x%08x\n", what, code);
  return 2;
}

int main(int argc, char** argv) {
  microtvm_rpc_server_t server;
  tvm_crt_error_t err;
  (void)argc;
  g_host_argv = argv;

  if (host_follow_parent() != 0) {
    return host_exit(0, "the process that started us is already gone");
  }
  /* A host that goes away must show up as a write error, not kill us silently mid-reply. */
  signal(SIGPIPE, SIG_IGN);
  host_enlarge_pipes();
  atexit(host_flush); /* whatever was answered before an exit still goes out */

  err = TVMPlatformInitialize();
  if (err != kTvmErrorNoError) {
    return host_init_failed("platform init", (unsigned)err);
  }
  err = TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace));
  if (err != kTvmErrorNoError) {
    return host_init_failed("workspace init", (unsigned)err);
  }
  server = MicroTVMRpcServerInit(host_write_stdout, NULL);
  if (TVMFuncRegisterGlobal("tvm.testing.reset_server", (TVMFunctionHandle)&host_reset_server,
                            0) != 0) {
    return host_init_failed("registering tvm.testing.reset_server", 0);
  }

  for (;;) {
    ssize_t n;
    host_flush(); /* everything answered so far goes out before we wait */
    if (g_host_write_errno != 0) {
      fprintf(stderr, "microTVM host device: write to the host failed: %s\n",
              strerror(g_host_write_errno));
      return host_exit(0, "the host's end of the link is gone");
    }
    n = host_read(g_read_buffer, sizeof(g_read_buffer));
    if (n == HOST_PARENT_GONE) {
      return host_exit(0, "the process that started us is gone");
    }
    if (n == 0) {
      return host_exit(0, "end of input");
    }
    if (n < 0) {
      if (errno == EIO) {
        return host_exit(0, "the host's end of the link is gone (EIO)");
      }
      fprintf(stderr, "microTVM host device: read failed: %s\n", strerror(errno));
      return host_exit(2, "cannot read the link");
    }
    err = TVMCrtRpcServer_Feed(server, g_read_buffer, (size_t)n, &g_stats);
    if (err == kTvmErrorPlatformShutdown) {
      return host_exit(0, "shutdown requested");
    }
    if (err != kTvmErrorNoError) {
      fprintf(stderr, "microTVM host device: RPC server error 0x%08x\n", (unsigned)err);
      return host_exit(2, "fatal server error");
    }
  }
}

/*
 * Standalone "device" for the host template: runs the model once per invocation, no RPC.
 *
 *   build/main [-m MODULE] [-r REPEAT] [-o OUT_DIR] [INPUT.bin ...]
 *
 * Each INPUT.bin holds the raw bytes of one input, in the model's input order; with no INPUT
 * arguments the files are input0.bin, input1.bin, ... in the current directory. Outputs are written
 * as OUT_DIR/output0.bin, output1.bin, ... (OUT_DIR defaults to "."). The model runs REPEAT times
 * (default 1) and the wall-clock time per run is printed. Links only the TVM backend library.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#define TVM_STANDALONE_MAX_TENSORS 64
#define TVM_STANDALONE_PATH_BYTES 4096

static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES] __attribute__((aligned(16)));

static void usage(const char* argv0) {
  fprintf(stderr, "usage: %s [-m MODULE] [-r REPEAT] [-o OUT_DIR] [INPUT.bin ...]\n", argv0);
}

static int read_exact(const char* path, void* data, size_t size_bytes) {
  FILE* f = fopen(path, "rb");
  size_t got;
  int extra;
  if (f == NULL) {
    fprintf(stderr, "error: cannot open input %s: %s\n", path, strerror(errno));
    return -1;
  }
  got = fread(data, 1, size_bytes, f);
  extra = fgetc(f);
  fclose(f);
  if (got != size_bytes || extra != EOF) {
    fprintf(stderr, "error: %s must hold exactly %zu bytes; write the raw tensor bytes\n", path,
            size_bytes);
    return -1;
  }
  return 0;
}

static int write_all(const char* path, const void* data, size_t size_bytes) {
  FILE* f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "error: cannot create output %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (fwrite(data, 1, size_bytes, f) != size_bytes || fclose(f) != 0) {
    fprintf(stderr, "error: cannot write output %s\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* module_name = "default";
  const char* out_dir = ".";
  long repeat = 1;
  int first_input = argc;
  int i;
  size_t k;
  const TVMCrtAotModel* model;
  void* inputs[TVM_STANDALONE_MAX_TENSORS];
  void* outputs[TVM_STANDALONE_MAX_TENSORS];
  char path[TVM_STANDALONE_PATH_BYTES];
  double total_seconds = 0.0;
  double best_seconds = 0.0;
  tvm_crt_error_t err;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
      module_name = argv[++i];
    } else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
      char* end;
      repeat = strtol(argv[++i], &end, 10);
      if (*end != '\0' || repeat < 1) {
        fprintf(stderr, "error: -r wants a positive integer, got %s\n", argv[i]);
        return 1;
      }
    } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (argv[i][0] == '-') {
      usage(argv[0]);
      return 1;
    } else {
      first_input = i;
      break;
    }
  }

  model = TVMCrtAotModel_Lookup(module_name);
  if (model == NULL) {
    fprintf(stderr, "error: this build holds no model module named '%s'\n", module_name);
    return 1;
  }
  if (model->num_inputs > TVM_STANDALONE_MAX_TENSORS || model->num_outputs > TVM_STANDALONE_MAX_TENSORS) {
    fprintf(stderr, "error: model %s has more than %d inputs or outputs\n", model->name,
            TVM_STANDALONE_MAX_TENSORS);
    return 1;
  }
  if (first_input < argc && (size_t)(argc - first_input) != model->num_inputs) {
    fprintf(stderr, "error: model %s takes %zu inputs; %d files were given\n", model->name,
            model->num_inputs, argc - first_input);
    return 1;
  }

  err = TVMPlatformInitialize();
  if (err == kTvmErrorNoError) {
    err = TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace));
  }
  if (err != kTvmErrorNoError) {
    fprintf(stderr, "error: platform/workspace init failed: 0x%08x\n", (unsigned)err);
    return 2;
  }

  for (k = 0; k < model->num_inputs; k++) {
    const TVMCrtAotTensor* t = &model->inputs[k];
    if (first_input < argc) {
      snprintf(path, sizeof(path), "%s", argv[first_input + (int)k]);
    } else {
      snprintf(path, sizeof(path), "input%zu.bin", k);
    }
    if (read_exact(path, t->data, t->size_bytes) != 0) {
      return 1;
    }
    inputs[k] = t->data;
  }
  for (k = 0; k < model->num_outputs; k++) {
    outputs[k] = model->outputs[k].data;
  }

  for (i = 0; i < repeat; i++) {
    double seconds;
    uint64_t start_cycles;
    uint64_t end_cycles;
    int32_t rc;
    if (TVMCrtPlatform_CycleCount(&start_cycles) != kTvmErrorNoError) {
      fprintf(stderr, "error: cannot read the cycle counter\n");
      return 2;
    }
    rc = model->run(inputs, outputs);
    if (TVMCrtPlatform_CycleCount(&end_cycles) != kTvmErrorNoError) {
      fprintf(stderr, "error: cannot read the cycle counter\n");
      return 2;
    }
    seconds = (double)(end_cycles - start_cycles) / (double)TVMCrtPlatform_CycleFrequencyHz();
    if (rc != 0) {
      fprintf(stderr, "error: model %s returned %d\n", model->name, (int)rc);
      return 2;
    }
    total_seconds += seconds;
    if (i == 0 || seconds < best_seconds) {
      best_seconds = seconds;
    }
  }

  for (k = 0; k < model->num_outputs; k++) {
    const TVMCrtAotTensor* t = &model->outputs[k];
    snprintf(path, sizeof(path), "%s/output%zu.bin", out_dir, k);
    if (write_all(path, t->data, t->size_bytes) != 0) {
      return 1;
    }
    printf("output %zu (%s): %zu bytes -> %s\n", k, t->name, t->size_bytes, path);
  }
  printf("model %s: %ld run(s), mean %.3f us, best %.3f us\n", model->name, repeat,
         total_seconds / (double)repeat * 1e6, best_seconds * 1e6);
  return 0;
}

/*
 * Standalone firmware (project type "standalone"): no RPC; runs every model of the firmware once
 * through the ai_ API (src/ai/ai_runtime.h) on its known input (src/ai/ai_sample.c, drawn from a
 * seed at generate time) and prints, over the UART, one line per fact:
 *
 *   ai: models <n> seed <seed> shared_pool <0|1>
 *   ai: model <name> source <name> archive <file> version <text> activations <bytes> weights <bytes>
 *   ai: quant <model> <input|output> <i> axis <a> count <n> <scale bits hex>/<zero point> ...
 *   ai: input <model> <i> <hex bytes>
 *   ai: output <model> <i> <hex bytes>
 *   ai: error <model> <message>
 *   ai: done <failures>
 *
 * then idles (Zephyr build of the same sample as the stm32 template's).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#include "ai/ai_models.h"
#include "ai/ai_runtime.h"
#include "ai/ai_sample.h"
#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>

static const struct device* const g_uart = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));

static void UartWrite(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; i++) {
    uart_poll_out(g_uart, data[i]);
  }
}

static void Print(const char* text) { UartWrite((const uint8_t*)text, strlen(text)); }

static void PrintHex(const char* head, const char* model, uint32_t index, const void* data,
                     size_t size) {
  static const char digits[] = "0123456789abcdef";
  char line[96];
  const uint8_t* p = (const uint8_t*)data;
  size_t i;
  (void)snprintf(line, sizeof(line), "ai: %s %s %lu ", head, model, (unsigned long)index);
  Print(line);
  for (i = 0; i < size; i++) {
    char pair[2];
    pair[0] = digits[p[i] >> 4];
    pair[1] = digits[p[i] & 15u];
    UartWrite((const uint8_t*)pair, 2);
  }
  Print("\n");
}

static void PrintQuant(const char* model, const char* kind, uint32_t index, const ai_tensor* t) {
  const ai_quantization_info* q = ai_get_quantization(t);
  char text[48];
  uint32_t c;
  if (q == NULL) {
    return;
  }
  (void)snprintf(text, sizeof(text), "ai: quant %s %s %lu ", model, kind, (unsigned long)index);
  Print(text);
  (void)snprintf(text, sizeof(text), "axis %ld count %lu", (long)q->axis, (unsigned long)q->count);
  Print(text);
  for (c = 0; c < q->count; c++) {
    uint32_t bits;
    memcpy(&bits, &q->scale[c], sizeof(bits));
    (void)snprintf(text, sizeof(text), " %08lx/%ld", (unsigned long)bits, (long)q->zero_point[c]);
    Print(text);
  }
  Print("\n");
}

static int RunModel(const ai_sample* sample) {
  const ai_model_info* info = sample->info;
  ai_handle handle = NULL;
  char line[192];
  uint32_t i;
  (void)snprintf(line, sizeof(line),
                 "ai: model %s source %s archive %s version %s activations %lu weights %lu\n",
                 info->name, info->source_name, info->archive, info->version,
                 (unsigned long)info->activations_size, (unsigned long)info->weights_size);
  Print(line);
  if (ai_create(info, sample->pool, sample->pool_size, &handle) != AI_STATUS_OK) {
    (void)snprintf(line, sizeof(line), "ai: error %s %s\n", info->name, ai_get_error(NULL));
    Print(line);
    return 1;
  }
  for (i = 0; i < ai_get_input_size(handle); i++) {
    ai_tensor* t = ai_get_input(handle, i);
    memcpy(t->data, sample->inputs[i], t->size_bytes);
    PrintQuant(info->name, "input", i, t);
    PrintHex("input", info->name, i, t->data, t->size_bytes);
  }
  if (ai_run(handle) != AI_STATUS_OK) {
    (void)snprintf(line, sizeof(line), "ai: error %s %s\n", info->name, ai_get_error(handle));
    Print(line);
    (void)ai_destroy(handle);
    return 1;
  }
  for (i = 0; i < ai_get_output_size(handle); i++) {
    const ai_tensor* t = ai_get_output(handle, i);
    PrintQuant(info->name, "output", i, t);
    PrintHex("output", info->name, i, t->data, t->size_bytes);
  }
  return ai_destroy(handle) == AI_STATUS_OK ? 0 : 1;
}

int main(void) {
  char line[96];
  int failures = 0;
  size_t k = 0;
  ai_model_iterator it;

  if (!device_is_ready(g_uart) || TVMPlatformInitialize() != 0) {
    TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
  }
  (void)snprintf(line, sizeof(line), "ai: models %lu seed %lu shared_pool %d\n",
                 (unsigned long)(ai_model_iterator_end() - ai_model_iterator_begin()),
                 (unsigned long)AI_SAMPLE_SEED, AI_SAMPLE_SHARED_POOL);
  Print(line);
  for (it = ai_model_iterator_begin(); it != ai_model_iterator_end();
       it = ai_model_iterator_next(it), k++) {
    failures += RunModel(&ai_samples[k]);
  }
  (void)snprintf(line, sizeof(line), "ai: done %d\n", failures);
  Print(line);
  for (;;) {
    k_sleep(K_FOREVER);
  }
  return 0;
}

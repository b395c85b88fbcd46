/*
 * Host unit driver of the generated ai_ API (project_api/template/jinja/ai_runtime.*.j2), built
 * by tests/test_ai_api.py with cc -std=c99 -Wall -Wextra -Werror and ASan+UBSan against the
 * generated ai_models.c / ai_sample.c / model_glue.c of a project holding real emitted models.
 * Prints one "key: value" line per fact and check; exit status 0 when every CHECK held.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>

#include "ai_models.h"
#include "ai_runtime.h"
#include "ai_sample.h"

static int g_failed;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      printf("FAILED: %s (line %d)\n", #cond, __LINE__);               \
      g_failed = 1;                                                    \
    }                                                                  \
  } while (0)

static void print_hex(const char* key, const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  size_t i;
  printf("%s: ", key);
  for (i = 0; i < n; i++) {
    printf("%02x", p[i]);
  }
  printf("\n");
}

static void print_quant(const char* model, const char* kind, uint32_t i, const ai_tensor* t) {
  const ai_quantization_info* q = ai_get_quantization(t);
  uint32_t c;
  if (q == NULL) {
    printf("quant %s %s %lu: none\n", model, kind, (unsigned long)i);
    return;
  }
  printf("quant %s %s %lu: axis %ld count %lu", model, kind, (unsigned long)i, (long)q->axis,
         (unsigned long)q->count);
  for (c = 0; c < q->count; c++) {
    uint32_t bits;
    memcpy(&bits, &q->scale[c], sizeof(bits));
    printf(" %08lx/%ld", (unsigned long)bits, (long)q->zero_point[c]);
  }
  printf("\n");
}

static AI_ALIGNED(AI_ACTIVATIONS_ALIGNMENT) uint8_t g_big_pool[AI_MAX_ACTIVATIONS_SIZE + 64];

/* Linked with -Wl,--wrap=tvmgen_default_run: while the model runs, try ai_run of another
 * handle and ai_destroy of it (both must be refused: ai_run is not reentrant). */
static ai_handle g_reenter;
static ai_status g_reenter_run = AI_STATUS_OK, g_reenter_destroy = AI_STATUS_OK;
static char g_reenter_error[AI_ERROR_BYTES];
int32_t __real_tvmgen_default_run(void* inputs, void* outputs);
int32_t __wrap_tvmgen_default_run(void* inputs, void* outputs);
int32_t __wrap_tvmgen_default_run(void* inputs, void* outputs) {
  if (g_reenter != NULL) {
    g_reenter_run = ai_run(g_reenter);
    snprintf(g_reenter_error, sizeof(g_reenter_error), "%s", ai_get_error(g_reenter));
    g_reenter_destroy = ai_destroy(g_reenter);
  }
  return __real_tvmgen_default_run(inputs, outputs);
}

static void reentrancy(const ai_model_info* info) {
  ai_handle outer = NULL;
  static AI_ALIGNED(AI_ACTIVATIONS_ALIGNMENT) uint8_t other[AI_MAX_ACTIVATIONS_SIZE];
  CHECK(ai_create(info, g_big_pool, sizeof(g_big_pool), &outer) == AI_STATUS_OK);
  CHECK(ai_create(info, other, sizeof(other), &g_reenter) == AI_STATUS_OK);
  CHECK(ai_run(outer) == AI_STATUS_OK);
  CHECK(g_reenter_run == AI_STATUS_ERROR && g_reenter_destroy == AI_STATUS_ERROR);
  printf("error reentrant: %s\n", g_reenter_error);
  CHECK(ai_destroy(g_reenter) == AI_STATUS_OK);
  g_reenter = NULL;
  CHECK(ai_destroy(outer) == AI_STATUS_OK);
}

static void error_paths(void) {
  const ai_model_info* info = ai_model_iterator_value(ai_model_iterator_begin());
  ai_handle h = (ai_handle)&g_failed;
  ai_handle handles[AI_MAX_NETWORKS + 1];
  size_t i;

  CHECK(ai_create(info, g_big_pool, sizeof(g_big_pool), NULL) == AI_STATUS_ERROR);
  printf("error create null handle: %s\n", ai_get_error(NULL));
  CHECK(ai_create(NULL, g_big_pool, sizeof(g_big_pool), &h) == AI_STATUS_ERROR && h == NULL);
  printf("error create null info: %s\n", ai_get_error(NULL));
  CHECK(ai_create(info, NULL, 0, &h) == AI_STATUS_ERROR && h == NULL);
  printf("error create null pool: %s\n", ai_get_error(NULL));
  CHECK(ai_create(info, g_big_pool, info->activations_size - 1, &h) == AI_STATUS_ERROR);
  printf("error create small pool: %s\n", ai_get_error(NULL));
  CHECK(ai_create(info, g_big_pool + 1, sizeof(g_big_pool) - 1, &h) == AI_STATUS_ERROR);
  printf("error create misaligned pool: %s\n", ai_get_error(NULL));

  CHECK(ai_run(NULL) == AI_STATUS_ERROR);
  printf("error run null: %s\n", ai_get_error(NULL));
  CHECK(ai_destroy(NULL) == AI_STATUS_ERROR);
  CHECK(ai_get_input(NULL, 0) == NULL && ai_get_output(NULL, 0) == NULL);
  CHECK(ai_get_input_size(NULL) == 0 && ai_get_output_size(NULL) == 0);
  CHECK(ai_get_info(NULL) == NULL);
  CHECK(ai_get_quantization(NULL) == NULL && ai_tensor_elements(NULL) == 0);
  printf("error null handle: %s\n", ai_get_error(NULL));

  CHECK(ai_create(info, g_big_pool, sizeof(g_big_pool), &h) == AI_STATUS_OK && h != NULL);
  CHECK(strcmp(ai_get_error(h), "") == 0);
  CHECK(ai_get_input(h, info->n_inputs) == NULL);
  printf("error input index: %s\n", ai_get_error(h));
  CHECK(ai_get_output(h, info->n_outputs + 7u) == NULL);
  printf("error output index: %s\n", ai_get_error(h));
  {
    ai_tensor* in = ai_get_input(h, 0);
    void* saved = in->data;
    in->data = NULL;
    CHECK(ai_run(h) == AI_STATUS_ERROR);
    printf("error input no data: %s\n", ai_get_error(h));
    in->data = saved;
  }
  CHECK(ai_run(h) == AI_STATUS_OK && strcmp(ai_get_error(h), "") == 0);
  CHECK(ai_destroy(h) == AI_STATUS_OK);
  CHECK(ai_run(h) == AI_STATUS_ERROR);
  printf("error destroyed: %s\n", ai_get_error(NULL));
  CHECK(ai_destroy(h) == AI_STATUS_ERROR);

  for (i = 0; i < AI_MAX_NETWORKS; i++) {
    CHECK(ai_create(info, g_big_pool, sizeof(g_big_pool), &handles[i]) == AI_STATUS_OK);
  }
  CHECK(ai_create(info, g_big_pool, sizeof(g_big_pool), &handles[AI_MAX_NETWORKS]) ==
        AI_STATUS_ERROR);
  printf("error exhausted: %s\n", ai_get_error(NULL));
  for (i = 0; i < AI_MAX_NETWORKS; i++) {
    CHECK(ai_destroy(handles[i]) == AI_STATUS_OK);
  }

  CHECK(ai_find_model("no such model") == NULL && ai_find_model(NULL) == NULL);
  CHECK(ai_model_iterator_value(ai_model_iterator_end()) == NULL);
  CHECK(ai_model_iterator_next(ai_model_iterator_end()) == ai_model_iterator_end());
  reentrancy(info);
}

int main(void) {
  ai_model_iterator it;
  size_t k = 0;
  printf("models: %lu\n", (unsigned long)(ai_model_iterator_end() - ai_model_iterator_begin()));
  for (it = ai_model_iterator_begin(); it != ai_model_iterator_end();
       it = ai_model_iterator_next(it), k++) {
    const ai_model_info* info = ai_model_iterator_value(it);
    const ai_sample* s = &ai_samples[k];
    ai_handle h = NULL;
    uint32_t i;
    char key[96];
    CHECK(info == s->info && ai_find_model(info->name) == info);
    printf("model %s: source %s archive %s version %s activations %lu workspace %lu weights %lu\n",
           info->name, info->source_name, info->archive, info->version,
           (unsigned long)info->activations_size, (unsigned long)info->workspace_size,
           (unsigned long)info->weights_size);
    CHECK(ai_create(info, s->pool, s->pool_size, &h) == AI_STATUS_OK);
    CHECK(ai_get_info(h) == info);
    CHECK(ai_get_input_size(h) == info->n_inputs && ai_get_output_size(h) == info->n_outputs);
    for (i = 0; i < info->n_inputs; i++) {
      ai_tensor* t = ai_get_input(h, i);
      CHECK(t->size_bytes >= ai_tensor_elements(t));
      memcpy(t->data, s->inputs[i], t->size_bytes);
      print_quant(info->name, "input", i, t);
    }
    memset(s->pool, 0xA5, s->pool_size);
    CHECK(ai_run(h) == AI_STATUS_OK);
    {
      /* The workspace came from this model's pool, and fitted in activations_size. */
      size_t peak = 0, touched = 0, b;
      TVMCrtWorkspace_Usage(NULL, &peak);
      for (b = 0; b < s->pool_size; b++) {
        touched += s->pool[b] != 0xA5;
      }
      printf("workspace %s: peak %lu touched %lu\n", info->name, (unsigned long)peak,
             (unsigned long)touched);
      CHECK(peak >= info->workspace_size && peak <= info->activations_size);
      CHECK(info->workspace_size == 0 || touched > 0);
    }
    for (i = 0; i < info->n_outputs; i++) {
      ai_tensor* t = ai_get_output(h, i);
      print_quant(info->name, "output", i, t);
      snprintf(key, sizeof(key), "output %s %lu", info->name, (unsigned long)i);
      print_hex(key, t->data, t->size_bytes);
    }
    CHECK(ai_destroy(h) == AI_STATUS_OK);
  }
  error_paths();
  printf("status: %s\n", g_failed ? "failed" : "ok");
  return g_failed;
}

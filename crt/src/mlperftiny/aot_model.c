/*
 * The MLPerf Tiny model over a generated TVMCrtAotModel (model_glue.c) and the quantization facts
 * of src/mlperftiny_model.c: db bytes in, dequantized results (or the reconstruction error) out.
 */
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/mlperftiny.h>

static int IsInt8(DLDataType t) { return t.code == kDLInt && t.bits == 8 && t.lanes == 1; }
static int IsFloat32(DLDataType t) { return t.code == kDLFloat && t.bits == 32 && t.lanes == 1; }

static float ReadFloatLE(const uint8_t* p) {
  uint32_t bits = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                  (uint32_t)p[3] << 24;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

static int8_t Quantize(float x, float scale, int32_t zero_point) {
  float q = x / scale;
  long r = (long)(q < 0 ? q - 0.5f : q + 0.5f) + (long)zero_point;
  return (int8_t)(r < -128 ? -128 : r > 127 ? 127 : r);
}

size_t TVMCrtMlperfTinyAot_DbBytes(const TVMCrtAotModel* aot, int input_quantized) {
  const TVMCrtAotTensor* in = &aot->inputs[0];
  return input_quantized && IsInt8(in->dtype) ? in->size_bytes * 4u : in->size_bytes;
}

static const char* Load(void* ctx, const uint8_t* data, size_t size) {
  TVMCrtMlperfTinyAot* s = (TVMCrtMlperfTinyAot*)ctx;
  const TVMCrtAotTensor* in = &s->aot->inputs[0];
  size_t i;
  if (size == in->size_bytes && s->info->input_uint8 && IsInt8(in->dtype)) {
    int8_t* q = (int8_t*)in->data;
    for (i = 0; i < size; i++) {
      q[i] = (int8_t)((int32_t)data[i] - 128);
    }
  } else if (size == in->size_bytes) {
    memcpy(in->data, data, size);
  } else if (s->info->input_quantized && size == in->size_bytes * 4u) {
    int8_t* q = (int8_t*)in->data;
    for (i = 0; i < in->size_bytes; i++) {
      q[i] = Quantize(ReadFloatLE(data + 4u * i), s->info->input_scale,
                      s->info->input_zero_point);
    }
  } else {
    if (s->info->input_quantized && IsInt8(in->dtype)) {
      (void)snprintf(s->error, sizeof(s->error),
                     "Input has %lu bytes; the model takes %lu (int8) or %lu (float32)",
                     (unsigned long)size, (unsigned long)in->size_bytes,
                     (unsigned long)(in->size_bytes * 4u));
    } else {
      (void)snprintf(s->error, sizeof(s->error), "Input has %lu bytes; the model takes %lu",
                     (unsigned long)size, (unsigned long)in->size_bytes);
    }
    return s->error;
  }
  s->input = data;
  s->input_size = size;
  return NULL;
}

static int Infer(void* ctx) {
  TVMCrtMlperfTinyAot* s = (TVMCrtMlperfTinyAot*)ctx;
  void* inputs[1];
  void* outputs[1];
  inputs[0] = s->aot->inputs[0].data;
  outputs[0] = s->aot->outputs[0].data;
  return s->aot->run(inputs, outputs) == 0 ? 0 : -1;
}

static float OutputValue(const TVMCrtMlperfTinyAot* s, size_t i) {
  const TVMCrtAotTensor* out = &s->aot->outputs[0];
  if (IsInt8(out->dtype)) {
    int32_t q = ((const int8_t*)out->data)[i];
    return s->info->output_quantized
               ? s->info->output_scale * (float)(q - s->info->output_zero_point)
               : (float)q;
  }
  return ((const float*)out->data)[i];
}

static size_t OutputCount(const TVMCrtMlperfTinyAot* s) {
  const TVMCrtAotTensor* out = &s->aot->outputs[0];
  return IsInt8(out->dtype) ? out->size_bytes : out->size_bytes / 4u;
}

static float InputValue(const TVMCrtMlperfTinyAot* s, size_t i) {
  const TVMCrtAotTensor* in = &s->aot->inputs[0];
  if (s->input != NULL && s->input_size == in->size_bytes * 4u) {
    return ReadFloatLE(s->input + 4u * i);
  }
  if (IsInt8(in->dtype)) {
    int32_t q = ((const int8_t*)in->data)[i];
    return s->info->input_quantized ? s->info->input_scale * (float)(q - s->info->input_zero_point)
                                    : (float)q;
  }
  return ((const float*)in->data)[i];
}

static size_t Results(void* ctx, float* out, size_t max) {
  TVMCrtMlperfTinyAot* s = (TVMCrtMlperfTinyAot*)ctx;
  size_t n = OutputCount(s);
  size_t i;
  if (s->info->score == kTvmMlperfTinyScoreReconstruction) {
    float sum = 0.0f;
    for (i = 0; i < n; i++) {
      float d = OutputValue(s, i) - InputValue(s, i);
      sum += d * d;
    }
    if (max == 0) return 0;
    out[0] = n > 0 ? sum / (float)n : 0.0f;
    return 1;
  }
  for (i = 0; i < n && i < max; i++) {
    out[i] = OutputValue(s, i);
  }
  return i;
}

static int Reset(void* ctx) {
  TVMCrtMlperfTinyAot* s = (TVMCrtMlperfTinyAot*)ctx;
  if (TVMCrtAotModel_ResetState == NULL) {
    return 0; /* the glue defines it when a module keeps state: nothing to reset */
  }
  return TVMCrtAotModel_ResetState(s->info->module_name) == 0 ? 0 : -1;
}

int TVMCrtMlperfTinyAot_Init(TVMCrtMlperfTinyAot* state, TVMCrtMlperfTinyModel* model,
                             const TVMCrtMlperfTinyAotInfo* info, const char** why) {
  const TVMCrtAotModel* aot = TVMCrtAotModel_Lookup(info->module_name);
  const TVMCrtAotTensor* in;
  const TVMCrtAotTensor* out;
  memset(state, 0, sizeof(*state));
  memset(model, 0, sizeof(*model));
  if (aot == NULL) {
    *why = "no model module of that name";
    return -1;
  }
  if (aot->num_inputs != 1 || aot->num_outputs != 1) {
    *why = "the model must have one input and one output";
    return -1;
  }
  in = &aot->inputs[0];
  out = &aot->outputs[0];
  if (!(IsInt8(in->dtype) || IsFloat32(in->dtype)) ||
      !(IsInt8(out->dtype) || IsFloat32(out->dtype))) {
    *why = "the model's input and output must be int8 or float32";
    return -1;
  }
  if (info->db_capacity < TVMCrtMlperfTinyAot_DbBytes(aot, info->input_quantized)) {
    *why = "the db buffer is smaller than the model's input";
    return -1;
  }
  if (info->score == kTvmMlperfTinyScoreReconstruction &&
      (IsInt8(out->dtype) ? out->size_bytes : out->size_bytes / 4u) !=
          (IsInt8(in->dtype) ? in->size_bytes : in->size_bytes / 4u)) {
    *why = "a reconstruction score needs an output as large as the input";
    return -1;
  }
  if (TVMCrtWorkspace_Init(info->workspace, info->workspace_size) != kTvmErrorNoError) {
    *why = "TVMCrtWorkspace_Init failed";
    return -1;
  }
  state->info = info;
  state->aot = aot;
  model->version = info->version;
  model->ctx = state;
  model->load = Load;
  model->infer = Infer;
  model->results = Results;
  model->reset = Reset;
  return 0;
}

/*
 * MLPerf Tiny device side: the benchmark's UART protocol (mlcommons/tiny, benchmark/api), written
 * once for every template (project type "mlperftiny", library "mlperftiny" of libraries.txt).
 *
 * Wire format (host -> device): a command is ASCII text ended by '%'; words are separated by one
 * or more spaces. Device -> host: lines ended by "\r\n"; "m-..." are messages, "e-[...]" errors.
 * After start-up ("m-timestamp-mode-performance", "m-lap-us-T", "m-init-done") and after every
 * command the device prints "m-ready".
 *
 *   name                 m-name-dut-[<vendor>]
 *   profile              m-profile-[<firmware version>] and m-model-[<model version>]
 *   help                 the command list
 *   timestamp            m-lap-us-T (T: the port's microsecond clock)
 *   db load N            m-[Expecting N bytes]  (N <= the buffer's capacity)
 *   db HH...             loads hex bytes; m-load-done after the N-th
 *   db print [N [OFF]]   m-buffer-hh-hh-... lines, 8 bytes per line
 *   infer N [W]          loads the buffer into the model, W warm-up runs (default 10), then
 *                        m-infer-start-N, m-lap-us-T, N timed runs, m-lap-us-T, m-infer-done and
 *                        the results line
 *   results              m-results-[f,f,...] with three decimals
 *   reset                project-api's: restores the state of a model that keeps state from one
 *                        run to the next (LSTM, SVDF, resource variables) to its values at boot,
 *                        m-reset-done (nothing to do for a stateless model); the host runner
 *                        sends it before every sample of a stateful model
 *   db crc               project-api's: m-db-crc-[<loaded>,<size>,<crc>], <loaded> the bytes
 *                        loaded since the last `db load N` (decimal), <size> that N (0 before
 *                        any), <crc> the CRC-32 (zlib's: reflected 0xEDB88320, initial and final
 *                        value ~0) of those bytes as 8 lowercase hex digits. The host runner
 *                        checks every load with it and, after a link fault mid-load, resumes
 *                        from the bytes it shows arrived intact. A firmware built with
 *                        -DTVM_CRT_MLPERFTINY_NO_DB_CRC lacks it, as the reference does (which
 *                        reads "crc" as an odd number of hex digits: an e-[...] line); `help`
 *                        lists neither extension
 *
 * The port (a template's firmware) supplies TVMCrtMlperfTinyPort_Write and
 * TVMCrtMlperfTinyPort_Micros, a TVMCrtMlperfTinyModel (usually from TVMCrtMlperfTinyAot_Init
 * below), and feeds received bytes to TVMCrtMlperfTiny_Receive. Nothing here allocates or uses
 * printf's floating point.
 */
#ifndef TVM_RUNTIME_CRT_MLPERFTINY_H_
#define TVM_RUNTIME_CRT_MLPERFTINY_H_

#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/crt/aot_model.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Longest command, terminator excluded (the benchmark's EE_CMD_SIZE). */
#define TVM_CRT_MLPERFTINY_CMD_SIZE 80u
/*! \brief Firmware version printed by `profile` (the string the EnergyRunner knows). */
#define TVM_CRT_MLPERFTINY_FW_VERSION "ULPMark for tinyML Firmware V0.0.1"
/*! \brief Vendor printed by `name`. */
#define TVM_CRT_MLPERFTINY_VENDOR "project-api"
/*! \brief Most result values one inference can print. */
#define TVM_CRT_MLPERFTINY_MAX_RESULTS 64u

/*! \brief Port: write bytes to the host (blocking). */
void TVMCrtMlperfTinyPort_Write(const char* data, size_t size);
/*! \brief Port: a free-running microsecond clock (the board's timer). */
uint64_t TVMCrtMlperfTinyPort_Micros(void);

/*! \brief The model behind the protocol. */
typedef struct TVMCrtMlperfTinyModel {
  const char* version; /*!< m-model-[...], e.g. "kws01" */
  void* ctx;           /*!< passed to the functions below */
  /*! Take the db buffer as the next input; NULL on success, else the text of an e-[...] line. */
  const char* (*load)(void* ctx, const uint8_t* data, size_t size);
  /*! Run once; 0 on success. */
  int (*infer)(void* ctx);
  /*! Write up to max result values into out; return how many. */
  size_t (*results)(void* ctx, float* out, size_t max);
  /*! Optional (NULL: nothing to reset): restore the model's state to its values at boot; 0 on
   * success. */
  int (*reset)(void* ctx);
} TVMCrtMlperfTinyModel;

/*! \brief Protocol state (allocate statically; fields are private). */
typedef struct TVMCrtMlperfTiny {
  const TVMCrtMlperfTinyModel* model;
  uint8_t* db;           /*!< the db buffer */
  size_t db_capacity;
  size_t db_size;        /*!< N of the last `db load N` */
  size_t db_pos;         /*!< bytes loaded so far */
  char cmd[TVM_CRT_MLPERFTINY_CMD_SIZE + 1];
  size_t cmd_len;
  int cmd_overflow;
  int ready;
} TVMCrtMlperfTiny;

/*! \brief Set up the state over a db buffer and print the start-up lines and m-ready. */
void TVMCrtMlperfTiny_Start(TVMCrtMlperfTiny* bench, const TVMCrtMlperfTinyModel* model,
                            uint8_t* db, size_t db_capacity);
/*! \brief Feed received bytes; runs each command when its '%' arrives. */
void TVMCrtMlperfTiny_Receive(TVMCrtMlperfTiny* bench, const uint8_t* data, size_t size);
/*! \brief Run one complete command (text without '%'; modified in place). */
void TVMCrtMlperfTiny_Command(TVMCrtMlperfTiny* bench, char* command);
/*! \brief CRC-32 of data continuing crc (0 to start), as zlib's crc32() computes it. */
uint32_t TVMCrtMlperfTiny_Crc32(uint32_t crc, const uint8_t* data, size_t size);
/*! \brief Format value with three decimals like printf's "%0.3f"; returns the length. */
size_t TVMCrtMlperfTiny_FormatFixed3(float value, char* out, size_t size);

/*! \brief How results are scored. */
typedef enum {
  kTvmMlperfTinyScoreVector = 0,    /*!< the dequantized output vector (KWS, VWW, IC) */
  kTvmMlperfTinyScoreReconstruction /*!< mean squared error of output vs input (AD) */
} TVMCrtMlperfTinyScore;

/*! \brief What a generated project knows of its model (src/mlperftiny_model.c). */
typedef struct TVMCrtMlperfTinyAotInfo {
  const char* module_name;   /*!< TVMCrtAotModel_Lookup name */
  const char* version;       /*!< "kws01", "ad01", ... */
  TVMCrtMlperfTinyScore score;
  int input_quantized;       /*!< 1: int8 input with the scale/zero point below */
  int input_uint8;           /*!< 1: db bytes of an int8 input's size are uint8 pixels, made
                                  int8 by subtracting 128 (the benchmark's VWW and IC data) */
  float input_scale;
  int32_t input_zero_point;
  int output_quantized;      /*!< 1: int8 output with the scale/zero point below */
  float output_scale;
  int32_t output_zero_point;
  uint8_t* workspace;        /*!< handed to TVMCrtWorkspace_Init */
  size_t workspace_size;
  uint8_t* db;               /*!< the db buffer, at least TVMCrtMlperfTinyAot_DbBytes bytes */
  size_t db_capacity;
} TVMCrtMlperfTinyAotInfo;

/*! \brief State of the AOT adapter (allocate statically). */
typedef struct TVMCrtMlperfTinyAot {
  const TVMCrtMlperfTinyAotInfo* info;
  const TVMCrtAotModel* aot;
  const uint8_t* input;      /*!< the db bytes of the last load (float32 input for AD) */
  size_t input_size;
  char error[96];            /*!< text of the last load error */
} TVMCrtMlperfTinyAot;

/*!
 * \brief A TVMCrtMlperfTinyModel over a generated model: `db` bytes are the input tensor's bytes
 * (uint8 pixels less 128 with input_uint8), or, for an int8 input, float32 values (4 bytes
 * each, little-endian) quantized with its scale and zero point (the benchmark's AD data).
 * Returns 0, or -1 with a reason in *why (no such module, not one input and one output, ...).
 */
int TVMCrtMlperfTinyAot_Init(TVMCrtMlperfTinyAot* state, TVMCrtMlperfTinyModel* model,
                             const TVMCrtMlperfTinyAotInfo* info, const char** why);
/*! \brief Bytes the db buffer of a model needs: its input bytes, or 4 per int8 element. */
size_t TVMCrtMlperfTinyAot_DbBytes(const TVMCrtAotModel* aot, int input_quantized);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TVM_RUNTIME_CRT_MLPERFTINY_H_ */

/*!
 * \file tvm/runtime/crt/rpc_common/framing.h
 * \brief microTVM framing: packets over a byte stream, with escapes and a CRC.
 *
 * Wire layout of one frame (spec §4.1):
 *   [0xFE, only after a reset] 0xFF 0xFD [u32 LE length] [payload] [u16 LE CRC]
 * In the length, payload and CRC every 0xFF is sent as FF FF. The CRC
 * (CRC-16/CCITT-FALSE) covers the on-wire bytes from FF FD through the escaped payload.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Escape byte: FF FF is a literal 0xFF, FF FD starts a packet, FF FE is a nop. */
#define TVM_CRT_FRAMING_ESCAPE_START ((uint8_t)0xFF)
/*! \brief Nop byte (bare before a frame after a reset; FF FE inside a frame). */
#define TVM_CRT_FRAMING_ESCAPE_NOP ((uint8_t)0xFE)
/*! \brief Second byte of the packet start sequence FF FD. */
#define TVM_CRT_FRAMING_PACKET_START ((uint8_t)0xFD)

/*!
 * \brief Size of the framer's output chunks and the unframer's work buffer, in bytes (each
 *     framer and unframer holds one such buffer). Override like the knobs of config.h.
 */
#ifndef TVM_CRT_FRAMING_CHUNK_SIZE_BYTES
#define TVM_CRT_FRAMING_CHUNK_SIZE_BYTES 128
#endif

#if TVM_CRT_FRAMING_CHUNK_SIZE_BYTES < 8 || TVM_CRT_FRAMING_CHUNK_SIZE_BYTES > 255
#error "TVM_CRT_FRAMING_CHUNK_SIZE_BYTES must be in [8, 255]"
#endif

/*! \brief Unframer states (TVM values). */
typedef enum {
  kTvmUnframerFindPacketStart = 0,
  kTvmUnframerFindPacketLength = 1,
  kTvmUnframerFindPacketCrc = 2,
  kTvmUnframerFindCrcEnd = 3,
} TVMCrtUnframerState;

/*! \brief Receiver: turns wire bytes into payload bytes written to a stream. */
typedef struct TVMCrtUnframer {
  TVMCrtWriteStream* stream;
  const uint8_t* input;
  size_t input_size_bytes;
  uint32_t num_payload_bytes_remaining;
  uint16_t crc;
  uint8_t state;
  uint8_t saw_escape_start;
  uint8_t num_buffer_bytes_valid;
  uint8_t buffer[TVM_CRT_FRAMING_CHUNK_SIZE_BYTES];
} TVMCrtUnframer;

/*! \brief Set up an unframer that writes payloads to stream. */
void TVMCrtUnframer_Init(TVMCrtUnframer* unframer, TVMCrtWriteStream* stream);

/*!
 * \brief Feed wire bytes.
 *
 * Processes data until it is exhausted or an error occurs. On error the unframer goes back to
 * looking for a packet start and the error is returned; *out_consumed_bytes always says how
 * many input bytes were eaten, so the caller passes the rest to the next call.
 * \return kTvmErrorNoError, kTvmErrorFramingShortPacket (FF FD inside a packet: the FD is left
 *     unconsumed and begins the next packet), kTvmErrorFramingInvalidEscape, or the stream's
 *     error (the input is rewound to just after the payload bytes the stream accepted).
 */
tvm_crt_error_t TVMCrtUnframer_Write(TVMCrtUnframer* unframer, const uint8_t* data,
                                     size_t size_bytes, size_t* out_consumed_bytes);

/*! \brief How many more wire bytes the current state wants at least (a read-size hint). */
size_t TVMCrtUnframer_BytesNeeded(const TVMCrtUnframer* unframer);

/*! \brief Framer states. */
typedef enum {
  kTvmFramerReset = 0,        /*!< the next packet gets the bare 0xFE prefix */
  kTvmFramerIdle = 1,         /*!< between packets */
  kTvmFramerTransmitting = 2, /*!< inside a packet */
} TVMCrtFramerState;

/*! \brief Sender: turns payloads into wire bytes written to a stream in chunks. */
typedef struct TVMCrtFramer {
  TVMCrtWriteStream* stream;
  uint32_t num_payload_bytes_remaining;
  uint16_t crc;
  uint8_t state;
  uint8_t chunk_size_bytes;  /*!< bytes pending in chunk */
  uint8_t chunk_crc_start;   /*!< chunk[0..chunk_crc_start) is already in crc */
  uint8_t chunk[TVM_CRT_FRAMING_CHUNK_SIZE_BYTES];
} TVMCrtFramer;

/*! \brief Set up a framer (in the reset state) writing to stream. */
void TVMCrtFramer_Init(TVMCrtFramer* framer, TVMCrtWriteStream* stream);

/*! \brief Return to the reset state: the next packet is preceded by 0xFE. */
void TVMCrtFramer_Reset(TVMCrtFramer* framer);

/*! \brief Frame a whole payload: StartPacket + WritePayloadChunk + FinishPacket. */
tvm_crt_error_t TVMCrtFramer_Write(TVMCrtFramer* framer, const uint8_t* payload, size_t size_bytes);

/*! \brief Begin a packet whose payload is payload_size_bytes long. */
tvm_crt_error_t TVMCrtFramer_StartPacket(TVMCrtFramer* framer, uint32_t payload_size_bytes);

/*!
 * \brief Add payload bytes.
 * \return kTvmErrorFramingInvalidState outside a packet, kTvmErrorFramingPayloadOverflow
 *     past the declared length (nothing is written then), or a stream error.
 */
tvm_crt_error_t TVMCrtFramer_WritePayloadChunk(TVMCrtFramer* framer, const uint8_t* data,
                                               size_t size_bytes);

/*!
 * \brief End the packet: append the CRC and flush.
 * \return kTvmErrorFramingPayloadIncomplete if payload bytes are missing.
 */
tvm_crt_error_t TVMCrtFramer_FinishPacket(TVMCrtFramer* framer);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_FRAMING_H_

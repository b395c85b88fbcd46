/*!
 * \file tvm/runtime/crt/rpc_common/write_stream.h
 * \brief A byte sink with packet boundaries: what the framer writes to and the unframer feeds.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Write up to size_bytes bytes.
 *
 * Sets *out_written_bytes to the number of bytes taken (also when an error is returned).
 * Taking 0 bytes without an error is a short write; more than size_bytes is a long write.
 */
typedef tvm_crt_error_t (*TVMCrtWriteStreamWriteFunc)(void* context, const uint8_t* data,
                                                      size_t size_bytes, size_t* out_written_bytes);

/*! \brief A packet of payload_size_bytes begins (the unframer saw its length). */
typedef void (*TVMCrtWriteStreamPacketStartFunc)(void* context, uint32_t payload_size_bytes);

/*! \brief The packet ended; is_valid tells whether its CRC matched. */
typedef void (*TVMCrtWriteStreamPacketDoneFunc)(void* context, bool is_valid);

/*! \brief A write stream: callbacks plus the context passed to each. */
typedef struct TVMCrtWriteStream {
  TVMCrtWriteStreamWriteFunc write;              /*!< required */
  TVMCrtWriteStreamPacketStartFunc packet_start; /*!< optional (NULL) */
  TVMCrtWriteStreamPacketDoneFunc packet_done;   /*!< optional (NULL) */
  void* context;
} TVMCrtWriteStream;

/*!
 * \brief Write all of data, calling stream->write until done.
 * \param out_written_bytes Set to the bytes taken, also on error.
 * \return kTvmErrorNoError; kTvmErrorWriteStreamShortWrite when the stream took 0 bytes;
 *     kTvmErrorWriteStreamLongWrite when it claimed more than offered; or the stream's error.
 */
tvm_crt_error_t TVMCrtWriteStream_WriteAll(TVMCrtWriteStream* stream, const uint8_t* data,
                                           size_t size_bytes, size_t* out_written_bytes);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_WRITE_STREAM_H_

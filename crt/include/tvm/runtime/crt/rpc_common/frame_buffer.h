/*!
 * \file tvm/runtime/crt/rpc_common/frame_buffer.h
 * \brief A linear byte buffer over caller-owned memory: writes append, reads advance a cursor,
 *     and only Clear() empties it.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_FRAME_BUFFER_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_FRAME_BUFFER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Buffer state; the memory belongs to the caller. */
typedef struct TVMCrtFrameBuffer {
  uint8_t* data;
  size_t capacity_bytes;
  size_t num_valid_bytes;
  size_t read_position;
} TVMCrtFrameBuffer;

/*! \brief Set up an empty buffer over data[capacity_bytes]. */
void TVMCrtFrameBuffer_Init(TVMCrtFrameBuffer* buffer, uint8_t* data, size_t capacity_bytes);

/*! \brief Append as much of data as fits; returns the number of bytes appended. */
size_t TVMCrtFrameBuffer_Write(TVMCrtFrameBuffer* buffer, const uint8_t* data, size_t size_bytes);

/*! \brief Copy out up to size_bytes unread bytes; returns the number copied. */
size_t TVMCrtFrameBuffer_Read(TVMCrtFrameBuffer* buffer, uint8_t* out, size_t size_bytes);

/*! \brief The unread bytes: *out_data points at them; returns how many there are. */
size_t TVMCrtFrameBuffer_Peek(const TVMCrtFrameBuffer* buffer, const uint8_t** out_data);

/*! \brief Number of bytes written and not yet read. */
size_t TVMCrtFrameBuffer_ReadAvailable(const TVMCrtFrameBuffer* buffer);

/*! \brief Empty the buffer. */
void TVMCrtFrameBuffer_Clear(TVMCrtFrameBuffer* buffer);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_FRAME_BUFFER_H_

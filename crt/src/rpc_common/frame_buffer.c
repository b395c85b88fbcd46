/*!
 * \file rpc_common/frame_buffer.c
 * \brief Linear receive buffer over caller-owned memory.
 */
#include <string.h>
#include <tvm/runtime/crt/rpc_common/frame_buffer.h>

void TVMCrtFrameBuffer_Init(TVMCrtFrameBuffer* buffer, uint8_t* data, size_t capacity_bytes) {
  buffer->data = data;
  buffer->capacity_bytes = capacity_bytes;
  TVMCrtFrameBuffer_Clear(buffer);
}

size_t TVMCrtFrameBuffer_Write(TVMCrtFrameBuffer* buffer, const uint8_t* data, size_t size_bytes) {
  size_t room = buffer->capacity_bytes - buffer->num_valid_bytes;
  if (size_bytes > room) {
    size_bytes = room;
  }
  if (size_bytes > 0) {
    memcpy(buffer->data + buffer->num_valid_bytes, data, size_bytes);
    buffer->num_valid_bytes += size_bytes;
  }
  return size_bytes;
}

size_t TVMCrtFrameBuffer_Read(TVMCrtFrameBuffer* buffer, uint8_t* out, size_t size_bytes) {
  size_t available = TVMCrtFrameBuffer_ReadAvailable(buffer);
  if (size_bytes > available) {
    size_bytes = available;
  }
  if (size_bytes > 0) {
    memcpy(out, buffer->data + buffer->read_position, size_bytes);
    buffer->read_position += size_bytes;
  }
  return size_bytes;
}

size_t TVMCrtFrameBuffer_Peek(const TVMCrtFrameBuffer* buffer, const uint8_t** out_data) {
  *out_data = buffer->data + buffer->read_position;
  return TVMCrtFrameBuffer_ReadAvailable(buffer);
}

size_t TVMCrtFrameBuffer_ReadAvailable(const TVMCrtFrameBuffer* buffer) {
  return buffer->num_valid_bytes - buffer->read_position;
}

void TVMCrtFrameBuffer_Clear(TVMCrtFrameBuffer* buffer) {
  buffer->num_valid_bytes = 0;
  buffer->read_position = 0;
}

/*!
 * \file rpc_common/write_stream.c
 * \brief Write-everything loop over a TVMCrtWriteStream.
 */
#include <tvm/runtime/crt/rpc_common/write_stream.h>

tvm_crt_error_t TVMCrtWriteStream_WriteAll(TVMCrtWriteStream* stream, const uint8_t* data,
                                           size_t size_bytes, size_t* out_written_bytes) {
  size_t done = 0;
  tvm_crt_error_t err = kTvmErrorNoError;
  while (done < size_bytes) {
    size_t written = 0;
    err = stream->write(stream->context, data + done, size_bytes - done, &written);
    if (written > size_bytes - done) {
      err = kTvmErrorWriteStreamLongWrite;
      break;
    }
    done += written;
    if (err != kTvmErrorNoError) {
      break;
    }
    if (written == 0) {
      err = kTvmErrorWriteStreamShortWrite;
      break;
    }
  }
  *out_written_bytes = done;
  return err;
}

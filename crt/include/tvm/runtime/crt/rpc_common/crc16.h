/*!
 * \file tvm/runtime/crt/rpc_common/crc16.h
 * \brief CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, xorout 0).
 *
 * This is the frame check of the microTVM wire protocol. It equals Python's
 * binascii.crc_hqx(data, 0xFFFF); the check value of "123456789" is 0x29B1.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Speed/size knob of TVMCrtCrc16_Update (override with -D, like the knobs of config.h).
 *
 * 1 (default): one 256-entry table (512 B .rodata), one lookup per byte; for microcontrollers,
 * whose links are far slower than this anyway. 8: slicing-by-8 in two interleaved lanes, nine
 * more tables (4.5 KB more .rodata), several times faster on a desktop CPU; the host template
 * uses it.
 */
#ifndef TVM_CRT_CRC16_TABLE_SLICES
#define TVM_CRT_CRC16_TABLE_SLICES 1
#endif

#if TVM_CRT_CRC16_TABLE_SLICES != 1 && TVM_CRT_CRC16_TABLE_SLICES != 8
#error "TVM_CRT_CRC16_TABLE_SLICES must be 1 or 8"
#endif

/*! \brief Initial value of a CRC-16/CCITT-FALSE computation. */
#define TVM_CRT_CRC16_INIT ((uint16_t)0xFFFF)

/*!
 * \brief Continue a CRC over more bytes.
 * \param crc The running CRC (TVM_CRT_CRC16_INIT to start).
 * \param data The bytes to add.
 * \param size_bytes How many bytes data holds.
 * \return The updated CRC.
 */
uint16_t TVMCrtCrc16_Update(uint16_t crc, const uint8_t* data, size_t size_bytes);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_CRC16_H_

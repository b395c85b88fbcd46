/*
 * Private to the runtime library: compiler attributes its sources share (included as
 * "../common/compiler.h"; never by an application).
 */
#ifndef TVM_CRT_SRC_COMMON_COMPILER_H_
#define TVM_CRT_SRC_COMMON_COMPILER_H_

/*!
 * \brief Keeps a helper out of line. GCC at -Os still copies small static helpers into each of
 * their callers; for helpers shared by several callers that copy costs more than the call.
 */
#if defined(__GNUC__) || defined(__clang__)
#define TVM_CRT_NOINLINE __attribute__((noinline))
#else
#define TVM_CRT_NOINLINE
#endif

#endif /* TVM_CRT_SRC_COMMON_COMPILER_H_ */

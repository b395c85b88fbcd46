/*
 * The POSIX test platform (test_platform.c): implements platform.h with malloc, clock_gettime
 * and /dev/urandom (formatting: the platform library), and adds hooks the unit tests use to
 * observe and perturb it.
 */
#ifndef CRT_TESTS_TEST_PLATFORM_H_
#define CRT_TESTS_TEST_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

/*! \brief Forget recorded events and injected faults; use the real clock again. */
void TestPlatform_Reset(void);

/*!
 * \brief Events recorded so far, each followed by ';': "open(1,0)", "activate(1,0)",
 * "deactivate(1,0)", "close(1,0)", "before", "cycles" (a read of the cycle counter, i.e. a
 * timer start or stop), "after".
 */
const char* TestPlatform_Trace(void);

/*! \brief Blocks currently allocated through TVMPlatformMemoryAllocate. */
int TestPlatform_LiveAllocations(void);

/*! \brief Make TVMPlatformMemoryAllocate fail once `successes` more allocations succeeded (-1: never). */
void TestPlatform_FailAllocationAfter(int successes);

/*! \brief Make the named hook ("open", "activate", "deactivate", "close") return err (0 clears). */
void TestPlatform_SetHookError(const char* hook, tvm_crt_error_t err);

/*!
 * \brief Replace the cycle counter by a fake one that only moves with TestPlatform_AdvanceClock,
 * so measured times are exact (to the nanosecond).
 */
void TestPlatform_UseFakeClock(void);

/*! \brief Move the fake clock forward by seconds. */
void TestPlatform_AdvanceClock(double seconds);

/*! \brief Set the fake clock to ns nanoseconds (also backwards, to test a broken counter). */
void TestPlatform_SetClock(uint64_t ns);

/*! \brief Make TVMCrtPlatform_CycleCount fail with err (kTvmErrorNoError clears). */
void TestPlatform_SetCycleCountError(tvm_crt_error_t err);

/*! \brief The next TVMPlatformGenerateRandom calls return these bytes (at most 16), then /dev/urandom. */
void TestPlatform_ScriptRandom(const uint8_t* bytes, size_t num_bytes);

#endif  /* CRT_TESTS_TEST_PLATFORM_H_ */

/*
 * test_platform_timer.c: the platform library's measurement timer (src/platform/timer.c) over
 * the test platform's fake nanosecond counter: exact elapsed times, the bad-state rules, and a
 * counter that fails, stops or runs backwards.
 */
#include <stdint.h>
#include <tvm/runtime/crt/platform.h>

#include "test_platform.h"
#include "test_util.h"

TEST(ElapsedIsCyclesOverFrequency) {
  TestPlatform_Reset();
  TestPlatform_UseFakeClock();
  TestPlatform_SetClock(UINT64_C(0xfffffff000000000)); /* far from 0: no 32-bit truncation */
  double seconds = -1.0;
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError);
  TestPlatform_AdvanceClock(1.5);
  ASSERT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorNoError);
  EXPECT_NEAR(seconds, 1.5, 1e-12);
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError); /* restarts from the new count */
  TestPlatform_AdvanceClock(0.000000003);
  ASSERT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorNoError);
  EXPECT_NEAR(seconds, 3e-9, 1e-18);
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorNoError);
  EXPECT_EQ_INT(seconds == 0.0, 1);
  EXPECT_EQ_STR(TestPlatform_Trace(), "cycles;cycles;cycles;cycles;cycles;cycles;");
}

TEST(StartTwiceAndStopIdleAreBadState) {
  TestPlatform_Reset();
  TestPlatform_UseFakeClock();
  double seconds = -1.0;
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorPlatformTimerBadState);
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorPlatformTimerBadState);
  TestPlatform_AdvanceClock(0.25);
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorNoError);
  EXPECT_NEAR(seconds, 0.25, 1e-12); /* the refused second start changed nothing */
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorPlatformTimerBadState);
}

TEST(CounterErrorsReachTheCaller) {
  TestPlatform_Reset();
  TestPlatform_UseFakeClock();
  double seconds = -1.0;
  TestPlatform_SetCycleCountError(kTvmErrorFunctionCallNotImplemented);
  EXPECT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorFunctionCallNotImplemented);
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorPlatformTimerBadState); /* not started */
  TestPlatform_SetCycleCountError(kTvmErrorNoError);
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError);
  TestPlatform_SetCycleCountError(kTvmErrorPlatformTimerBadState);
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorPlatformTimerBadState);
  TestPlatform_SetCycleCountError(kTvmErrorNoError);
  EXPECT_EQ_INT(seconds == -1.0, 1);                   /* nothing reported on failure */
  EXPECT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError); /* the failed stop stopped it */
  TestPlatform_SetClock(10);                           /* the counter ran backwards */
  EXPECT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorPlatformTimerBadState);
  EXPECT_EQ_INT(seconds == -1.0, 1);
}

TEST(RealCounterMovesForward) {
  TestPlatform_Reset();
  double seconds = -1.0;
  volatile uint64_t spin = 0;
  ASSERT_EQ_INT(TVMPlatformTimerStart(), kTvmErrorNoError);
  for (int i = 0; i < 100000; i++) spin += (uint64_t)i;
  ASSERT_EQ_INT(TVMPlatformTimerStop(&seconds), kTvmErrorNoError);
  EXPECT_TRUE(seconds > 0.0 && seconds < 10.0);
}

int main(void) {
  RUN_TEST(ElapsedIsCyclesOverFrequency);
  RUN_TEST(StartTwiceAndStopIdleAreBadState);
  RUN_TEST(CounterErrorsReachTheCaller);
  RUN_TEST(RealCounterMovesForward);
  return TEST_REPORT();
}

/*
 * A tiny test framework for the C runtime's unit tests (one program per area, no dependencies).
 *
 *   TEST(Name) { EXPECT_EQ_INT(1 + 1, 2); ASSERT_TRUE(p != NULL); ... }
 *   int main(void) { RUN_TEST(Name); return TEST_REPORT(); }
 *
 * EXPECT_* records a failure and continues; ASSERT_* records it and leaves the test. The report
 * prints "<N> passed, <M> failed" (counting tests) and returns the exit status: 0 only when all
 * passed and at least one test ran.
 */
#ifndef CRT_TESTS_TEST_UTIL_H_
#define CRT_TESTS_TEST_UTIL_H_

#include <math.h>
#include <stdio.h>
#include <string.h>

static int g_test_passed;
static int g_test_failed;
static int g_test_current_failed;
static const char* g_test_current_name;

#define TEST(name) static void name(void)

#define RUN_TEST(name)                                                  \
  do {                                                                  \
    g_test_current_failed = 0;                                          \
    g_test_current_name = #name;                                        \
    name();                                                             \
    if (g_test_current_failed) {                                        \
      g_test_failed++;                                                  \
      printf("[  FAILED  ] %s\n", #name);                               \
    } else {                                                            \
      g_test_passed++;                                                  \
      printf("[       OK ] %s\n", #name);                               \
    }                                                                   \
    fflush(stdout);                                                     \
  } while (0)

#define TEST_REPORT()                                                            \
  (printf("%d passed, %d failed\n", g_test_passed, g_test_failed), fflush(stdout), \
   (g_test_failed == 0 && g_test_passed > 0) ? 0 : 1)

#define TEST_FAIL_AT(...)                                                       \
  do {                                                                          \
    printf("%s:%d: in %s: ", __FILE__, __LINE__, g_test_current_name);          \
    printf(__VA_ARGS__);                                                        \
    printf("\n");                                                               \
    g_test_current_failed = 1;                                                  \
  } while (0)

#define EXPECT_TRUE(cond)                                                       \
  do {                                                                          \
    if (!(cond)) TEST_FAIL_AT("expected true: %s", #cond);                      \
  } while (0)

#define ASSERT_TRUE(cond)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      TEST_FAIL_AT("assertion failed: %s", #cond);                              \
      return;                                                                   \
    }                                                                           \
  } while (0)

#define EXPECT_EQ_INT(actual, expected)                                                  \
  do {                                                                                   \
    long long test_a_ = (long long)(actual), test_e_ = (long long)(expected);             \
    if (test_a_ != test_e_)                                                              \
      TEST_FAIL_AT("%s == %lld (0x%llx), expected %s == %lld (0x%llx)", #actual, test_a_, \
                   (unsigned long long)test_a_, #expected, test_e_,                      \
                   (unsigned long long)test_e_);                                         \
  } while (0)

#define ASSERT_EQ_INT(actual, expected)                                                  \
  do {                                                                                   \
    long long test_a_ = (long long)(actual), test_e_ = (long long)(expected);             \
    if (test_a_ != test_e_) {                                                            \
      TEST_FAIL_AT("%s == %lld (0x%llx), expected %s == %lld (0x%llx)", #actual, test_a_, \
                   (unsigned long long)test_a_, #expected, test_e_,                      \
                   (unsigned long long)test_e_);                                         \
      return;                                                                            \
    }                                                                                    \
  } while (0)

#define EXPECT_EQ_PTR(actual, expected)                                                  \
  do {                                                                                   \
    const void* test_a_ = (const void*)(actual);                                         \
    const void* test_e_ = (const void*)(expected);                                       \
    if (test_a_ != test_e_)                                                              \
      TEST_FAIL_AT("%s == %p, expected %s == %p", #actual, test_a_, #expected, test_e_); \
  } while (0)

#define EXPECT_EQ_STR(actual, expected)                                                  \
  do {                                                                                   \
    const char* test_a_ = (actual);                                                      \
    const char* test_e_ = (expected);                                                    \
    if (test_a_ == NULL || test_e_ == NULL || strcmp(test_a_, test_e_) != 0)             \
      TEST_FAIL_AT("%s == \"%s\", expected \"%s\"", #actual, test_a_ ? test_a_ : "(null)", \
                   test_e_ ? test_e_ : "(null)");                                        \
  } while (0)

#define EXPECT_CONTAINS(haystack, needle)                                                \
  do {                                                                                   \
    const char* test_h_ = (haystack);                                                    \
    if (test_h_ == NULL || strstr(test_h_, (needle)) == NULL)                            \
      TEST_FAIL_AT("%s == \"%s\" does not contain \"%s\"", #haystack,                    \
                   test_h_ ? test_h_ : "(null)", (needle));                              \
  } while (0)

#define EXPECT_EQ_MEM(actual, expected, n)                                               \
  do {                                                                                   \
    if (memcmp((actual), (expected), (n)) != 0)                                          \
      TEST_FAIL_AT("%lu bytes at %s differ from %s", (unsigned long)(n), #actual,        \
                   #expected);                                                           \
  } while (0)

#define EXPECT_NEAR(actual, expected, tol)                                               \
  do {                                                                                   \
    double test_a_ = (double)(actual), test_e_ = (double)(expected);                     \
    if (!(fabs(test_a_ - test_e_) <= (tol)))                                             \
      TEST_FAIL_AT("%s == %.9g, expected %.9g +- %g", #actual, test_a_, test_e_,         \
                   (double)(tol));                                                       \
  } while (0)

#endif  /* CRT_TESTS_TEST_UTIL_H_ */

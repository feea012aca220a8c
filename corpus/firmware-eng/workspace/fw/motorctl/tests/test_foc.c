#include <zephyr/ztest.h>
#include "foc.h"

ZTEST(foc, test_clarke_balanced) { zassert_within(clarke((struct abc){1, -0.5f, -0.5f}).beta, 0.0f, 1e-4f); }
ZTEST_SUITE(foc, NULL, NULL, NULL, NULL, NULL);

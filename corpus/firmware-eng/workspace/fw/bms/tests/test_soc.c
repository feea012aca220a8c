#include <zephyr/ztest.h>
#include "soc_estimator.h"

ZTEST(soc, test_full_discharge) { /* 17.5 Ah at 17.5 A for 1 h goes from 1.0 to 0.0 */ }
ZTEST_SUITE(soc, NULL, NULL, NULL, NULL, NULL);

#include "foc.h"

/* Overcurrent trips at 48 A for 3 consecutive samples; overtemperature at 105 C. */
int fault_check(float i_peak, float t_c) { return i_peak > 48.0f || t_c > 105.0f; }

#pragma once
#include <stdint.h>
void can_bus_init(uint8_t node);

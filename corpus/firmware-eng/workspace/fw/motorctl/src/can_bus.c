#include <zephyr/drivers/can.h>
#include "can_bus.h"

/* Frames: 0x121 status, 0x122 torque request, 0x1F0 fault. See docs/can-protocol.md. */
void can_bus_init(uint8_t node) { /* filters for 0x120-0x12F */ }

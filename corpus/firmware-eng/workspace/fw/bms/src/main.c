#include <zephyr/kernel.h>
#include "soc_estimator.h"

int main(void)
{
	soc_init();
	ble_service_start();
	for (;;) { soc_update(read_pack()); k_sleep(K_MSEC(100)); }
}

#include <zephyr/kernel.h>
#include "foc.h"
#include "can_bus.h"

int main(void)
{
	foc_init();
	can_bus_init(CONFIG_CAN_NODE_ID);
	while (1) {
		foc_step();
		k_sleep(K_USEC(50));
	}
	return 0;
}

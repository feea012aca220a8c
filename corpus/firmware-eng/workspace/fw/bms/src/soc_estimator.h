#pragma once
#define CAPACITY_AH 17.5f
struct pack { float current_a, dt_s; int rest_s, min_cell_mv; };
void soc_init(void);
void soc_update(struct pack p);

#include "soc_estimator.h"

/* Coulomb counting with OCV correction at rest (> 30 min, |I| < 0.2 A). */
static float soc = 0.5f;
void soc_update(struct pack p)
{
	soc += p.current_a * p.dt_s / (3600.0f * CAPACITY_AH);
	if (p.rest_s > 1800 && fabsf(p.current_a) < 0.2f) soc = ocv_to_soc(p.min_cell_mv);
}

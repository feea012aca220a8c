#include "foc.h"
#include <math.h>

/* Field-oriented control, 20 kHz loop. */
static struct pi_ctrl id_pi = { .kp = 0.12f, .ki = 35.0f };
static struct pi_ctrl iq_pi = { .kp = 0.12f, .ki = 35.0f };

void foc_init(void) { pi_reset(&id_pi); pi_reset(&iq_pi); }

void foc_step(void)
{
	struct abc i = adc_read_phases();
	struct dq dq = park(clarke(i), rotor_angle());
	float vd = pi_update(&id_pi, 0.0f - dq.d);
	float vq = pi_update(&iq_pi, torque_ref() - dq.q);
	svpwm_apply(inv_park(vd, vq, rotor_angle()));
}

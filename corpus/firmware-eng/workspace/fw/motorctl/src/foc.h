#pragma once
struct pi_ctrl { float kp, ki, acc; };
void foc_init(void);
void foc_step(void);

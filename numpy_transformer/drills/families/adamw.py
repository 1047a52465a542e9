"""AdamW's classic mistakes, from its update rule (torch.optim.AdamW, t = step + 1):

    param <- param * (1 - lr * wd)                 decoupled weight decay
    m <- beta1 * m + (1 - beta1) * g               first moment
    v <- beta2 * v + (1 - beta2) * g * g           second moment (of the SQUARED gradient)
    param <- param - lr * (m / (1 - beta1**t)) / (sqrt(v / (1 - beta2**t)) + eps)

Each constant, each factor and each correction can be dropped, swapped or inverted; the state returned is
the raw moments m and v. (The corrections of both moments dropped, the L2 penalty, the decay without lr,
eps inside the root and t = step are the adamw_step exercise's own list.)
"""

from . import Family

M_EMA = r"m = beta1 \* m \+ \(1\.0 - beta1\) \* grad"
V_EMA = r"v = beta2 \* v \+ \(1\.0 - beta2\) \* grad \* grad"
M_HAT = r"m_hat = m / \(1\.0 - beta1 \*\* t\)"
V_HAT = r"v_hat = v / \(1\.0 - beta2 \*\* t\)"
UPDATE = r"param = param - lr \* m_hat / \(np\.sqrt\(v_hat\) \+ eps\)"
DECAY = r"param = param \* \(1\.0 - lr \* weight_decay\)"

FAMILIES = (
    Family("adamw_second_moment_not_squared", "second moment of |grad| (or grad) instead of grad squared",
           "v estimates E[g^2], the uncentred variance of each gradient element: its root rescales the step "
           "to about lr whatever the gradient's size. |g| (or g, which can be negative) is another "
           "statistic, of another unit.",
           "v = beta2 * v + (1 - beta2) * grad * grad.",
           (((V_EMA, "v = beta2 * v + (1.0 - beta2) * np.abs(grad)"),),
            ((V_EMA, "v = beta2 * v + (1.0 - beta2) * grad"),))),
    Family("adamw_first_moment_not_corrected", "no bias correction of the first moment (m_hat = m)",
           "m starts at 0, so after t updates it is biased towards 0 by the factor 1 - beta1**t; dividing it "
           "out makes the first steps full size (v's correction alone makes them too small).",
           "m_hat = m / (1 - beta1**t) with t = step + 1.",
           (((M_HAT, "m_hat = m"),),)),
    Family("adamw_second_moment_not_corrected", "no bias correction of the second moment (v_hat = v)",
           "v starts at 0, so after t updates it is biased towards 0 by the factor 1 - beta2**t (small for "
           "beta2 = 0.999: early steps would be ~30 times too big).",
           "v_hat = v / (1 - beta2**t) with t = step + 1.",
           (((V_HAT, "v_hat = v"),),)),
    Family("adamw_corrections_multiplied", "bias corrections multiplied by 1 - beta**t instead of divided",
           "The moments are too small by the factor 1 - beta**t: the correction divides it out. Multiplying "
           "shrinks them a second time.",
           "m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t).",
           (((M_HAT, "m_hat = m * (1.0 - beta1 ** t)"), (V_HAT, "v_hat = v * (1.0 - beta2 ** t)")),)),
    Family("adamw_betas_swapped", "betas swapped: beta2 on the first moment and beta1 on the second",
           "betas = (beta1, beta2) = (0.9, 0.999): the first moment (the mean of the gradients) uses the "
           "shorter memory beta1, the second (of the squares) the longer beta2, and each correction the "
           "beta of its own moment.",
           "beta1, beta2 = betas; m with beta1, v with beta2.",
           (((r"beta1, beta2 = betas", "beta2, beta1 = betas"),),
            ((M_EMA, "m = beta2 * m + (1.0 - beta2) * grad"),
             (V_EMA, "v = beta1 * v + (1.0 - beta1) * grad * grad")))),
    Family("adamw_average_weights_swapped", "moving average's weights swapped: beta * grad + (1 - beta) * m",
           "An exponential moving average keeps the fraction beta of the old moment and mixes in (1 - beta) of "
           "the new gradient: m = beta1 * m + (1 - beta1) * grad (the same form for v).",
           "m = beta1 * m + (1 - beta1) * grad; v = beta2 * v + (1 - beta2) * grad * grad.",
           (((M_EMA, "m = (1.0 - beta1) * m + beta1 * grad"),
             (V_EMA, "v = (1.0 - beta2) * v + beta2 * grad * grad")),
            ((M_EMA, "m = (1.0 - beta1) * m + beta1 * grad"),),
            ((V_EMA, "v = (1.0 - beta2) * v + beta2 * grad * grad"),))),
    Family("adamw_no_square_root", "update divided by v_hat instead of its square root",
           "v_hat estimates the gradient's square: its root has the gradient's unit, so m_hat / sqrt(v_hat) is "
           "about +-1 per element and the step about lr. Dividing by v_hat itself scales by 1/|g|.",
           "param = param - lr * m_hat / (np.sqrt(v_hat) + eps).",
           (((UPDATE, "param = param - lr * m_hat / (v_hat + eps)"),),)),
    Family("adamw_update_sign", "the update added: param + lr * m_hat / (sqrt(v_hat) + eps) (gradient ascent)",
           "The step goes against the gradient (its first moment) to decrease the loss.",
           "param = param - lr * m_hat / (np.sqrt(v_hat) + eps).",
           (((UPDATE, "param = param + lr * m_hat / (np.sqrt(v_hat) + eps)"),),)),
    Family("adamw_decay_after_update", "weight decay applied after the Adam update, to the updated parameter",
           "torch's AdamW decays the parameter first, param * (1 - lr * wd), then takes the Adam step; "
           "decaying the updated parameter also shrinks the step by 1 - lr * wd.",
           "param = param * (1 - lr * weight_decay) before the update.",
           (((DECAY, "pass"),
             (UPDATE, "param = param - lr * m_hat / (np.sqrt(v_hat) + eps)\n"
                      "    param = param * (1.0 - lr * weight_decay)")),)),
    Family("adamw_decay_sign", "weight decay grows the parameter: param * (1 + lr * weight_decay)",
           "Weight decay pulls each weight towards 0: the parameter is multiplied by 1 - lr * wd (< 1).",
           "param = param * (1 - lr * weight_decay).",
           (((DECAY, "param = param * (1.0 + lr * weight_decay)"),),)),
    Family("adamw_state_bias_corrected", "the bias-corrected m_hat and v_hat returned as the state instead of m and v",
           "The state carries the raw moving averages: the next step multiplies them by beta and corrects "
           "them again with its own t. Storing the corrected ones corrects twice.",
           "return param, m, v (m_hat and v_hat are only this step's).",
           (((r"return param, m, v", "return param, m_hat, v_hat"),),)),
    Family("adamw_other_beta", "a moment (or its correction) weighted with the other beta: the second moment "
           "with 1 - beta1, the first with 1 - beta2",
           "Each moment has its own beta, in its moving average and in its bias correction: "
           "m = beta1 m + (1 - beta1) g, m_hat = m / (1 - beta1^t); v = beta2 v + (1 - beta2) g^2, "
           "v_hat = v / (1 - beta2^t). A weight from the other beta breaks the average (its weights no "
           "longer sum to 1) or its correction.",
           "m with beta1 throughout, v with beta2 throughout.",
           (((V_EMA, "v = beta2 * v + (1.0 - beta1) * grad * grad"),),
            ((M_EMA, "m = beta1 * m + (1.0 - beta2) * grad"),),
            ((V_HAT, "v_hat = v / (1.0 - beta1 ** t)"),),
            ((M_HAT, "m_hat = m / (1.0 - beta2 ** t)"),))),
)

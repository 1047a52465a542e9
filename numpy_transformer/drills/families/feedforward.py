"""The position-wise feed-forward FF(z) = relu(z W1^T + b1) W2^T + b2 of the encoder and decoder
layers: its backward dr = dy W2, da = dr * (a > 0) (ReLU's derivative, read off the pre-activation
a), dW2 = dy^T relu(a), dW1 = da^T z, and the bias gradients summed over every position."""

from . import Family

FAMILIES = (
    Family("ffn_relu_gate_on_gradient", "ReLU backward gated on the gradient (dr > 0) instead of the "
           "pre-activation (a > 0)",
           "relu'(a) is 1 where the forward's input a was positive: the gate is a property of the forward, "
           "not of the gradient flowing back.",
           "da = dr * (a > 0).",
           (((r"(\w+) = (\w+) \* \(a > 0\)", r"\1 = \2 * (\2 > 0)"),),)),
    Family("ffn_dw2_from_pre_activation", "dW2 from the pre-activation a instead of relu(a)",
           "The second linear layer's input is r = relu(a): dW2 = dy^T r.",
           "dr, dW2 = lin_grads(dy, r, W2).",
           (((r"_lin_grads\((\w+), r, p\[\"W2\"\]\)", r'_lin_grads(\1, a, p["W2"])'),),)),
    Family("ffn_bias_grad_averaged", "the feed-forward's bias gradients averaged over positions instead of "
           "summed",
           "A bias is added at every position (B * S of them): its gradient is the sum of the gradients "
           "there, not their mean.",
           "db = dy.reshape(-1, dy.shape[-1]).sum(0).",
           (((r"(g\[\"b[12]\"\] = \w+\.reshape\(-1, \w+\.shape\[-1\]\))\.sum\(0\)", r"\1.mean(0)"),),)),
    Family("ffn_relu_backward_times_activation", "ReLU backward multiplies by the activation relu(a) (or a) "
           "instead of the 0/1 gate (a > 0)",
           "relu'(a) is the indicator of a > 0, a 0/1 gate: da = dr * (a > 0). Multiplying by relu(a) "
           "or by a scales the gradient by the activation's value.",
           "da = dr * (a > 0).",
           (((r"(\w+) = (\w+) \* \(a > 0\)", r"\1 = \2 * np.maximum(a, 0.0)"),),
            ((r"(\w+) = (\w+) \* \(a > 0\)", r"\1 = \2 * a"),))),
    Family("ffn_relu_backward_ungated", "ReLU backward passes the gradient everywhere (no gate: da = dr)",
           "Where the pre-activation a was negative ReLU output 0 whatever a was: no gradient passes "
           "there, da = dr * (a > 0).",
           "da = dr * (a > 0).",
           (((r"(\w+) = (\w+) \* \(a > 0\)", r"\1 = \2"),),)),
)

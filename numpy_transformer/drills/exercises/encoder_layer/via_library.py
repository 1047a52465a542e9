"""The encoder_layer drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn

NAMES = {"Wo": "self_attn.out_proj.weight", "W1": "linear1.weight", "b1": "linear1.bias",
         "W2": "linear2.weight", "b2": "linear2.bias", "gamma1": "norm1.weight", "beta1": "norm1.bias",
         "gamma2": "norm2.weight", "beta2": "norm2.bias"}
def encoder_layer_forward(x, params, num_heads, mask=None, norm_first=False):
    D, F_ = x.shape[-1], params["W1"].shape[0]
    layer = nn.TransformerEncoderLayer(D, num_heads, dim_feedforward=F_, dropout=0.0, batch_first=True,
                                       norm_first=norm_first, dtype=np.float64)
    sd = layer.state_dict()
    sd["self_attn.in_proj_weight"][...] = np.concatenate([params["Wq"], params["Wk"], params["Wv"]])
    sd["self_attn.in_proj_bias"][...] = 0.0
    sd["self_attn.out_proj.bias"][...] = 0.0
    for k, torch_name in NAMES.items():
        sd[torch_name][...] = params[k]
    return layer(x, src_mask=mask), layer
def encoder_layer_backward(dout, layer):
    dx = layer.backward(dout)
    p = dict(layer.named_parameters())
    g = {k: p[t].grad for k, t in NAMES.items()}
    g["Wq"], g["Wk"], g["Wv"] = np.split(p["self_attn.in_proj_weight"].grad, 3)
    return dx, g

"""The decoder_layer drill answered by the library itself, through the skeleton's signatures: a test grades
it (it must pass), and `drill check` refuses it (a drill is NumPy alone)."""
import numpy as np

from numpy_transformer import nn

NAMES = {"Wo": "self_attn.out_proj.weight", "cWo": "multihead_attn.out_proj.weight", "W1": "linear1.weight",
         "b1": "linear1.bias", "W2": "linear2.weight", "b2": "linear2.bias", "gamma1": "norm1.weight",
         "beta1": "norm1.bias", "gamma2": "norm2.weight", "beta2": "norm2.bias", "gamma3": "norm3.weight",
         "beta3": "norm3.bias"}
def decoder_layer_forward(tgt, memory, params, num_heads, tgt_mask=None, memory_key_padding_mask=None):
    D, F_ = tgt.shape[-1], params["W1"].shape[0]
    layer = nn.TransformerDecoderLayer(D, num_heads, dim_feedforward=F_, dropout=0.0, batch_first=True,
                                       dtype=np.float64)
    sd = layer.state_dict()
    for attn, pre in (("self_attn", ""), ("multihead_attn", "c")):
        sd[attn + ".in_proj_weight"][...] = np.concatenate([params[pre + "Wq"], params[pre + "Wk"], params[pre + "Wv"]])
        sd[attn + ".in_proj_bias"][...] = 0.0
        sd[attn + ".out_proj.bias"][...] = 0.0
    for k, torch_name in NAMES.items():
        sd[torch_name][...] = params[k]
    return layer(tgt, memory, tgt_mask=tgt_mask, memory_key_padding_mask=memory_key_padding_mask), layer
def decoder_layer_backward(dout, layer):
    dtgt, dmemory = layer.backward(dout)
    p = dict(layer.named_parameters())
    g = {k: p[t].grad for k, t in NAMES.items()}
    g["Wq"], g["Wk"], g["Wv"] = np.split(p["self_attn.in_proj_weight"].grad, 3)
    g["cWq"], g["cWk"], g["cWv"] = np.split(p["multihead_attn.in_proj_weight"].grad, 3)
    return dtgt, dmemory, g

"""Third-set mistakes for dropout."""

MISTAKES = [
    dict(label="kept elements scaled by 1/p instead of 1/(1 - p)",
         keywords=["1/p", "1/(1-p)", "1/(1 - p)"],
         patch=[("else 1.0 / (1.0 - p)", "else 1.0 / p")]),
    dict(label="the backward uses the inverted mask (gradient flows to the dropped elements)",
         keywords=["invert", "dropped elements", "~keep"],
         patch=[("return dy * keep * scale", "return dy * ~keep * scale")]),
    dict(label="the cache stores the already scaled mask: the backward applies the scale twice",
         keywords=["twice", "scaled mask", "squared"],
         patch=[("return x * keep * scale, (keep, scale)", "return x * keep * scale, (keep * scale, scale)")]),
    dict(label="one draw per row broadcast over the features (rows dropped whole)",
         keywords=["per row", "per element", "whole row"],
         patch=[("keep = rng.random(x.shape) >= p ", "keep = rng.random(x.shape[:-1] + (1,)) >= p ")]),
]

CORRECT = '''
def dropout_forward(x, p, rng, training=True):
    if training is False:
        return x + 0.0, ("eval",)
    survivors = ~(rng.random(x.shape) < p)
    gain = 1.0 / (1.0 - p) if p != 1.0 else 0.0
    return x * survivors * gain, ("train", survivors, gain)


def dropout_backward(dy, cache):
    if cache[0] == "eval":
        return dy + 0.0
    _, survivors, gain = cache
    return dy * survivors * gain
'''

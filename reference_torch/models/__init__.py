"""The twins of ``numpy_transformer/models/``, file for file: ``encoder.py`` (``TorchTransformerModel``,
``TorchTwin``: a twin with its optimizer, for lockstep training), ``seq2seq.py``
(``TorchSeq2SeqModel``), ``gpt.py`` (``GPT``, its own KV cache, ``greedy``). Each has the NumPy model's
``state_dict`` keys (``to_torch``/``from_torch`` move the weights) and replays its dropout masks.
"""

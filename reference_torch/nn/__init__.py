"""The twins of ``numpy_transformer/nn/``, file for file: PyTorch written out step by step (no
hand-written backward: autograd is the oracle), each with the ``state_dict`` keys of the module it
mirrors, every dropout able to replay NumPy's masks (:mod:`.module`).

==========================  ==========================================================================
file                        twins of ``numpy_transformer/nn/<file>``
==========================  ==========================================================================
``module.py``               ``ReferenceModule`` (the base), ``set_dropout_masks``, ``clear_dropout_masks``
``layers.py``               ``Dropout``, ``TokenEmbedding``, ``PositionalEncoding``,
                            ``LearnedPositionalEmbedding``, ``sinusoidal_table``
``activations.py``          ``activation(spec)``: our activation choice as torch's function
``attention.py``            ``MultiheadAttention``; the shared ``attention``, ``merge_masks``, ``causal_mask``
``transformer.py``          ``TransformerEncoderLayer``, ``TransformerEncoder``
``decoder.py``              ``TransformerDecoderLayer``, ``TransformerDecoder``
``seq2seq.py``              ``Transformer``
``feedforward.py``          the gated feed-forwards (``SwiGLU`` ...: Hugging Face's ``LlamaMLP``)
``block.py``                ``FeedForward``, ``TransformerBlock``
``gqa.py``                  ``GroupedQueryAttention``
``rotary.py``               ``RotaryEmbedding``, ``rope`` (Hugging Face's rotate_half, Meta's complex product)
``position_bias.py``        ``RelativePositionBias`` (Hugging Face's T5), ALiBi's ``alibi_get_slopes``
==========================  ==========================================================================

Import them from their files (``from reference_torch.nn.attention import MultiheadAttention``) or,
for the common ones, from ``reference_torch`` itself.
"""

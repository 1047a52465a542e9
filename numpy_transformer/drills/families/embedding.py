"""An embedding lookup's classic mistakes, from its maths: out[b, s] = W[ids[b, s]], so

    dW[v] = sum over every position (b, s) with ids[b, s] == v of dout[b, s]     (a scatter-ADD)

a sum (not a mean, neither per id nor over the positions), indexed by the token id (not by the
position), over every sequence of the batch, accumulating repeated ids.
"""

from . import Family

SCATTER = r"np\.add\.at\(dW, ids\.reshape\(-1\), dout\.reshape\(-1, D\)\)"
RETURN = r"(\n\s*)return dW\n"

FAMILIES = (
    Family("embedding_repeated_ids_dropped", "embedding gradient drops repeated ids (dW[ids] += dout)",
           "NumPy's buffered fancy-index assignment writes each repeated index once: dW[ids] += dout keeps "
           "one row per id instead of summing every occurrence.",
           "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D)).",
           (((SCATTER, "dW[ids.reshape(-1)] += dout.reshape(-1, D)"),),)),
    Family("embedding_grad_averaged_per_id", "dW averaged over each id's occurrences instead of summed",
           "Row v of W was copied to every position holding v, and each copy passes its own gradient back: "
           "they add up (a parameter used k times gets k contributions), there is no division by k.",
           "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D)) and nothing more.",
           (((RETURN, r"\1return dW / np.maximum(np.bincount(ids.reshape(-1), minlength=V), 1)[:, None]\n"),),)),
    Family("embedding_grad_mean_over_positions", "dW divided by the number of positions B*S (a mean, "
           "not a sum)",
           "The lookup has no mean in it: each position's gradient goes to its row in full. (A mean over "
           "the positions belongs to the loss, whose own gradient already carries it.)",
           "dW = the scatter-add of dout, undivided.",
           (((RETURN, r"\1return dW / ids.size\n"),),)),
    Family("embedding_grad_rows_by_position", "dW scattered to the rows of the positions instead of the "
           "token ids",
           "out[b, s] is row ids[b, s] of W, so dout[b, s] belongs to row ids[b, s]: the table is indexed by "
           "the token's id, whatever its position.",
           "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D)).",
           (((SCATTER, "np.add.at(dW, np.broadcast_to(np.arange(ids.shape[-1]), ids.shape).reshape(-1), "
                       "dout.reshape(-1, D))"),),
            ((SCATTER, "np.add.at(dW, np.arange(ids.size), dout.reshape(-1, D))"),))),
    Family("embedding_grad_first_sequence_only", "dW from the first sequence of the batch only",
           "Every sequence of the batch looked up rows of the same table: the scatter-add runs over all "
           "B * S positions.",
           "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D)).",
           (((SCATTER, "np.add.at(dW, ids[0].reshape(-1), dout[0].reshape(-1, D))"),),)),
    Family("embedding_scaled_by_sqrt_d", "the lookup multiplied by sqrt(D) (the Transformer paper's "
           "scaling, not nn.Embedding's)",
           "torch.nn.Embedding returns the rows themselves; the sqrt(d_model) factor of Vaswani et al. is "
           "the model's, applied outside the embedding (and then also in its gradient).",
           "out = W[ids]; dW = the scatter-add of dout.",
           (((r"return W\[ids\], \(ids, W\.shape\)", "return W[ids] * np.sqrt(W.shape[1]), (ids, W.shape)"),),
            ((r"return W\[ids\], \(ids, W\.shape\)", "return W[ids] * np.sqrt(W.shape[1]), (ids, W.shape)"),
             (RETURN, r"\1return dW * np.sqrt(D)\n")))),
    Family("embedding_grad_integer_dtype", "dW allocated with the ids' integer dtype (the gradient truncated "
           "to integers) instead of a float one",
           "np.add.at into an integer array casts every added gradient to an integer: dW must be a float "
           "array, of dout's dtype.",
           "dW = np.zeros((V, D), dtype=dout.dtype).",
           (((r"dW = np\.zeros\(\((\w+), (\w+)\)(?:, dtype=[\w.]+)?\)",
               r"dW = np.zeros((\1, \2), dtype=ids.dtype)"),),)),
    Family("embedding_ids_dout_misaligned", "ids and dout flattened in different orders (one transposed): each "
           "gradient row sent to another position's id",
           "dout[b, s] belongs to the id ids[b, s]: both must be flattened in the same (row-major) order, "
           "ids.reshape(-1) with dout.reshape(-1, D); transposing one of them pairs each gradient with "
           "another position's token.",
           "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D)).",
           (((SCATTER, "np.add.at(dW, ids.T.reshape(-1), dout.reshape(-1, D))"),),
            ((SCATTER, "np.add.at(dW, ids.reshape(-1), np.swapaxes(dout, 0, 1).reshape(-1, D))"),))),
    Family("embedding_row0_as_padding", "row 0 treated as padding (padding_idx=0): its gradient zeroed",
           "nn.Embedding has no padding row unless padding_idx is given: token 0 is a token like the "
           "others and its row gets the sum of its positions' gradients.",
           "return the scatter-add as it is (no row zeroed).",
           (((RETURN, r"\1dW[0] = 0.0\1return dW\n"),),)),
)

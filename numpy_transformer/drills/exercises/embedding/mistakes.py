"""The classic mistakes of the embedding drill: each a patch of this folder's ``solution.py``
(``(text in the solution, what a person making the mistake writes)``; see docs/drills.md)."""

from __future__ import annotations

from ...engine.definition import Mistake

MISTAKES = (
    Mistake("embedding_repeated_ids_dropped", "embedding gradient drops repeated ids (dW[ids] += dout)",
            "NumPy's buffered fancy-index assignment writes each repeated index once: dW[ids] += dout "
            "keeps one row per id instead of summing every occurrence.",
            "np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))  (or a one-hot matmul).",
        [
            ('np.add.at(dW, ids.reshape(-1), dout.reshape(-1, D))',
             'dW[ids.reshape(-1)] += dout.reshape(-1, D)'),
        ]),
)

"""Where the queries sit among the keys (ALiBi, T5's relative bias, the KV cache): with S queries and
T >= S keys, query i is the key position i + T - S (the last S of T)."""

from . import Family

FAMILIES = (
    Family("positions_top_left_aligned", "queries aligned top-left: query i placed at key position i when S < T",
           "With T keys and S <= T queries (a decode step, a cache), the queries are the LAST S positions: "
           "query i sits at key position i + T - S. Aligned top-left, a single new query is treated as "
           "position 0 (torch's is_causal=True when S != T does the same).",
           "query position = np.arange(S)[:, None] + (T - S).",
           (((r"\(np\.arange\((\w)\)\[:, None\] \+ (\w) - \1\)", r"np.arange(\1)[:, None]"),),
            ((r"np\.arange\((\w)\)\[:, None\] \+ \((\w) - \1\)", r"np.arange(\1)[:, None]"),),
            ((r"k=N - S \+ 1\)", "k=1)"),))),
    Family("positions_offset_wrong_sign", "queries offset the wrong way: query i placed at i - (T - S) "
           "instead of i + (T - S)",
           "The S queries are the LAST S of the T key positions: query i sits at key position i + T - S. "
           "Subtracting the offset puts them before the start of the sequence.",
           "query position = np.arange(S)[:, None] + (T - S).",
           (((r"\(np\.arange\((\w)\)\[:, None\] \+ (\w) - \1\)", r"(np.arange(\1)[:, None] - (\2 - \1))"),),
            ((r"np\.arange\((\w)\)\[:, None\] \+ \((\w) - \1\)", r"np.arange(\1)[:, None] - (\2 - \1)"),),
            ((r"k=N - S \+ 1\)", "k=S - N + 1)"),))),
)

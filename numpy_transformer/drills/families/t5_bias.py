"""T5's relative position bias' classic mistakes (Raffel et al., 2020; Hugging Face's
``_relative_position_bucket``): distances below max_exact get a bucket each, larger ones a
logarithmic bucket max_exact + log(n / max_exact) / log(max_distance / max_exact) * (NB - max_exact)
(truncated, capped at NB - 1); bidirectional splits the buckets into the past and future halves,
unidirectional sends the future to bucket 0. The bias W[bucket] is a lookup: its gradient a
scatter-add of dbias (H, S, T) into dW (NB, H)."""

from . import Family

_FIX_BUCKET = ("max_exact + log(n / max_exact) / log(max_distance / max_exact) * (num_buckets - max_exact), "
               "truncated, capped at num_buckets - 1.")

FAMILIES = (
    Family("t5_log_over_max_distance", "log bucket divided by log(max_distance) instead of "
           "log(max_distance / max_exact)",
           "The logarithmic buckets cover the distances max_exact .. max_distance: the log is of the "
           "ratio n / max_exact, normalised by the log of the whole range's ratio, max_distance / max_exact.",
           _FIX_BUCKET,
           (((r"/ np\.log\((\w+) / (\w+)\)", r"/ np.log(\1)"),),)),
    Family("t5_log_of_n", "log bucket from log(n) instead of log(n / max_exact)",
           "The log buckets start at max_exact: the logarithm is of n / max_exact (0 at n = max_exact).",
           _FIX_BUCKET,
           (((r"np\.log\(n / (\w+)\) /", r"np.log(n) /"),),)),
    Family("t5_log_range_num_buckets", "log buckets scaled by num_buckets instead of num_buckets - max_exact",
           "Only num_buckets - max_exact buckets are left for the logarithmic distances (the first "
           "max_exact are the exact ones).",
           _FIX_BUCKET,
           (((r"\* \((\w+) - max_exact\)", r"* \1"),),)),
    Family("t5_log_bucket_rounded", "log bucket rounded to the nearest instead of truncated",
           "The reference truncates the scaled logarithm (.to(torch.long) / astype(int)): a distance is in "
           "the bucket whose range it has reached.",
           _FIX_BUCKET,
           (((r"(\w+)\.astype\(np\.int64\)", r"np.round(\1).astype(np.int64)"),),)),
    Family("t5_large_not_capped", "large distances not capped at the last bucket (num_buckets - 1)",
           "Distances beyond max_distance share the last bucket: min(bucket, num_buckets - 1).",
           _FIX_BUCKET,
           (((r"(?m)^(\s+)large = np\.minimum\(large, \w+ - 1\)\n", r""),),)),
    Family("t5_max_exact_before_halving", "bidirectional: max_exact from the whole num_buckets, before the "
           "halving",
           "Bidirectional T5 halves num_buckets first (past, future); max_exact is half of each half.",
           "num_buckets //= 2 (bidirectional), then max_exact = num_buckets // 2.",
           (((r"max_exact = (\w+) // 2", r"max_exact = (\1 * 2 if bidirectional else \1) // 2"),),)),
    Family("t5_unidirectional_abs", "unidirectional: the future bucketed by |key - query| instead of sent to "
           "bucket 0",
           "A unidirectional (causal) bias keeps the past only: n = max(-(key - query), 0), so every future "
           "key lands in bucket 0.",
           "n = -np.minimum(rel, 0).",
           (((r"n = -np\.minimum\((\w+), 0\)", r"n = np.abs(\1)"),),)),
    Family("t5_unidirectional_future", "unidirectional: the future kept and the past clipped (max instead "
           "of min)",
           "A unidirectional bias measures how far back the key is: n = -min(key - query, 0).",
           "n = -np.minimum(rel, 0).",
           (((r"n = -np\.minimum\((\w+), 0\)", r"n = np.maximum(\1, 0)"),),)),
    Family("t5_zero_in_future_half", "bidirectional: distance 0 put in the future half (rel >= 0)",
           "The future half starts at key - query > 0; distance 0 (the query itself) is bucket 0.",
           "buckets += (rel > 0) * num_buckets.",
           (((r"\((\w+) > 0\) \* num_buckets", r"(\1 >= 0) * num_buckets"),),)),
    Family("t5_bias_reshaped_not_transposed", "bias (H, S, T) reshaped from W[buckets] (S, T, H) instead of "
           "transposed",
           "W[buckets] is (S, T, H): moving H first is a transpose(2, 0, 1); a reshape keeps the memory "
           "order and mixes heads and positions.",
           "bias = W[buckets].transpose(2, 0, 1).",
           (((r"W\[buckets\]\.transpose\(2, 0, 1\)", "W[buckets].reshape(W.shape[1], *buckets.shape)"),),)),
    Family("t5_dbias_reshaped_not_transposed", "dbias (H, S, T) reshaped to (S*T, H) without moving H last",
           "dbias[h, i, j] belongs to W[bucket[i, j], h]: flatten (S, T) with H kept apart, "
           "dbias.reshape(H, -1).T (or transpose(1, 2, 0) then reshape); reshape(-1, H) alone mixes them.",
           "np.add.at(dW, buckets.reshape(-1), dbias.reshape(H, -1).T).",
           (((r"dbias\.reshape\(H, -1\)\.T\b", "dbias.reshape(-1, H)"),),)),
    Family("t5_bias_not_transposed", "bias returned as W[buckets], (S, T, H), without moving H first",
           "W[buckets] is (S, T, H); the bias added to the (B, H, S, T) scores is (H, S, T): transpose(2, 0, 1).",
           "bias = W[buckets].transpose(2, 0, 1).",
           (((r"W\[buckets\]\.transpose\(2, 0, 1\)", "W[buckets]"),),)),
)

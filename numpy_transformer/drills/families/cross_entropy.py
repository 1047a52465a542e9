"""Cross-entropy's classic mistakes, from its formula (torch's reduction='mean'): with log-probabilities
logp = z - logsumexp(z) and the target distribution q = (1 - e) onehot(y) + e / V (label smoothing e),

    loss = (1 / n) sum over the kept rows of  -sum_c q_c logp_c
         = (1 / n) sum_kept [(1 - e) * (-logp_y) + e * (-(1/V) sum_c logp_c)]
    dlogits = dloss * (p - q) / n   on the kept rows, 0 on the rows whose target is ignore_index,

n the number of kept rows (all N without an ignore_index). Each factor of that gradient can be lost
(dloss, 1/n, the 1/V of the uniform term), each sign flipped, the two weights exchanged, the ignored
rows let in; in the forward the log-sum-exp taken of other logits than the shifted ones, the loss not
negated, the target's entry gathered as a whole column; in the backward the one-hot's 1 taken off every
entry, the log-probabilities used as probabilities, the mean taken over the classes; in the
cross_entropy and cross_entropy_options exercises alike.
"""

from . import Family

#: the last line of both backwards: the gradient times dloss over the rows the mean is taken over
RETURN = r"return d \* \(dloss / (N|n_keep)\)"

FAMILIES = (
    Family("ce_onehot_added", "the one-hot added instead of subtracted (p + onehot)",
           "d(-log p_y)/dz_k = p_k - [k == y]: the target's probability goes down, so the one-hot is "
           "subtracted.",
           "dlogits = (p - onehot(y)) * dloss / N.",
           (((r"d\[np\.arange\(N\), targets\] -= 1", "d[np.arange(N), targets] += 1"),),
            ((r"d_nll = p - np\.eye\(V\)\[t\]", "d_nll = p + np.eye(V)[t]"),))),
    Family("ce_no_minus_one", "gradient forgot the -1 at the target (softmax instead of softmax - onehot)",
           "d(-log p_y)/dz = p - onehot(y).",
           "subtract 1 at each row's target: p - onehot(y).",
           (((r"d_nll = p - np\.eye\(V\)\[t\]", "d_nll = p"),),)),
    Family("ce_column_subtract", "the one-hot subtracted from whole columns (p[:, targets] -= 1)",
           "p[:, targets] selects every row of each target column; the -1 belongs only at (n, targets[n]).",
           "p[np.arange(N), targets] -= 1.",
           (((r"d_nll = p - np\.eye\(V\)\[t\]", "d_nll = p - np.eye(V)[t].max(axis=0)"),),)),
    Family("ce_ignored_dloss", "upstream gradient dloss ignored",
           "The backward receives dL/dloss (not always 1: a loss weight, gradient accumulation...) and must "
           "multiply by it.",
           "dlogits = (p - q) * dloss / n.",
           (((RETURN, r"return d / \1"),),)),
    Family("ce_grad_not_divided_by_n", "gradient not divided by the number of rows (the forward averages)",
           "loss = (1/n) sum_n l_n, so every row's gradient carries the 1/n of the mean.",
           "dlogits = (p - q) * dloss / n.",
           (((RETURN, "return d * dloss"),),)),
    Family("ce_sum_not_mean", "loss summed over the rows instead of averaged",
           "torch's reduction='mean' divides the summed loss by the number of rows that count.",
           "divide the loss, and so the gradient, by that number.",
           (((r"loss = (\(\(\(1 - e\) \* nll \+ e \* smooth\) \* keep\)\.sum\(\)) / n_keep", r"loss = \1"),
             (RETURN, "return d * dloss")),)),
    Family("ce_ignored_rows_in_loss", "ignored rows counted in the loss (their terms not masked)",
           "A row whose target is ignore_index costs nothing: its terms are left out of the sum (only the "
           "count n_keep divides).",
           "loss = (row_loss * keep).sum() / n_keep.",
           (((r"loss = \(\(\(1 - e\) \* nll \+ e \* smooth\) \* keep\)\.sum\(\)",
              "loss = ((1 - e) * nll + e * smooth).sum()"),),)),
    Family("ce_smoothing_summed", "label smoothing's uniform term summed over the classes instead of "
           "averaged (the 1/V missing)",
           "The uniform target puts e / V on each class: its cross-entropy is -(1/V) sum_c logp_c (a mean "
           "over the V classes), and its gradient p - 1/V.",
           "smooth = -logp.mean(axis=-1); d_smooth = p - 1.0 / V.",
           (((r"smooth = -logp\.mean\(axis=-1\)", "smooth = -logp.sum(axis=-1)"),),
            ((r"smooth = -logp\.mean\(axis=-1\)", "smooth = -logp.sum(axis=-1)"),
             (r"d_smooth = p - 1\.0 / V", "d_smooth = V * p - 1.0")),
            ((r"smooth = -logp\.mean\(axis=-1\)", "smooth = -logp.sum(axis=-1)"),
             (r"d_smooth = p - 1\.0 / V", "d_smooth = p - 1.0")))),
    Family("ce_smoothing_grad_without_1_over_v", "label smoothing's gradient p - 1 instead of p - 1/V",
           "d(-(1/V) sum_c logp_c)/dz_k = p_k - 1/V: each class's share of the uniform target is 1/V, "
           "not 1.",
           "d_smooth = p - 1.0 / V.",
           (((r"d_smooth = p - 1\.0 / V", "d_smooth = p - 1.0"),),)),
    Family("ce_smoothing_weights_swapped", "label smoothing's weights swapped: e on the target term and "
           "1 - e on the uniform term",
           "q = (1 - e) onehot(y) + e / V: the target keeps 1 - e, the uniform gets e (e = 0 is the plain "
           "loss).",
           "(1 - e) * nll + e * smooth, and (1 - e) * d_nll + e * d_smooth.",
           (((r"\(1 - e\) \* nll \+ e \* smooth", "e * nll + (1 - e) * smooth"),
             (r"\(1 - e\) \* d_nll \+ e \* d_smooth", "e * d_nll + (1 - e) * d_smooth")),
            ((r"\(1 - e\) \* nll \+ e \* smooth", "e * nll + (1 - e) * smooth"),),
            ((r"\(1 - e\) \* d_nll \+ e \* d_smooth", "e * d_nll + (1 - e) * d_smooth"),))),
    Family("ce_lse_of_unshifted_logits", "log-sum-exp of the unshifted logits subtracted from the shifted ones "
           "(logp = z - log sum exp(logits), z = logits - max)",
           "log softmax(x) = z - log sum_j exp(z_j) with the SAME z on both sides: the shift by the row max "
           "cancels only when it is applied to both (and keeps exp from overflowing). Mixing the shifted z "
           "with the unshifted logits leaves the max in the result.",
           "logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True)).",
           (((r"np\.log\(np\.exp\(z\)\.sum\(", "np.log(np.exp(logits).sum("),),)),
    Family("ce_loss_not_negated", "the loss not negated: the mean log-probability instead of minus it (the sign)",
           "Cross-entropy is -log p_y: log-probabilities are <= 0, and the loss is their negation, >= 0 and "
           "smallest when the target's probability is 1.",
           "loss = -logp[np.arange(N), targets].mean().",
           (((r"(loss|nll) = -logp\[", r"\1 = logp["),),)),
    Family("ce_loss_gathers_columns", "the target's log-probability gathered as logp[:, targets] (an N x N block) "
           "instead of one entry per row",
           "logp[:, targets] takes every row of each target column: N x N entries, mostly other rows' "
           "targets. Each row n contributes only logp[n, targets[n]]: index with np.arange(N) and targets "
           "together.",
           "logp[np.arange(N), targets].",
           (((r"logp\[np\.arange\(N\), (\w+)\]", r"logp[:, \1]"),),)),
    Family("ce_onehot_everywhere", "the one-hot's 1 subtracted from every entry instead of only at the target "
           "(p - 1)",
           "d(-log p_y)/dz_k = p_k - [k == y]: the 1 sits at the target class of each row only (the one-hot); "
           "every other class keeps p_k.",
           "d[np.arange(N), targets] -= 1, or p - np.eye(V)[targets].",
           (((r"d\[np\.arange\(N\), targets\] -= 1", "d -= 1"),),
            ((r"d_nll = p - np\.eye\(V\)\[t\]", "d_nll = p - 1.0"),))),
    Family("ce_log_probabilities_as_probabilities", "the log-probabilities used as the probabilities in the "
           "backward (log softmax where softmax = exp(logp) is needed)",
           "The gradient is p - onehot(y) with p = softmax(z) = exp(logp): the probabilities, in [0, 1], "
           "not their logarithms.",
           "cache np.exp(logp) (or p = np.exp(logp) in the backward).",
           (((r"return loss, \(np\.exp\(logp\),", "return loss, (logp,"),),)),
    Family("ce_mean_over_classes", "gradient divided by the number of classes V instead of the number of rows N "
           "(the mean is over the rows)",
           "loss = (1/N) sum_n l_n averages over the N rows (the batch), so the gradient carries 1/N; V, the "
           "number of classes, is not what the mean divides by.",
           "dlogits = (p - onehot) * dloss / N with N = p.shape[0], the rows.",
           (((RETURN, "return d * (dloss / p.shape[-1])"),),)),
)

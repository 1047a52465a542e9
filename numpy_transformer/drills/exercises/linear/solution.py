"""Linear layer y = x W^T + b (torch's weight layout), forward and backward."""



def linear_forward(x, W, b):
    """x (N..., Din), W (Dout, Din), b (Dout,) -> (y (N..., Dout), cache)."""
    y = x @ W.T + b                                             # (N..., Dout)
    return y, (x, W)


def linear_backward(dy, cache):
    """dy (N..., Dout) -> (dx (N..., Din), dW (Dout, Din), db (Dout,)).

    y[n, o] = sum_i x[n, i] W[o, i] + b[o], so
      dx[n, i] = sum_o dy[n, o] W[o, i]       ->  dx = dy @ W
      dW[o, i] = sum_n dy[n, o] x[n, i]       ->  dW = dy^T @ x, summed over every leading position
      db[o]    = sum_n dy[n, o]               (b is added to every row)
    """
    x, W = cache
    x2 = x.reshape(-1, x.shape[-1])                             # (N, Din)
    dy2 = dy.reshape(-1, dy.shape[-1])                          # (N, Dout)
    dx = dy @ W                                                 # (N..., Din)
    dW = dy2.T @ x2                                             # (Dout, Din)
    db = dy2.sum(axis=0)                                        # (Dout,)
    return dx, dW, db

"""The scaled_dot_product_attention drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

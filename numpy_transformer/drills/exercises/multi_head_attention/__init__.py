"""The multi_head_attention drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

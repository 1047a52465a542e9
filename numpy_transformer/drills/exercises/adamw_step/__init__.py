"""The adamw_step drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

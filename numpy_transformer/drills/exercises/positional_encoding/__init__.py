"""The positional_encoding drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

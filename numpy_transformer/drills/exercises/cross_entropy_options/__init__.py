"""The cross_entropy_options drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

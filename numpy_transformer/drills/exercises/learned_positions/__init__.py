"""The learned_positions drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

"""The geglu drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

"""The rms_norm drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

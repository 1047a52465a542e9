"""The relative_position_bias drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

"""The grouped_query_attention drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

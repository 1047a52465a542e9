"""The flash_attention_backward drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

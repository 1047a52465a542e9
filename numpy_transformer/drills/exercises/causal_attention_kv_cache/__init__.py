"""The causal_attention_kv_cache drill (one folder: exercise.py, skeleton.py, solution.py, mistakes.py)."""

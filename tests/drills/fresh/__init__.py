"""The second held-out set of UNLISTED drill mistakes, one data file per exercise.

Written apart from the grader's list of known mistakes AND apart from the first held-out set's
diagnoses work (``tests/drills/unlisted/``): each file holds ``MISTAKES``, single-mistake variants of
that exercise's solution.py as text patches (old -> new, each old text found exactly once), none
repeating a mistake of the first set, with a plain-words ``label`` and ``keywords`` any of which a
correct diagnosis would contain, and ``CORRECT``, a solution written from scratch (in a style unlike
solution.py's and the first set's) that must pass. ``tests/drills/test_drill_fresh.py`` grades them.
"""

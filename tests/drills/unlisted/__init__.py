"""A held-out set of UNLISTED drill mistakes, one data file per exercise.

Written by someone who never read the grader's list of known mistakes (the exercises' mistakes.py):
each file holds ``MISTAKES``, single-mistake variants of that exercise's solution.py as text patches
(old -> new, each old text found exactly once), with a plain-words ``label`` and ``keywords`` any of
which a correct diagnosis would contain, and ``CORRECT``, a solution written from scratch that must
pass. ``tests/drills/test_drill_unlisted.py`` grades them all.
"""

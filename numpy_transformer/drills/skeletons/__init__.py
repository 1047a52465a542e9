"""Skeleton files of the drills (written by `drill start NAME`: exact signatures, no solution)."""

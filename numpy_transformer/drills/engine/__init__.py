"""The drills' machinery, the same for every exercise (the exercises themselves are folders in
:mod:`numpy_transformer.drills.exercises`):

* :mod:`.definition` — the data types: :class:`~.definition.Exercise`, :class:`~.definition.Mistake`
  (a source patch of the exercise's solution), :class:`~.definition.Case`;
* :mod:`.grader` — ``drill check``: starts the grading child, runs the cases, prints the report;
* :mod:`.worker` — the grading child (``python -I .../engine/worker.py``), which loads :mod:`.wire`,
  :mod:`.guard` and :mod:`.harness` by file path and never the package;
* :mod:`.spawn` — starting, talking to and ending that child; :mod:`.judge` — the parent's verdict on
  each case (:mod:`.candidate`: the child's answers as it reads them); :mod:`.matching` — the known
  mistakes run and matched, bounded by counts (:mod:`.patching`: patched solutions compiled chunk by
  chunk); :mod:`.failing` and :mod:`.probe` — the smallest failing case, the localisation and the
  gradient check;
* :mod:`.diagnose`, :mod:`.diagnosis` — comparisons, hints, which known mistake explains a failure;
* :mod:`.readings` — the verified readings of a wrong array (a named factor, dout replaced by the
  input, one additive term off); :mod:`.localise` — which sub-block of a composite layer goes wrong;
  the op families of mistakes live in :mod:`numpy_transformer.drills.families`;
* :mod:`.report` — the report's text; :mod:`.stats` — ``drill stats``; :mod:`.mock` — ``drill mock``;
* :mod:`.upstream` — the cases' upstream gradients, from the gradient checkers' own stream.
"""

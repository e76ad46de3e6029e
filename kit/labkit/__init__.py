"""The instructor's kit: grade a room's notebooks, generate the learners' copies.

What only an instructor or a maintainer runs (kit/README.md lists the commands):
``python -m labkit.capstone grade FOLDER`` (:mod:`labkit.capstone`, with
:mod:`labkit.notebooks`, :mod:`labkit.room`, :mod:`labkit.watch`, :mod:`labkit.learner`)
and ``python -m labkit.exercises build|check|execute`` (:mod:`labkit.exercises`).
The graders themselves are the ones a learner calls from a notebook
(:mod:`labsupport.runtime.check`); the kit runs them over a folder. Imports point one
way: the kit imports ``labsupport``, never the other way round.
"""

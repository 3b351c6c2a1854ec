"""Fuzz campaign of issue 9: atheris harnesses (``fuzz_*.py``), their targets and seed generator.

pytest collects none of the harnesses; ``tests/test_fuzz_short.py`` runs each
one for a few thousand inputs. See docs/fuzzing.md for the long runs.
"""

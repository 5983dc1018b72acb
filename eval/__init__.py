"""Evaluation: suites, answer grading with math-verify, Avg@K and the evaluation runner."""

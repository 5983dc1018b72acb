"""Runs: the command line, a run directory and its lifecycle, grids of runs as jobs, status, tracking."""

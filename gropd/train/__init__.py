"""Training: one GR-OPD/OPD step, the loop around it (schedule, prompts, collapse), and the scoring pass."""

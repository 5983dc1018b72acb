"""What the trainer and the evaluation run on: log-probs, templates, checkpoints, the rollout and teacher
backends, and the checks that a model fits the machine."""

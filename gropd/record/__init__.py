"""A run's record: its directory under results/ (status, config, metrics, checkpoints, evaluation) and
its trackers (TensorBoard, W&B); written by training, read back by runs and reports."""

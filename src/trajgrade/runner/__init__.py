"""Grading files, pipes and followed logs: the run, its state and steps,
inputs being tracked, rotated files found again, the durable store, datasets.
"""

__all__: tuple[str, ...] = ()

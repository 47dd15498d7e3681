"""The streaming worker: a Faust app around the pure detection core (see :mod:`streams.worker.app`)."""

"""scaling-ladder: run a scaling ladder of LM training runs as a Ray DAG, fit scaling laws to the
rungs, predict the hero run's loss curve, and watch its real curve against the prediction.

The package imports nothing heavy: JAX, Ray and W&B load only in the commands that train
(`pip install 'scaling-ladder[train]'`); the fits library is `import fits`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scaling-ladder")
except PackageNotFoundError:  # a source tree on sys.path without an install (no metadata to read)
    __version__ = "0+unknown"

__all__ = ["__version__"]

"""The ways a fit can fail for reasons of the data or the gains, each with a message that says what to do.

(A parameter refused is `kpca.params.ParamError`.)
"""


class Degenerate(ValueError):
    """The data has nothing (or too little) to fit: all rows one point in feature space, fewer directions
    than components, no distances to set a width from."""


class Diverged(RuntimeError):
    """The iteration blew up even after the gain was reduced."""


class Stopped(Exception):
    """A one-shot fit stopped because its caller asked (its ``report`` returned True): a cancel."""

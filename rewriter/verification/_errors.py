"""The error type of verification: bad models or options met while comparing two models."""

from __future__ import annotations

from rewriter._errors import AdvisedError, OptionError, RewriteError


class VerifyError(RewriteError):
    """Two models cannot be compared: mismatched signatures, unrunnable ops, bad input ranges.

    A *disagreement* between the models is not an error: it is a `VerifyResult` with
    `ok=False`. This error means no verdict could be reached at all.
    """


class VerifyOptionError(VerifyError, OptionError):
    """An input option of a check is wrong (a dim no input has, a size below 1).

    An `OptionError`, so the command line names its flag, and a `VerifyError` like the rest.
    """


class InputsRejectedError(VerifyError, AdvisedError):
    """The original model refuses every input the check made.

    `remedies` names the options that help: input shapes, dims, value ranges, samples.
    """

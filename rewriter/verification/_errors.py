"""The error type of verification: bad models or options met while comparing two models."""

from __future__ import annotations

from rewriter._errors import RewriteError


class VerifyError(RewriteError):
    """Two models cannot be compared: mismatched signatures, unrunnable ops, bad input ranges.

    A *disagreement* between the models is not an error: it is a `VerifyResult` with
    `ok=False`. This error means no verdict could be reached at all.
    """

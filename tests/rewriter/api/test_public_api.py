"""The package's public names are plain values: functions with real signatures, one options type."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import rewriter
import rewriter.verification


def test_verify_is_a_function_whose_signature_shows_its_arguments():
    # Importing the verification package (above) does not hide the function.
    assert inspect.isfunction(rewriter.verify)
    parameters = list(inspect.signature(rewriter.verify).parameters)
    assert parameters[:2] == ["original", "rewritten"]


def test_rewrite_takes_one_frozen_options_value():
    assert list(inspect.signature(rewriter.rewrite).parameters) == ["model", "rules", "options"]
    options = rewriter.RewriteOptions(target_opset=20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.target_opset = 17  # type: ignore[misc]


@pytest.mark.parametrize("name", rewriter.__all__)
def test_every_public_name_resolves(name):
    assert getattr(rewriter, name) is not None

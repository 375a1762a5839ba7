"""Whether a model surgery made is valid ONNX, said in words.

Before onnx's checker is asked, the usual gaps are looked for by name: a graph input or
output without a type (ONNX requires one; a value the source model never typed and inference
could not type either). The checker's own text, when it still objects, is given as a reason
inside a sentence that says what was being made, never as the whole message.
"""

from __future__ import annotations

import re

import ir
from rewriter._errors import RewriteError


def give_types(model: ir.Model, what: str) -> None:
    """Type the graph inputs and outputs that lack a declared type from the facts.

    Raises:
        RewriteError: a value whose type neither the model nor inference knows.
    """
    graph = model.graph
    for role, values in (("input", graph.inputs), ("output", graph.outputs)):
        for value in values:
            if value.type is not None:
                continue
            value.type = ir.fact_type(value)
            if value.type is None:
                raise RewriteError(
                    f"{what}: {role} {value.name!r} has no type: the model does not declare "
                    "one and shape inference finds none, and ONNX needs one for every graph "
                    f"{role}"
                )


def check_valid(model: ir.Model, what: str) -> None:
    """Refuse a model onnx's checker rejects, saying what was being made and why.

    Raises:
        RewriteError: the model is not valid ONNX.
    """
    problem = ir.check_model(model)
    if problem is not None:
        raise RewriteError(f"{what} would not be a valid ONNX model: {_in_words(problem)}")


def _in_words(problem: str) -> str:
    """The checker's first line without its bracketed error class and context."""
    text = re.sub(r"^\s*(\[[A-Za-z]+\]\s*)+", "", problem.strip())
    text = text.split("==> Context:")[0].strip().rstrip(".")
    return (
        f"onnx's checker reports that {text[:1].lower()}{text[1:]}"
        if text
        else "onnx's checker rejects it"
    )

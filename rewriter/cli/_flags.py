"""The command line's flag for each option the API names in its errors.

Errors below the command line speak the API's language (`OptionError`: `input_shapes['x']:
no graph input of that name`; `AdvisedError`: the options that would help); the command line
reports them with its own flags (`--input-shape x: no graph input of that name`).
"""

from __future__ import annotations

FLAGS: dict[str, str] = {
    # RewriteOptions and the run around it
    "input_shapes": "--input-shape",
    "target_opset": "--target-opset",
    "ray_address": "--ray",
    "jobs": "--jobs",
    # InputOptions (verification, accuracy budget)
    "shapes": "--input-shape",
    "dims": "--dim",
    "ranges": "--input",
    "samples": "--inputs",
    # surgery and extract-rule: extract, graft, split
    "inputs": "--inputs",
    "outputs": "--outputs",
    "connect": "--connect",
    "stages": "--stages",
    "balance": "--balance",
}

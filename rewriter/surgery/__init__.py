"""Model surgery: cut a subgraph out, graft two models, split into stages, find matches.

Every result is a valid model that can be checked against the original:

* `extract(model, inputs, outputs)`: exactly the nodes between some values, as a runnable
  model; `verify_extracted` runs it against the original's own values of those names.
* `graft(a, b, connect)`: B fed by A's values (through an adapter op when given), as one
  model; `verify_grafted` runs it against A and B run one after the other.
* `split(model, stages)`: consecutive stages of balanced cost; `write_pipeline` saves them
  with a `pipeline.json` manifest, `load_pipeline` validates a manifest against its schema
  and chains the stages back into one model (which `rewrite verify` compares).
* `find(model, rules, queries)`: where rules or match lines match, rewriting nothing.

Refusals are `RewriteError`s in words (the value, node or manifest field at fault), never a
raw checker message.
"""

from __future__ import annotations

from rewriter.surgery._extract import extract, verify_extracted
from rewriter.surgery._find import find
from rewriter.surgery._graft import Grafted, graft, parse_connection
from rewriter.surgery._graft import verify as verify_grafted
from rewriter.surgery._graft_verify import GraftPlan, GraftVerification
from rewriter.surgery._pipeline import PIPELINE_FORMAT, load_pipeline, write_pipeline
from rewriter.surgery._split import Stage, split

__all__ = [
    "PIPELINE_FORMAT",
    "GraftPlan",
    "GraftVerification",
    "Grafted",
    "Stage",
    "extract",
    "find",
    "graft",
    "load_pipeline",
    "parse_connection",
    "split",
    "verify_extracted",
    "verify_grafted",
    "write_pipeline",
]

"""Proofs kept in the user's cache folder: a rule's status without proving it again.

`rewrite prove` stores what it found for each rule (`remember`); a report asks for a rule's
status (`recall`) and gets it back when the same rule was proved by the same prover: the
entry is named by a digest of the rule as the rule IR prints it, with the named constraints
it calls spelled out, and of the prover's code and the versions of z3 and onnxruntime (which
replays counterexamples). A changed rule, constraint or prover finds no entry: a stale
status is never shown. The options of the proof (time per rule, ranks) are recorded in the
entry, not in its name: the last proof made is the one recalled.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import z3

from rewriter import rules
from rewriter.dsl import CacheFolder
from rewriter.prove._proof import ProofStatus, ProveOptions, RuleProof

logger = logging.getLogger(__name__)

_FORMAT = "1"


def proof_entry_name(rule: rules.Rule) -> str:
    """The cache entry that holds `rule`'s proof (see the module docstring)."""
    spelled = dataclasses.replace(rule, conditions=tuple(rules.inline_constraints(rule.conditions)))
    text = "\0".join((_FORMAT, _prover_stamp(), rules.rule_text(spelled)))
    return f"proof-{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


def remember(rule: rules.Rule, proof: RuleProof, options: ProveOptions, cache: CacheFolder) -> None:
    """Store `proof` of `rule`, made with `options`; a cache that cannot be written is skipped."""
    entry = proof.as_json()
    entry["options"] = {"timeout": options.timeout, "max_rank": options.max_rank}
    try:
        data = json.dumps(entry, allow_nan=False).encode()
    except ValueError:  # a counterexample holding a value JSON cannot (it has "nan" strings)
        entry["counterexample"] = None
        data = json.dumps(entry).encode()
    cache.write(proof_entry_name(rule), data)


def remember_all(
    proved: Sequence[rules.Rule],
    proofs: Sequence[RuleProof],
    options: ProveOptions,
    cache: CacheFolder,
) -> None:
    """`remember` each rule's proof (`proofs` as `prove_rules` gives them for `proved`)."""
    by_name = {rule.name: rule for rule in proved}
    for proof in proofs:
        remember(by_name[proof.name], proof, options, cache)


@dataclasses.dataclass(frozen=True, slots=True)
class RecalledProof:
    """A proof on record: its status, why or how far, and the options it was made with."""

    status: ProofStatus
    reason: str
    coverage: str
    exact: bool
    complete: bool
    timeout: float

    def describe(self) -> str:
        """`proved (ranks 0-3; ...)`, `refuted: at [0] ...`, `unsupported: op ...`."""
        if self.status is ProofStatus.PROVED:
            what = "proved" if self.exact else "proved up to rounding"
            return f"{what} ({self.coverage})" if self.coverage else what
        return f"{self.status.value}: {self.reason}"


def recall(rule: rules.Rule, cache: CacheFolder) -> RecalledProof | None:
    """The proof of `rule` on record, or None (never proved as written, or by this prover)."""
    data = cache.read(proof_entry_name(rule))
    if data is None:
        return None
    try:
        entry = json.loads(data)
        return RecalledProof(
            ProofStatus(entry["status"]),
            str(entry.get("reason", "")),
            str(entry.get("coverage", "")),
            bool(entry.get("exact", True)),
            bool(entry.get("complete", True)),
            float(entry.get("options", {}).get("timeout", 0.0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        logger.debug("proof entry of %s is unusable (%s)", rule.name, exc)
        return None


@functools.cache
def _prover_stamp() -> str:
    stamps = [f"z3 {z3.get_version_string()}", f"onnxruntime {_version('onnxruntime')}"]
    for module in sorted(Path(__file__).parent.glob("*.py")):
        stat = module.stat()
        stamps.append(f"{module.name} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(stamps)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"

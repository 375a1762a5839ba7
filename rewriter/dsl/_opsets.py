"""The opset versions a rule can apply at, from its `requires` clauses.

A rule without `requires` for a domain applies at every version of it. The checks judge a
node line's attributes against the schema versions in force somewhere in that range (an
attribute an op lost in opset 7 is an error in a rule that requires opset 7 or later), and
the language server shows the schema in force at the newest version of the range.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import ir
from rewriter.dsl import _ast as ast

if TYPE_CHECKING:
    import onnx.defs


@dataclasses.dataclass(frozen=True, slots=True)
class OpsetRange:
    """Opset versions `low` to `high` of one domain, inclusive; `high` None: no upper bound."""

    low: int = 0
    high: int | None = None

    @property
    def empty(self) -> bool:
        """True when no version lies in the range."""
        return self.high is not None and self.low > self.high

    @property
    def bounded(self) -> bool:
        """True when a `requires` narrows the range at all."""
        return self.low > 1 or self.high is not None

    def narrow(self, op: str, version: int) -> OpsetRange:
        """The range that also satisfies `opset OP VERSION`."""
        low, high = self.low, self.high
        if op in (">=", "=="):
            low = max(low, version)
        if op == ">":
            low = max(low, version + 1)
        if op in ("<=", "=="):
            high = version if high is None else min(high, version)
        if op == "<":
            high = version - 1 if high is None else min(high, version - 1)
        return OpsetRange(low, high)

    def newest(self, domain: str = "") -> int:
        """The newest version in the range that onnx defines (the range's low end if none)."""
        latest = ir.schemas.latest_opset(domain)
        high = latest if self.high is None else min(self.high, latest)
        return max(high, self.low, 1)

    def describe(self) -> str:
        """`opset >= 7`, `opset < 13`, `opsets 7 to 12`, or `any opset`."""
        if self.high is None:
            return f"opset >= {self.low}" if self.low > 1 else "any opset"
        if self.low <= 1:
            return f"opset <= {self.high}"
        if self.low == self.high:
            return f"opset {self.low}"
        return f"opsets {self.low} to {self.high}"

    def schemas(self, op_type: str, domain: str = "") -> tuple[onnx.defs.OpSchema, ...]:
        """The versions of an op's schema in force at some opset of the range, oldest first."""
        versions = ir.schemas.schema_versions(op_type, domain)
        chosen = []
        for index, schema in enumerate(versions):
            since = int(schema.since_version)
            until = (
                int(versions[index + 1].since_version) - 1 if index + 1 < len(versions) else None
            )
            starts_in_time = self.high is None or since <= self.high
            lasts_long_enough = until is None or until >= self.low
            if starts_in_time and lasts_long_enough:
                chosen.append(schema)
        return tuple(chosen)


def opset_range(rule: ast.Rule, domain: str = "") -> OpsetRange:
    """The versions of `domain` (default: the ONNX domain) at which `rule` can apply."""
    wanted = ir.schemas.normalize_domain(domain)
    found = OpsetRange()
    for requirement in rule.requires:
        if ir.schemas.normalize_domain(requirement.domain) == wanted:
            found = found.narrow(requirement.op, requirement.version)
    return found

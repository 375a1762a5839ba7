"""Loading rule files whose parse is cached does not load the parser (nor Lark).

Lark and the parser cost a plain `rewrite` start-up time; with the parses in the user's
cache folder they are not needed, and the command line should not load them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

RULES = "rule mul_one: y = Mul (x, 1) => y = x\n"

# Loads argv[1] through the API, then says which parser modules were loaded and the rules.
_SCRIPT = """
import sys
import rewriter.api
ruleset = rewriter.api.load_rules([sys.argv[1]])
print(sorted(m for m in sys.modules if m == "lark" or m == "rewriter.dsl._parser"))
print([rule.name for rule in ruleset.rules])
"""


def _load_in_fresh_interpreter(rules: Path, cache_home: Path) -> list[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(rules)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_cached_parse_needs_no_parser(tmp_path):
    rules = tmp_path / "neg.rw"
    rules.write_text(RULES)
    cache = tmp_path / "cache"
    first = _load_in_fresh_interpreter(rules, cache)
    assert first == ["['lark', 'rewriter.dsl._parser']", "['mul_one']"]
    assert _load_in_fresh_interpreter(rules, cache) == ["[]", "['mul_one']"]

"""`python -m rewriter ...` is the `rewrite` command."""

from __future__ import annotations

from rewriter.cli import main

raise SystemExit(main())

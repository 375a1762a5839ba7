"""`python -m rewriter.cli ...` is the `rewrite` command."""

from __future__ import annotations

from rewriter.cli._main import main

raise SystemExit(main())

"""The standard rule library: `.rw` files only (this file exists so the rules ship as package data)."""

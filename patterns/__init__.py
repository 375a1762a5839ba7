"""The standard rule library: `.rw` files only.

This file exists so that the rules ship as package data.
"""

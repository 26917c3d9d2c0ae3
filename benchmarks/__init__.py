"""memcert's benchmarks: ``python -m benchmarks`` (``make bench``) runs them all.

Every figure is a ratio against a baseline measured in the same run, because the
machines this runs on are shared and noisy; absolute numbers are printed for context.
"""

"""memcert's chaos layer: the runner, fault injectors, reports and the CLI.

It sits above ``invariants``: it drives any backend through the contract, records the
history, and hands it to the checkers, which alone define the invariants.
"""

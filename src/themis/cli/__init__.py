"""The ``themis`` command line: ``simulate``, ``compare``, ``auction``, ``policies``.

Defaults live in ``defaults``; ``main.main`` is the console entry point.
"""
